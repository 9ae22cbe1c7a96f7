"""Index file names: the creation time as 17 digits, RocketMQ's `yyyyMMddHHmmssSSS` in local
time (`UtilAll.timeMillisToHumanString`), kept strictly increasing by the service."""

from __future__ import annotations

import datetime

INDEX_FILE_NAME_DIGITS = 17


def index_file_name(created_ms: int) -> str:
    """`UtilAll.timeMillisToHumanString`: the local time of `created_ms`, 17 digits."""
    assert created_ms >= 0
    created = datetime.datetime.fromtimestamp(created_ms // 1000)
    return _format_name(created.replace(microsecond=created_ms % 1000 * 1000))


def parse_index_file_name(name: str) -> datetime.datetime | None:
    """The (naive, local) creation time a file name encodes, or None if it is not one."""
    if len(name) != INDEX_FILE_NAME_DIGITS or not name.isascii() or not name.isdigit():
        return None
    try:
        created = datetime.datetime.strptime(name[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return created.replace(microsecond=int(name[14:]) * 1000)


def index_file_name_after(name: str) -> str:
    """The name one millisecond later than `name` (for two files created in the same
    millisecond, or a clock that stepped back)."""
    created = parse_index_file_name(name)
    assert created is not None, f"not an index file name: {name!r}"
    return _format_name(created + datetime.timedelta(milliseconds=1))


def _format_name(created: datetime.datetime) -> str:
    name = (f"{created.year:04d}{created.month:02d}{created.day:02d}{created.hour:02d}"
            f"{created.minute:02d}{created.second:02d}{created.microsecond // 1000:03d}")
    assert len(name) == INDEX_FILE_NAME_DIGITS
    return name
