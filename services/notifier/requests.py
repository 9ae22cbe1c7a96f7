"""Checking what a notifier request asks for, before anything is read or written.

| problem                                                           | HTTP | status              |
|-----------------------------------------------------------------|------|------------------------|
| a number that is not an integer, or out of its range (negative  | 400  | BAD_REQUEST            |
| offsets, wait_ms over pull_wait_ms_max, max_messages over        |      |                        |
| pull_messages_max, queue ids over 2^31 - 1)                     |      |                        |
| topic characters or length, group name rules, tags              | 400  | BAD_REQUEST            |
| a queue id key of `offsets` not in plain decimal ("05", " 5")   | 400  | BAD_REQUEST            |
| junk JSON, JSON nested over json_depth_max, wrong JSON shape or | 400  | BAD_REQUEST            |
| types, unknown fields                                           |      |                        |
| a body not all arrived within body_read_timeout_ms              | 408  | REQUEST_TIMEOUT        |
| wrong Content-Type of a body                                    | 415  | UNSUPPORTED_MEDIA_TYPE |

Every reason names the parameter and the rule, e.g. `offset must be an integer >= 0, not
'-1'`.  A refused request has read nothing and written nothing.  The OpenAPI document
(openapi.py) states each rule as a schema, built from the patterns and bounds here.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from aiohttp import web

from mqstore.services.common.http.answers import JSON_MEDIA_TYPE, ServiceError
from mqstore.services.common.http.bodies import parse_json, read_body
from mqstore.services.common.http.json_numbers import json_integer
from mqstore.services.common.settings.config_file import NotifierSettings
from mqstore.storage import TopicNameError, validate_topic
from mqstore.storage.files.consumer_offsets import (
    OFFSET_MAX,
    QUEUE_ID_MAX,
    GroupNameError,
    validate_group,
)

DEFAULT_MAX_MESSAGES = 32
"""RocketMQ's default pull batch (`pullBatchSize` is 32 messages)."""
TAGS_MAX = 32
"""Tags in one filter ("a||b||..."): each costs a hash per scanned entry."""
TAG_SEPARATOR = "||"
"""RocketMQ's tag expression separator: `tags=created||paid`; `*` or empty means all."""
TAG_PADDING = "".join(map(chr, range(0x21)))
"""Trimmed from each tag, as Java's `String.trim` (RocketMQ's filter parser) does: every
character up to and including the space."""
TAG_PATTERN = r"[^|]*[^|\x00-\x20][^|]*"
"""One tag of a filter: some character other than padding, and no "|"."""
TAG_FILTER_PATTERN = rf"^(|{TAG_PATTERN}(\|\|{TAG_PATTERN}){{0,{TAGS_MAX - 1}}})$"
"""A tag filter string (absent, empty, "*" or 1..`TAGS_MAX` tags), as `tags_of` takes it."""
KEY_PATTERN = "^[^ ]+$"
"""One key of a lookup: RocketMQ's KEYS property separates keys with a space."""
TIMESTAMP_MS_MAX = 1 << 62


def bad_request(reason: str) -> ServiceError:
    return ServiceError(400, "BAD_REQUEST", reason)


def parse_int(text: str | None, name: str, *, minimum: int, maximum: int,
              default: int | None = None, setting: str = "") -> int:
    """An integer parameter in [minimum, maximum]; `default` when absent (else required)."""
    if text is None or text == "":
        if default is None:
            raise bad_request(f"{name} is required (an integer >= {minimum})")
        return default
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    if not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        raise bad_request(f"{name} must be an integer >= {minimum}, not {text[:40]!r}")
    value = int(stripped)
    if value < minimum:
        raise bad_request(f"{name} must be an integer >= {minimum}, not {text[:40]!r}")
    if value > maximum:
        where = f" ({setting})" if setting else ""
        raise bad_request(f"{name}={value} is over the maximum {maximum}{where}")
    return value


def query_int(request: web.Request, name: str, *, minimum: int = 0, maximum: int = OFFSET_MAX,
              default: int | None = None, setting: str = "") -> int:
    return parse_int(request.query.get(name), name, minimum=minimum, maximum=maximum,
                     default=default, setting=setting)


