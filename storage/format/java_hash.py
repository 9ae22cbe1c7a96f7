"""Java's `String.hashCode`, which RocketMQ stores on disk (consume queue tag codes, index
key hashes): h = 31*h + c over UTF-16 code units, as a wrapping signed 32-bit int.

`java_string_hash` is the C twin (storage/format/_records.c) of `java_string_hash_reference`
unless MQSTORE_NO_EXTENSIONS=1 (storage/format/compiled.py)."""

from __future__ import annotations

from . import compiled

_MASK = 0xFFFFFFFF


def java_string_hash_reference(text: str) -> int:
    """`text.hashCode()` as Java computes it (characters outside the BMP count as two
    UTF-16 code units, a surrogate pair)."""
    value = 0
    if text.isascii():
        for byte in text.encode("ascii"):
            value = (31 * value + byte) & _MASK
    else:
        encoded = text.encode("utf-16-be")
        for index in range(0, len(encoded), 2):
            value = (31 * value + (encoded[index] << 8 | encoded[index + 1])) & _MASK
    return value - (1 << 32) if value & 0x80000000 else value


java_string_hash = compiled.pick(java_string_hash_reference)
