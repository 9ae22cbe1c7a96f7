"""Java String.hashCode vectors, printed by OpenJDK 17 (`jshell`: `"TagA".hashCode()` etc.)."""

from __future__ import annotations

import pytest

from mqstore.storage.format.java_hash import java_string_hash


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0),
    ("a", 97),
    ("TagA", 2598919),
    ("hello", 99162322),
    ("polygenelubricants", -2147483648),  # the famous Integer.MIN_VALUE hash
    ("TopicTest#key-1", 204089217),
    ("é", 233),
    ("😀", 1772899),  # a surrogate pair: two UTF-16 code units
])
def test_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