def json_int(document: Mapping[str, object], name: str, *, minimum: int, maximum: int,
             default: int, setting: str = "") -> int:
    given = document.get(name, default)
    value = json_integer(given)
    if value is None:
        raise bad_request(f"{name} must be an integer, not {_json_type(given)}")
    return parse_int(str(value), name, minimum=minimum, maximum=maximum, setting=setting)


def check_topic(topic: str, *, size_bytes_max: int) -> str:
    try:
        validate_topic(topic, size_bytes_max=size_bytes_max)
    except TopicNameError as error:
        raise bad_request(str(error)) from None
    return topic


def check_group(group: str) -> str:
    try:
        return validate_group(group)
    except GroupNameError as error:
        raise bad_request(str(error)) from None


def queue_id_of(text: str, name: str = "queue_id") -> int:
    return parse_int(text, name, minimum=0, maximum=QUEUE_ID_MAX)


def tags_of(value: object) -> list[str] | None:
    """A tag filter: "a||b" (query) or ["a", "b"] (JSON); None, "", "*" or [] mean all.

    Each tag is trimmed of `TAG_PADDING` and must then be non-empty and free of "|" (a tag
    with one could not be told from the separator): `TAG_FILTER_PATTERN` says the same."""
    if value is None or value in ("", "*"):
        return None
    if isinstance(value, str):
        tags = [tag.strip(TAG_PADDING) for tag in value.split(TAG_SEPARATOR)]
    elif isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        tags = [tag.strip(TAG_PADDING) for tag in value]
    else:
        raise bad_request(f"tags must be a string (\"a||b\") or a list of strings, not "
                          f"{_json_type(value)}")
    if not tags:
        return None
    if len(tags) > TAGS_MAX or any(not tag or "|" in tag for tag in tags):
        raise bad_request(f"tags must be 1..{TAGS_MAX} non-empty tags without '|', got "
                          f"{value!r:.80}")
    if "*" in tags:
        return None
    return tags


async def read_json_object(request: web.Request, *, fields: frozenset[str],
                           settings: NotifierSettings) -> dict[str, object]:
    """The body as a JSON object with no fields but `fields`, read within
    `body_read_timeout_ms` and nested at most `json_depth_max` deep
    (services/common/http/bodies.py)."""
    if request.content_type != JSON_MEDIA_TYPE:
        raise ServiceError(415, "UNSUPPORTED_MEDIA_TYPE",
                           f"Content-Type must be {JSON_MEDIA_TYPE}, not "
                           f"{request.content_type or 'absent'}")
    raw = await read_body(request, timeout_ms=settings.body_read_timeout_ms)
    document = parse_json(raw, depth_max=settings.json_depth_max)
    if not isinstance(document, dict):
        raise bad_request(f"the body must be a JSON object, not {_json_type(document)}")
    unknown = document.keys() - fields
    if unknown:
        raise bad_request(f"unknown field(s) {sorted(unknown)}; known: {sorted(fields)}")
    return document


def offsets_of(value: object, name: str) -> dict[int, int]:
    """{"<queue id>": offset, ...} as {queue id: offset}, every key and value checked; a key
    is spelled one way only, so two keys never name one queue."""
    if not isinstance(value, dict):
        raise bad_request(f"{name} must be an object of \"<queue id>\": offset, not "
                          f"{_json_type(value)}")
    offsets = {}
    for key, offset in value.items():
        queue_id = queue_id_of(key, f"{name} key {key!r:.40}")
        if key != str(queue_id):  # " 5" and "05" would silently stand for queue 5 too
            raise bad_request(f"{name} key {key!r:.40} must be a queue id in decimal, without "
                              f"sign, spaces or leading zeros ({queue_id!r})")
        value = json_integer(offset)
        if value is None:
            raise bad_request(f"{name}[{key!r:.40}] must be an integer, not "
                              f"{_json_type(offset)}")
        offsets[queue_id] = parse_int(str(value), f"{name}[{key!r:.40}]", minimum=0,
                                      maximum=OFFSET_MAX)
    return offsets


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", Decimal: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
