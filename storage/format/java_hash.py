"""Java's `String.hashCode`, which RocketMQ stores on disk (consume queue tag codes, index
key hashes): h = 31*h + c over UTF-16 code units, as a wrapping signed 32-bit int."""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
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
