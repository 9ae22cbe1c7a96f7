"""A get with a property filter (SQL92): only the messages it passes, judged on each record's
whole stored property map; and a get without one decodes no more than it did before."""

from __future__ import annotations

import time

import pytest

from mqstore.storage import GetStatus, Message, MessageStore
from mqstore.storage.filters import compile_sql92
from mqstore.storage.format import properties as properties_module
from mqstore.storage.reads import get as get_module

VALUES = ("3", "7", None, "x", "9", "6.5")
"""The reference's end-to-end run: of these, `a > 5 AND TAGS = 'tq'` passes only 7 (9 has
another tag)."""


@pytest.fixture
def filled(store: MessageStore) -> MessageStore:
    for index, value in enumerate(VALUES):
        store.put(Message("Sql", 0, b"m%d" % index, tags="other" if value == "9" else "tq",
                          keys=[f"k{index}"], properties={} if value is None else {"a": value}))
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.002)
    return store


def _values(result: object) -> list[str | None]:
    return [message.properties.get("a") for message in result.messages]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("expression", "passed"), [
    ("a > 5 AND TAGS = 'tq'", ["7"]),
    ("a > 5", ["7", "9"]),
    ("a > 5.0", ["7", "9", "6.5"]),
    ("a IS NULL", [None]),
    ("KEYS = 'k2'", [None]),  # system properties are in the map too
    ("TAGS = 'tq'", ["3", "7", None, "x", "6.5"]),
])
def test_only_what_the_filter_passes(filled: MessageStore, expression: str,
                                     passed: list[str | None]) -> None:
    sql = compile_sql92(expression)
    with filled.get("Sql", 0, 0, 32, property_filter=sql) as result:
        assert _values(result) == passed
        assert result.status is GetStatus.FOUND
        assert result.next_offset == len(VALUES)
    with filled.get("Sql", 0, 0, 32, property_filter=sql, records_only=True) as raw:
        assert raw.messages == []
        assert len(raw.records) == len(passed)


def test_nothing_passes_answers_no_matched_message_past_the_scan(filled: MessageStore) -> None:
    with filled.get("Sql", 0, 0, 32, property_filter=compile_sql92("a > 100"),
                    records_only=True) as result:
        assert (result.status, result.records, result.next_offset) == (
            GetStatus.NO_MATCHED_MESSAGE, [], len(VALUES))


def test_tags_and_a_property_filter_both_apply(filled: MessageStore) -> None:
    with filled.get("Sql", 0, 0, 32, tags="other", property_filter=compile_sql92("a > 5")
                    ) as result:
        assert _values(result) == ["9"]


def test_only_a_filtered_get_decodes_properties(filled: MessageStore,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A `*` get of records decodes no properties; a tag get decodes those of the entries
    whose tags code matches; a SQL92 get those of every entry."""
    calls = []

    def counted(encoded: bytes | memoryview) -> dict[str, str]:
        calls.append(1)
        return properties_module.decode_properties(encoded)

    monkeypatch.setattr(get_module, "decode_properties", counted)
    decoded = {}
    for name, arguments in {"all": {}, "tag": {"tags": "other"},
                            "sql": {"property_filter": compile_sql92("a > 5")}}.items():
        calls.clear()
        with filled.get("Sql", 0, 0, 32, records_only=True, **arguments):  # type: ignore[arg-type]
            decoded[name] = len(calls)
    assert decoded == {"all": 0, "tag": 1, "sql": len(VALUES)}
