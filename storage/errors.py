"""Named exceptions for what the world does to the store (asserts are for our own bugs)."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the storage engine raises on purpose."""


class ConfigError(StoreError, ValueError):
    """A setting, or a combination of settings, that cannot work."""


class TopicNameError(StoreError, ValueError):
    """A topic name that breaks one of the naming rules; the message says which."""


class MessageIllegalError(StoreError, ValueError):
    """A message that cannot be encoded (size, properties, host); maps to MESSAGE_ILLEGAL."""


class StoreLockedError(StoreError):
    """Another process holds the directory's single-writer lock."""


class StoreClosedError(StoreError):
    """The store was closed, or stopped itself after a failed sync."""


class BufferPoolExhausted(StoreError):
    """No transient-store-pool buffer became free within the borrow timeout."""


class SegmentCreateError(StoreError):
    """A segment file could not be created, preallocated or mapped in time."""


class StoreFormatError(StoreError):
    """The directory does not hold a store this engine can open (wrong sizes, bad names)."""


class StoreCorruptError(StoreFormatError):
    """The store holds damaged records and `corruption_policy` is REFUSE (or a read met a
    damaged record where no status can say so): the message names where and why."""


class IndexFileFormatError(StoreFormatError):
    """An index file whose size or header does not fit the configured `hash_slot_count` and
    `index_count_max` (written with other settings, truncated, or a corrupt header)."""


class IndexFileCreateError(StoreError, OSError):
    """A new index file could not be created, preallocated or mapped (full disk, name taken).

    An `OSError` with the failed call's `errno`, so dispatch treats a full disk here as it
    does anywhere (it stalls and resumes; dispatcher.py)."""

    def __init__(self, message: str, *, errno_code: int | None = None) -> None:
        if errno_code is None:
            super().__init__(message)
        else:
            super().__init__(errno_code, message)


class ReplicationGapError(StoreError):
    """`append_raw` was handed bytes that do not start exactly at the end of this log (a gap
    or an overlap), or that are not whole records: nothing was appended.  The follower drops
    the connection and reconnects, reporting where its log really ends."""


class SubscriptionExpressionError(StoreError, ValueError):
    """A tag subscription expression that cannot be parsed (RocketMQ's
    SUBSCRIPTION_PARSE_FAILED): the message says what is wrong with it."""


class Sql92ExpressionError(SubscriptionExpressionError):
    """A SQL92 filter expression RocketMQ's parser refuses (a syntax error, or a check its
    compiler makes: `a = NULL`, `'x' > 1`, `5 IN ('5')`, `a BETWEEN 2 AND 1`): the message
    says where and what."""
