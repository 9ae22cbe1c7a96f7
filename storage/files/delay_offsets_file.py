"""`DelayOffsetsFile`: how far each delay level has been delivered, as RocketMQ keeps it.

    <directory>/config/delayOffset.json       the offsets
    <directory>/config/delayOffset.json.bak   the previous file, read if the first is gone
                                              or unreadable

Layout (RocketMQ 5's `DelayOffsetSerializeWrapper`, written by fastjson: JSON indented with
tabs, shown here as four spaces, whose integer map keys carry no quotes):

    {
        "dataVersion":{
            "counter":3,
            "stateVersion":0,
            "timestamp":1795813063621
        },
        "offsetTable":{
            2:1,
            3:6
        }
    }

A key is a delay level (1..N), its value the next `SCHEDULE_TOPIC_XXXX` queue offset to
deliver of queue level - 1; levels never used are absent.  mqstore adds one field RocketMQ
ignores, `"mqstoreDeliveryScanPosition": <commit log position>`: every copy delivered past
these offsets starts at or after it (services/writer/delay_schedule.py recognises them after
a crash rather than delivering them again).  RocketMQ 4.9 writes only
`{"offsetTable":{...}}`; both forms are read, with keys quoted or not, so a store moves
between RocketMQ and mqstore with its pending delays.

Written as RocketMQ's `ConfigManager#persist` does: the new text to `.tmp` and synced, the
current file renamed to `.bak`, the `.tmp` renamed over the file, the directory synced.  A
crash leaves the file or the `.bak` whole.  One writer: the writer service's schedule.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from ..errors import StoreFormatError
from .io import fsync_directory

FILE_NAME = "delayOffset.json"
SCAN_POSITION = "mqstoreDeliveryScanPosition"
BACKUP_SUFFIX = ".bak"
TEMPORARY_SUFFIX = ".tmp"
FILE_SIZE_BYTES_MAX = 1 << 20
"""A file is a few dozen levels; anything bigger is not one."""
_BARE_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


class DelayOffsetsFile:
    def __init__(self, store_directory: Path) -> None:
        self.path = store_directory / "config" / FILE_NAME
        self.counter = 0
        """`dataVersion.counter` as last read or written."""
        self.scan_position: int | None = None
        """`mqstoreDeliveryScanPosition` as last read; None in a file RocketMQ wrote."""

    def read(self) -> dict[int, int]:
        """Level -> next offset; {} when neither the file nor its `.bak` exists.
        `StoreFormatError` when the one that exists cannot be parsed."""
        problems = []
        for path in (self.path, self.path.with_name(FILE_NAME + BACKUP_SUFFIX)):
            try:
                return self._parse(_read_text(path), path)
            except FileNotFoundError:
                continue
            except StoreFormatError as error:
                problems.append(str(error))
        if problems:
            raise StoreFormatError("; ".join(problems))
        return {}

    def write(self, offsets: Mapping[int, int], *, scan_position: int | None = None,
              now_ms: int | None = None) -> None:
        """Persist `offsets` (level -> next offset) and the scan position, as above."""
        self.counter += 1
        timestamp = int(time.time() * 1000) if now_ms is None else now_ms
        table = ",\n".join(f"\t\t{level}:{offset}" for level, offset in sorted(offsets.items()))
        text = ("{\n\t\"dataVersion\":{\n"
                f"\t\t\"counter\":{self.counter},\n\t\t\"stateVersion\":0,\n"
                f"\t\t\"timestamp\":{timestamp}\n\t}},\n"
                f"\t\"offsetTable\":{{\n{table}\n\t}}"
                + ("" if scan_position is None else
                   f",\n\t\"{SCAN_POSITION}\":{scan_position}") + "\n}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(FILE_NAME + TEMPORARY_SUFFIX)
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(FILE_NAME + BACKUP_SUFFIX))
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)

    def _parse(self, text: str, path: Path) -> dict[int, int]:
        try:
            document = json.loads(_BARE_KEY.sub(r'\1"\2"\3', text))
        except ValueError as error:
            raise StoreFormatError(f"{path}: not RocketMQ's delay offsets: {error}") from None
        table = document.get("offsetTable") if isinstance(document, dict) else None
        if not isinstance(table, dict):
            raise StoreFormatError(f"{path}: no \"offsetTable\" object")
        offsets = {}
        for key, value in table.items():
            try:
                level = int(key)
            except ValueError:
                raise StoreFormatError(f"{path}: level {key!r} is not a number") from None
            if level <= 0 or not isinstance(value, int) or isinstance(value, bool) \
                    or value < 0:
                raise StoreFormatError(f"{path}: level {key} -> {value!r}: a level is 1.. and "
                                       f"an offset a non-negative integer")
            offsets[level] = value
        scan = document.get(SCAN_POSITION)
        self.scan_position = scan if type(scan) is int and scan >= 0 else None
        version = document.get("dataVersion")
        if isinstance(version, dict) and isinstance(version.get("counter"), int):
            self.counter = max(self.counter, version["counter"])
        return offsets


def _read_text(path: Path) -> str:
    with open(path, "rb") as file:
        data = file.read(FILE_SIZE_BYTES_MAX + 1)
    if len(data) > FILE_SIZE_BYTES_MAX:
        raise StoreFormatError(f"{path} is over {FILE_SIZE_BYTES_MAX} bytes: not delay offsets")
    return data.decode("utf-8", errors="replace")
