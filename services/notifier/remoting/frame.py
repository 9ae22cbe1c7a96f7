"""One remoting frame: RocketMQ's `RemotingCommand` on the wire, JSON or binary header.

Frame (big-endian):

    offset  size  field
    0       4     length           bytes after this field: 4 + header + body
    4       1     serialize type   0 = JSON, 1 = ROCKETMQ (binary)
    5       3     header length    h
    8       h     header           JSON text, or the binary layout below
    8+h     rest  body             raw bytes (a message, a pull's records, a JSON body)

Binary (ROCKETMQ) header, 21 fixed bytes then two variable parts:

    0   2  code (int16)        2   1  language (uint8)     3  2  version (int16)
    5   4  opaque (int32)      9   4  flag (int32)
    13  4+r  remark length + UTF-8 (length 0 = null)
    17+r 4+e ext fields length, then per entry: int16 key length, key, int32 value
             length, value (a zero-length value is null: the entry is dropped)

JSON header: `{"code","language","version","opaque","flag","remark","extFields"}`; the
language is its enum name, unknown keys (`serializeTypeCurrentRPC`) are ignored, and
ext field values are always written as strings (Go's client refuses numbers).  Both
encodings are accepted; an answer uses the request's.  A malformed frame raises
`FrameError` (a JSON header nested past Python's recursion limit included): the connection
cannot trust the next frame after it and closes, logged on one line, no traceback.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct

import orjson

from mqstore.services.notifier.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LANGUAGE_CODES,
    LANGUAGES,
    SERVER_VERSION,
)

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
LENGTH = struct.Struct(">I")
HEADER_WORD = struct.Struct(">I")
BINARY_FIXED = struct.Struct(">hBhii")
assert LENGTH.size + HEADER_WORD.size == 8
assert BINARY_FIXED.size == 13
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
HEADER_LENGTH_MAX = (1 << 24) - 1
"""The header length is the low 24 bits of its word."""


class FrameError(ValueError):
    """A frame that does not follow the layout; the message says where."""


@dataclasses.dataclass(slots=True)
class Command:
    """A request or an answer."""

    code: int
    opaque: int = 0
    flag: int = 0
    ext_fields: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: str = "JAVA"
    version: int = SERVER_VERSION
    serialize_type: int = SERIALIZE_JSON

    @property
    def oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    def answer(self, code: int, *, ext_fields: dict[str, str] | None = None,
               body: bytes = b"",
               remark: str | None = None) -> Command:
        """The answer to this request: same opaque and encoding, the response flag set."""
        return Command(code, self.opaque, FLAG_RESPONSE, ext_fields or {}, body, remark,
                       serialize_type=self.serialize_type)


def decode(payload: bytes | memoryview) -> Command:
    """A frame without its 4-byte length (the reader took it)."""
    if len(payload) < HEADER_WORD.size:
        raise FrameError(f"frame of {len(payload)} bytes has no header-length word")
    (word,) = HEADER_WORD.unpack_from(payload, 0)
    serialize_type, header_length = word >> 24, word & HEADER_LENGTH_MAX
    end = HEADER_WORD.size + header_length
    if end > len(payload):
        raise FrameError(f"header length {header_length} runs past the frame's "
                         f"{len(payload)} bytes")
    header = bytes(payload[HEADER_WORD.size:end])
    if serialize_type == SERIALIZE_JSON:
        command = _decode_json(header)
    elif serialize_type == SERIALIZE_ROCKETMQ:
        command = _decode_binary(header)
    else:
        raise FrameError(f"serialize type {serialize_type} is neither 0 (JSON) nor 1 "
                         f"(ROCKETMQ)")
    command.serialize_type = serialize_type
    command.body = bytes(payload[end:])
    return command


def encode(command: Command) -> list[bytes]:
    """The frame as parts to write one after the other (the body is not copied)."""
    if command.serialize_type == SERIALIZE_ROCKETMQ:
        header = _encode_binary(command)
    else:
        header = _encode_json(command)
    head = LENGTH.pack(HEADER_WORD.size + len(header) + len(command.body)) + HEADER_WORD.pack(
        command.serialize_type << 24 | len(header))
    return [head + header, command.body] if command.body else [head + header]


def _decode_json(header: bytes) -> Command:
    try:
        return _command_of_json(header)
    except RecursionError:  # nesting no RocketMQ header has (theirs are two deep)
        raise FrameError("JSON header is nested too deep") from None


def _command_of_json(header: bytes) -> Command:
    if _LONG_NUMBER.search(header) is not None:
        document = _loads_reference(header)  # orjson reads an integer past 64 bits as a float
    else:
        try:
            document = orjson.loads(header)
        except orjson.JSONDecodeError:
            # What orjson refuses and json may take (a lone surrogate escape, NaN, a UTF-16
            # document): the standard parser decides, as it always did.
            document = _loads_reference(header)
    if not isinstance(document, dict):
        raise FrameError("JSON header is not an object")
    ext = document.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    if not all(type(value) is str for value in ext.values()):
        ext = {str(key): _text(value) for key, value in ext.items() if value is not None}
    language = document.get("language", "JAVA")
    if isinstance(language, int) and 0 <= language < len(LANGUAGES):
        language = LANGUAGES[language]
    remark = document.get("remark")
    try:
        return Command(code=_int(document, "code"), opaque=_int(document, "opaque"),
                       flag=_int(document, "flag"), version=_int(document, "version"),
                       remark=remark if isinstance(remark, str) else None,
                       language=language if isinstance(language, str) else "OTHER",
                       ext_fields=ext)
    except (TypeError, ValueError) as error:
        raise FrameError(f"JSON header: {error}") from None


_LONG_NUMBER = re.compile(rb"[:,\[]\s*-?[0-9]{20}")
"""A number of 20 digits or more may be past 64 bits, which orjson reads as a float (json:
an int).  Only where a number may start: a client's UNIQ_KEY, hex in a string, has long runs
of digits (a string that happens to match only takes the slower parser)."""


def _loads_reference(header: bytes) -> object:
    try:
        return json.loads(header)
    except (ValueError, UnicodeDecodeError) as error:
        raise FrameError(f"JSON header is not JSON: {error}") from None


def _int(document: dict[str, object], name: str) -> int:
    value = document.get(name, 0)
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{name} must be an integer, not {value!r:.40}")
    return int(value)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _encode_json(command: Command) -> bytes:
    """Keys in fastjson's (sorted) order, written piece by piece: this runs per answer."""
    ext = (f'"extFields":{_dumps(command.ext_fields)},' if command.ext_fields else "")
    remark = f',"remark":{_dumps(command.remark)}' if command.remark is not None else ""
    return (f'{{"code":{command.code:d},{ext}"flag":{command.flag:d},"language":'
            f'{_dumps(command.language)},"opaque":{command.opaque:d}{remark},'
            f'"serializeTypeCurrentRPC":"JSON","version":{command.version:d}}}'
            ).encode()


