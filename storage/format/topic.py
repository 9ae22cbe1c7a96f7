"""Topic name rules, checked without regular expressions.

RocketMQ checks names against `^[%|a-zA-Z0-9_-]+$` with a regex on every send; #3585 part F
replaced it with a 128-entry lookup table.  Here the table is a `bytes.translate` deletion
set: one C-level pass deletes every legal byte, and whatever remains is illegal.  Names that
passed are cached, so the put path pays a dict lookup.
"""

from __future__ import annotations

import string

from ..errors import TopicNameError

LEGAL_TOPIC_CHARACTERS = "%|_-" + string.ascii_letters + string.digits
_LEGAL_BYTES = LEGAL_TOPIC_CHARACTERS.encode("ascii")
_VALID_CACHE_SIZE_MAX = 65536
"""Bound on remembered valid names; the cache is cleared when it fills."""

_valid_cache: dict[str, bytes] = {}


def validate_topic(name: object, *, size_bytes_max: int) -> bytes:
    """Return the topic's encoded bytes, or raise `TopicNameError` naming the rule broken."""
    if isinstance(name, str):
        cached = _valid_cache.get(name)
        if cached is not None and len(cached) <= size_bytes_max:
            return cached
    encoded = _check(name, size_bytes_max=size_bytes_max)
    if len(_valid_cache) >= _VALID_CACHE_SIZE_MAX:
        _valid_cache.clear()
    assert isinstance(name, str)
    _valid_cache[name] = encoded
    return encoded


def _check(name: object, *, size_bytes_max: int) -> bytes:
    if not isinstance(name, str):
        raise TopicNameError(f"topic must be a string, not {type(name).__name__}")
    if not name:
        raise TopicNameError("topic is empty")
    if not name.isascii():
        index = next(i for i, c in enumerate(name) if not c.isascii())
        raise TopicNameError(f"topic {name!r} has a non-ASCII character {name[index]!r} at "
                             f"index {index}; allowed: letters, digits and % | _ -")
    encoded = name.encode("ascii")
    illegal = encoded.translate(None, _LEGAL_BYTES)
    if illegal:
        index = encoded.index(illegal[:1])
        raise TopicNameError(f"topic {name!r} has an illegal character {chr(illegal[0])!r} at "
                             f"index {index}; allowed: letters, digits and % | _ -")
    if len(encoded) > size_bytes_max:
        raise TopicNameError(f"topic is {len(encoded)} characters long; the maximum is "
                             f"{size_bytes_max} (topic_size_bytes_max)")
    return encoded
