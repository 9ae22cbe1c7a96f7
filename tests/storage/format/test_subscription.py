"""Tag subscription expressions, parsed as RocketMQ's FilterAPI does, and what is refused."""

from __future__ import annotations

import pytest

from mqstore.storage import SubscriptionExpressionError, parse_tags
from mqstore.storage.format.subscription import tag_codes


@pytest.mark.parametrize(("expression", "tags"), [
    (None, None), ("", None), ("*", None), ("  *  ", None), ([], None),
    ("red", ("red",)), ("TagA || TagB", ("TagA", "TagB")), ("a||b||a", ("a", "b")),
    ("a ||", ("a",)), (["red", " blue "], ("red", "blue")), ("a|b", ("a|b",)),
])
def test_expressions_parse_as_rocketmq_clients_write_them(
        expression: str | list[str] | None, tags: tuple[str, ...] | None) -> None:
    assert parse_tags(expression) == tags


@pytest.mark.parametrize(("expression", "problem"), [
    ("||", "names no tag"), (" || ", "names no tag"), (["", " "], "names no tag"),
    ("* || a", "cannot be combined"), (42, "not int"), (["a", 1], "not list"),
])
def test_what_cannot_be_parsed_is_refused(expression: object, problem: str) -> None:
    with pytest.raises(SubscriptionExpressionError, match=problem):
        parse_tags(expression)  # type: ignore[arg-type]


def test_too_many_tags_are_refused() -> None:
    with pytest.raises(SubscriptionExpressionError, match="maximum is 2"):
        parse_tags("a || b || c", tags_max=2)


def test_tag_codes_are_java_hash_codes() -> None:
    assert tag_codes(["a", "b"]) == frozenset({97, 98})
