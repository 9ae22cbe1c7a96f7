"""Tag subscription expressions, as RocketMQ clients write them: `*`, `TagA`, `TagA || TagB`.

RocketMQ's `FilterAPI.buildSubscriptionData` splits the expression on `||`, trims each
piece and keeps the non-empty ones; `*` (or an empty expression) subscribes to every
message.  The broker filters consume queue entries by each tag's Java `String.hashCode`
(the entry's 8-byte tags code), and the client re-checks the tag string itself.

`parse_tags` returns the tags of an expression, or None for "every message".  It refuses,
with a `SubscriptionExpressionError` naming the problem, what RocketMQ would silently turn
into a subscription that matches nothing: an expression with no tag at all (`||`), more
tags than `tags_max`, or `*` beside other tags.  A sequence of tags (`["a", "b"]`) is
checked by the same rules.  Only TAG expressions are parsed here; SQL92 is not supported.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SubscriptionExpressionError
from .java_hash import java_string_hash

SUBSCRIBE_ALL = "*"
TAG_SEPARATOR = "||"
TAGS_MAX = 64
"""Tags in one expression by default: each costs a set lookup per scanned entry, and
RocketMQ applications name a handful."""

TagFilter = str | Sequence[str] | None
"""What the engine's reads take: an expression, a sequence of tags, or None (all)."""


def parse_tags(expression: TagFilter, *, tags_max: int = TAGS_MAX) -> tuple[str, ...] | None:
    """The tags `expression` subscribes to, or None for every message."""
    if expression is None:
        return None
    if isinstance(expression, str):
        text = expression.strip()
        if text in ("", SUBSCRIBE_ALL):
            return None
        pieces = [piece.strip() for piece in text.split(TAG_SEPARATOR)]
        where = f"tag expression {expression[:80]!r}"
    elif isinstance(expression, Sequence) and all(isinstance(tag, str) for tag in expression):
        if not expression:
            return None
        pieces = [tag.strip() for tag in expression]
        where = f"tags {list(expression)[:8]!r}"
    else:
        raise SubscriptionExpressionError(
            f"tags must be an expression string ('TagA || TagB', '*') or a sequence of "
            f"strings, not {type(expression).__name__}")
    tags = tuple(dict.fromkeys(piece for piece in pieces if piece))
    if not tags:
        raise SubscriptionExpressionError(f"{where} names no tag; use '*' for every message")
    if SUBSCRIBE_ALL in tags:
        if len(tags) > 1:
            raise SubscriptionExpressionError(f"{where}: '*' cannot be combined with tags")
        return None
    if len(tags) > tags_max:
        raise SubscriptionExpressionError(f"{where} names {len(tags)} tags; the maximum is "
                                          f"{tags_max}")
    return tags


def tag_codes(tags: Sequence[str]) -> frozenset[int]:
    """The tags codes a consume queue entry of one of `tags` carries (Java hashCode)."""
    return frozenset(java_string_hash(tag) for tag in tags)
