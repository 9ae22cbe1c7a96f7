"""The `StoreConfig` a Spark job opens the engine with, from `store.<field>` options.

Writing (writer.py) and re-indexing (job_reindex.py) run the engine's own code, which must be
configured as the store was written: the segment size and the consume queue file size are
read from the directory's files when it has any; everything else comes from options named
after `StoreConfig` fields (docs/settings.md), e.g.

    .option("store.index_hash_slot_count", "250000")

Values are coerced by the field's type (ints, floats, true/false, enums by value, "4,5" for
a tuple); an unknown field or a bad value is a `ValueError` naming the option.  A segment
size below the engine's 1 GiB default scales the other size maxima down with it
(`StoreConfig.for_small_segments`), as tests and laptops do.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from pathlib import Path

from mqstore.storage import ConfigError, StoreConfig
from mqstore.storage.config_text import coerce_text
from mqstore.storage.format.volume import CONSUME_QUEUE_DIRECTORY
from mqstore.storage.recovery.scrub import segment_paths

OPTION_PREFIX = "store."
_HINTS = typing.get_type_hints(StoreConfig)
_FIELDS = {field.name for field in dataclasses.fields(StoreConfig)}
_DEFAULT_SEGMENT_SIZE_BYTES = StoreConfig().segment_size_bytes


def _coerce(name: str, text: str) -> object:
    return coerce_text(text, _HINTS[name], where=f"option {OPTION_PREFIX}{name}")


def detected_sizes(directory: Path) -> dict[str, int]:
    """Sizes the directory's own files fix: segment and consume queue file size."""
    found: dict[str, int] = {}
    if (directory / "commitlog").is_dir():
        paths = segment_paths(directory)
        if paths:
            found["segment_size_bytes"] = paths[0].stat().st_size
    queues = directory / CONSUME_QUEUE_DIRECTORY
    if queues.is_dir():
        for topic in sorted(queues.iterdir()):
            for queue in sorted(topic.iterdir()) if topic.is_dir() else []:
                for name in sorted(os.listdir(queue)) if queue.is_dir() else []:
                    found["consume_queue_file_size_bytes"] = (queue / name).stat().st_size
                    return found
    return found


def store_config_from_options(options: Mapping[str, str], *, directory: Path | None,
                              **fixed: object) -> StoreConfig:
    """The config for `directory` (None: a new directory), options and `fixed` fields."""
    fields: dict[str, object] = dict(detected_sizes(directory)) if directory else {}
    for key, text in options.items():
        if not key.lower().startswith(OPTION_PREFIX):
            continue
        name = key[len(OPTION_PREFIX):].lower()
        if name not in _FIELDS:
            raise ValueError(f"option {key!r}: StoreConfig has no field {name!r}")
        fields[name] = _coerce(name, text)
    fields.update(fixed)
    segment_size = fields.get("segment_size_bytes", _DEFAULT_SEGMENT_SIZE_BYTES)
    try:
        if isinstance(segment_size, int) and segment_size < _DEFAULT_SEGMENT_SIZE_BYTES:
            rest = {k: v for k, v in fields.items() if k != "segment_size_bytes"}
            return StoreConfig.for_small_segments(segment_size, **rest)
        return StoreConfig(**fields)  # type: ignore[arg-type]
    except (ConfigError, TypeError) as error:
        raise ValueError(f"store options: {error}") from None
