"""Request bodies to store messages: parse them, then check every rule and choose queues
through the writer's produce core (produce.py), or refuse.

Everything a request can get wrong is found here or there, before the store is touched, so a
refused request writes nothing.  Answers:

| problem                                                         | HTTP | status         |
|-----------------------------------------------------------------|------|----------------|
| wrong Content-Type                                              | 415  | UNSUPPORTED_   |
|                                                                 |      | MEDIA_TYPE     |
| body over `request_body_size_bytes_max` (aiohttp refuses it)    | 413  | REQUEST_ENTITY_|
|                                                                 |      | TOO_LARGE      |
| junk JSON, JSON nested over `json_depth_max`, wrong JSON shape | 400  | BAD_REQUEST    |
| or types, unknown fields, bad batch                             |      |                |
| a body not all arrived within `body_read_timeout_ms`            | 408  | REQUEST_TIMEOUT|
| topic characters or length, queue id, empty body, reserved      | 400  | MESSAGE_ILLEGAL|
| property names                                                  |      |                |
| a body over `message_body_size_bytes_max`, or the bodies of one | 413  | MESSAGE_ILLEGAL|
| request over `put_batch_size_bytes_max`                         |      |                |

The store checks the rest (properties, keys, encoded sizes) and refuses a whole batch when
one message is illegal.  Errors name the message: `messages[3].queue_id` for JSON,
`message 3` for binary batches.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from decimal import Decimal

from aiohttp import web

from mqstore.services.common.http.answers import JSON_MEDIA_TYPE, ServiceError
from mqstore.services.common.http.batch_wire import WireMessage
from mqstore.services.common.http.bodies import parse_json, read_body
from mqstore.services.common.http.json_numbers import json_integer
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.produce import ProduceCore, illegal
from mqstore.storage import Message
from mqstore.storage.format.properties import PROPERTY_KEYS, PROPERTY_TAGS

TEXT_PATTERN = r"^[^\x01\x02]+$"
"""Tags, property names and values: non-empty, no \\x01 or \\x02 (the properties string's
separators; storage/format/properties.py)."""
KEY_PATTERN = r"^[^ \x01\x02]+$"
"""A key: non-empty, no space (KEYS joins keys with one) and no separator."""
BASE64_PATTERN = ("^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|"
                  "[A-Za-z0-9+/]{2}==)$")
"""What strict base64 decoding takes, less the empty string (an empty body is refused)."""
MESSAGE_FIELDS = frozenset({"body", "body_base64", "queue_id", "tags", "keys", "properties"})
RESERVED_PROPERTIES = frozenset({PROPERTY_TAGS, PROPERTY_KEYS})
"""Set through the `tags` and `keys` fields; a second spelling would silently lose one."""


def bad_request(reason: str) -> ServiceError:
    return ServiceError(400, "BAD_REQUEST", reason)


def require_media_type(request: web.Request, media_type: str) -> None:
    if request.content_type != media_type:
        raise ServiceError(415, "UNSUPPORTED_MEDIA_TYPE",
                           f"Content-Type must be {media_type}, not "
                           f"{request.content_type or 'absent'}")


async def read_json(request: web.Request, settings: WriterSettings) -> object:
    """The JSON body, read within `body_read_timeout_ms` and nested at most
    `json_depth_max` deep (services/common/http/bodies.py)."""
    require_media_type(request, JSON_MEDIA_TYPE)
    raw = await read_body(request, timeout_ms=settings.body_read_timeout_ms)
    return parse_json(raw, depth_max=settings.json_depth_max)


def wire_message_from_json(document: object, *, topic: str, where: str) -> WireMessage:
    """One JSON message object (see the OpenAPI `Message` schema) as a `WireMessage`."""
    if not isinstance(document, dict):
        raise bad_request(f"{where} must be a JSON object, not {_json_type(document)}")
    unknown = document.keys() - MESSAGE_FIELDS
    if unknown:
        raise bad_request(f"{where} has unknown field(s) {sorted(unknown)}; known: "
                          f"{sorted(MESSAGE_FIELDS)}")
    body = _json_body(document, where=where)
    queue_id = document.get("queue_id")
    if queue_id is not None:
        given, queue_id = queue_id, json_integer(queue_id)
        if queue_id is None:
            raise illegal(f"{where}.queue_id must be an integer or null, not "
                          f"{_json_type(given)}")
    tags = document.get("tags")
    if tags is not None and not isinstance(tags, str):
        raise illegal(f"{where}.tags must be a string or null, not {_json_type(tags)}")
    keys = document.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise illegal(f"{where}.keys must be a list of strings")
    properties = document.get("properties")
    if properties is not None and (not isinstance(properties, dict) or not all(
            isinstance(value, str) for value in properties.values())):
        raise illegal(f"{where}.properties must be an object of strings")
    texts = [tags or "", *keys, *(properties or {}).keys(), *(properties or {}).values()]
    _check_utf8(texts, where=where)
    return WireMessage(topic, body, queue_id, tags, tuple(keys), properties or None)


def _check_utf8(texts: Sequence[str], *, where: str) -> None:
    """JSON can carry lone surrogates (\\ud800), which no UTF-8 record can hold."""
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise illegal(f"{where}: {text[:40]!r} is not valid Unicode text (a lone "
                          f"surrogate)") from None


def _json_body(document: dict[str, object], *, where: str) -> bytes:
    text, encoded = document.get("body"), document.get("body_base64")
    if (text is None) == (encoded is None):
        raise bad_request(f"{where} needs exactly one of body (UTF-8 text) and body_base64")
    if text is not None:
        if not isinstance(text, str):
            raise bad_request(f"{where}.body must be a string, not {_json_type(text)}")
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request(f"{where}.body is not valid Unicode text (a lone surrogate); "
                              f"send binary bodies as body_base64") from None
    if not isinstance(encoded, str):
        raise bad_request(f"{where}.body_base64 must be a string, not {_json_type(encoded)}")
    try:
        return binascii.a2b_base64(encoded, strict_mode=True)
    except binascii.Error as error:
        raise bad_request(f"{where}.body_base64 is not valid base64: {error}") from None


def messages_from_wire(core: ProduceCore, wires: Sequence[WireMessage], *, where: str,
                       batch: bool) -> list[Message]:
    """The messages of one request, checked by the produce core (which chooses the queue
    of each that names none); the first problem raises, naming `where`."""
    queue_ids = core.check(wires, where=where, batch=batch)
    messages = []
    for index, (wire, queue_id) in enumerate(zip(wires, queue_ids, strict=True)):
        if wire.properties is not None and not RESERVED_PROPERTIES.isdisjoint(wire.properties):
            raise illegal(f"{_at(where, index, batch)}.properties must not set "
                          f"{sorted(RESERVED_PROPERTIES)}: use the tags and keys fields")
        messages.append(Message(wire.topic, queue_id, wire.body, wire.tags, wire.keys,
                                wire.properties))
    return messages


def _at(where: str, index: int, batch: bool) -> str:
    return f"{where}[{index}]" if batch else where


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", Decimal: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
