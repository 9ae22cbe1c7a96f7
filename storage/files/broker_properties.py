"""`BrokerPropertiesFile`: `config/broker.properties`, the broker settings changed at run time
(RocketMQ's `updateBrokerConfig`), read by every notifier of a volume.

    <store>/config/broker.properties    Java properties text, UTF-8, one `key=value` a line:
        # mqstore: broker settings changed at run time (mqadmin updateBrokerConfig)
        brokerPermission=4

RocketMQ's broker writes the settings it is given at run time to its own `broker.properties`
the same way, so the file reads the same to both.  mqstore keeps only the keys it applies at
run time (`brokerPermission`; the rest of its settings live in its config file), and reads
lines as `MixAll.string2Properties` does for these: `#` and `!` lines are comments, the
first `=` or `:` splits key from value, blanks around both are dropped.  A key or value
with a line break, `=` or `:` is refused, so what is written reads back the same.

A change reads the file, updates the keys and writes it whole (a temporary file, fsync,
rename, directory fsync), under an exclusive `flock` on `config/broker.lock`, so two
notifiers changing different keys lose neither.  Reads take no lock and parse the file
again only when its modification time or size changed.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from types import MappingProxyType

from ..format.volume import CREATING_SUFFIX
from .io import fsync_directory

BROKER_PROPERTIES_FILE = PurePath("config") / "broker.properties"
BROKER_PROPERTIES_LOCK_FILE = PurePath("config") / "broker.lock"
HEADER = "# mqstore: broker settings changed at run time (mqadmin updateBrokerConfig)\n"
_FORBIDDEN = frozenset("\r\n=:")


class BrokerPropertiesFile:
    def __init__(self, store_directory: Path) -> None:
        self.path = store_directory / BROKER_PROPERTIES_FILE
        self._lock_path = store_directory / BROKER_PROPERTIES_LOCK_FILE
        self._stamp: tuple[int, int] | None = None
        self._current: Mapping[str, str] = MappingProxyType({})

    def read(self) -> Mapping[str, str]:
        """The properties as they are now (none when there is no file)."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._current = None, MappingProxyType({})
            return self._current
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            try:
                text = self.path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return self._current  # replaced between stat and read: read it next time
            self._current, self._stamp = MappingProxyType(parse(text)), stamp
        return self._current

    def update(self, changes: Mapping[str, str]) -> None:
        """Set `changes` over the file as it is now, under the lock."""
        for key, value in changes.items():
            if not key or _FORBIDDEN & set(key) or _FORBIDDEN & set(value) or \
                    key.startswith(("#", "!")):
                raise ValueError(f"broker property {key!r}={value!r}: keys and values hold "
                                 f"no line break, '=' or ':', and a key no leading '#' or '!'")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._stamp = None
            merged = {**self.read(), **changes}
            temporary = self.path.with_name(self.path.name + CREATING_SUFFIX)
            with open(temporary, "w", encoding="utf-8") as file:
                file.write(HEADER + "".join(f"{key}={value}\n"
                                            for key, value in sorted(merged.items())))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
            fsync_directory(self.path.parent)
            self._stamp = None
            assert dict(self.read()) == merged, "the properties read back as written"
        finally:
            os.close(fd)  # releases the lock


def parse(text: str) -> dict[str, str]:
    """`key=value` lines (or `key:value`), comments and blank lines skipped."""
    found = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        cut = min((index for index in (stripped.find("="), stripped.find(":")) if index >= 0),
                  default=len(stripped))
        found[stripped[:cut].strip()] = stripped[cut + 1:].strip()
    return found
