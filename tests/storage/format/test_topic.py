from __future__ import annotations

import pytest

from mqstore.storage import TopicNameError, validate_topic


def test_legal_names_pass() -> None:
    for name in ["a", "Topic_1", "%RETRY%group-a", "a|b", "x" * 255]:
        assert validate_topic(name, size_bytes_max=255) == name.encode()


@pytest.mark.parametrize(("name", "words"), [
    ("", "empty"),
    ("a b", "illegal character ' ' at index 1"),
    ("topic/x", "illegal character '/' at index 5"),
    ("tópic", "non-ASCII character 'ó' at index 1"),
    ("x" * 256, "256 characters long; the maximum is 255"),
    (b"bytes", "must be a string"),
])
def test_each_rule_has_its_own_error(name: object, words: str) -> None:
    with pytest.raises(TopicNameError, match=words.replace("|", r"\|")):
        validate_topic(name, size_bytes_max=255)