_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _decode_binary(header: bytes) -> Command:
    if len(header) < BINARY_FIXED.size + 8:
        raise FrameError(f"binary header of {len(header)} bytes is shorter than its fixed "
                         f"21 bytes")
    code, language, version, opaque, flag = BINARY_FIXED.unpack_from(header, 0)
    position = BINARY_FIXED.size
    remark_bytes, position = _sized(header, position, _INT32, "remark")
    ext_bytes, position = _sized(header, position, _INT32, "extFields")
    if position != len(header):
        raise FrameError(f"binary header has {len(header) - position} bytes after its fields")
    return Command(code=code, opaque=opaque, flag=flag, version=version,
                   language=LANGUAGES[language] if language < len(LANGUAGES) else "OTHER",
                   remark=remark_bytes.decode("utf-8", "replace") if remark_bytes else None,
                   ext_fields=_decode_ext(ext_bytes))


def _sized(data: bytes, position: int, prefix: struct.Struct, what: str) -> tuple[bytes, int]:
    if position + prefix.size > len(data):
        raise FrameError(f"binary header: the length of {what} runs past its end")
    (length,) = prefix.unpack_from(data, position)
    position += prefix.size
    if length < 0 or position + length > len(data):
        raise FrameError(f"binary header: {what} length {length} runs past its end")
    return data[position:position + length], position + length


def _decode_ext(data: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    position = 0
    while position < len(data):
        key, position = _sized(data, position, _INT16, "an ext field key")
        value, position = _sized(data, position, _INT32, "an ext field value")
        if key and value:  # zero-length decodes to null: the entry is dropped
            fields[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return fields


def _encode_binary(command: Command) -> bytes:
    """Text is encoded with replacement: a remark that quotes a request's text (a lone
    surrogate from a JSON header) still makes an answer."""
    remark = command.remark.encode("utf-8", "replace") if command.remark else b""
    ext = b"".join(_INT16.pack(len(key_bytes)) + key_bytes + _INT32.pack(len(value_bytes))
                   + value_bytes
                   for key_bytes, value_bytes in ((key.encode("utf-8", "replace"),
                                                   value.encode("utf-8", "replace"))
                                                  for key, value in command.ext_fields.items())
                   if value_bytes)
    return b"".join((BINARY_FIXED.pack(command.code, LANGUAGE_CODES.get(command.language, 0),
                                       command.version, command.opaque, command.flag),
                     _INT32.pack(len(remark)), remark, _INT32.pack(len(ext)), ext))
