"""Message properties: `k\\x01v\\x02k\\x01v\\x02...` in UTF-8.

RocketMQ ≤ 4.9.0 and ≥ 5.2.0 end the string with a separator; 4.9.1–5.1.4 omit the last one
(#2883).  We write the trailing separator and read both forms.  The decoder follows
RocketMQ's `string2messageProperties`: split on 0x02, ignore pieces shorter than 3 characters,
and require 0x01 strictly inside a piece.  `decode_properties` is the C twin
(storage/format/_records.c) of `decode_properties_reference` unless MQSTORE_NO_EXTENSIONS=1
(storage/format/compiled.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import MessageIllegalError
from . import compiled

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQUE_KEY = "UNIQ_KEY"
PROPERTY_WAIT_STORE_OK = "WAIT"
KEY_SEPARATOR = " "
"""KEYS holds several keys separated by one space (RocketMQ `MessageConst.KEY_SEPARATOR`)."""


def encode_properties(properties: Mapping[str, str]) -> bytes:
    """Encode a mapping; raise `MessageIllegalError` for a name or value that would not
    survive RocketMQ's decoder (empty, or containing a separator)."""
    if not properties:
        return b""
    parts = []
    for name, value in properties.items():
        _check_text(name, what="property name")
        _check_text(value, what=f"value of property {name!r}")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}")
    return "".join(parts).encode("utf-8")


def decode_properties_reference(encoded: bytes | memoryview) -> dict[str, str]:
    if not encoded:
        return {}
    text = bytes(encoded).decode("utf-8", errors="replace")
    properties: dict[str, str] = {}
    for piece in text.split(PROPERTY_SEPARATOR):
        if len(piece) < 3:
            continue
        index = piece.find(NAME_VALUE_SEPARATOR)
        if 0 < index < len(piece) - 1:
            properties[piece[:index]] = piece[index + 1:]
    return properties


decode_properties = compiled.pick(decode_properties_reference)


def _check_text(text: object, *, what: str) -> None:
    if not isinstance(text, str):
        raise MessageIllegalError(f"{what} must be a string, not {type(text).__name__}")
    if not text:
        raise MessageIllegalError(f"{what} is empty (RocketMQ's decoder would drop it)")
    if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
        raise MessageIllegalError(f"{what} {text!r} contains a \\x01 or \\x02 separator")
