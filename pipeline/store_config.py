"""The `StoreConfig` a Spark job opens the engine with: the store's own sizes, then options.

Writing (writer.py) and re-indexing (job_reindex.py) run the engine's own code, which must be
configured as the store was written, whatever tool wrote it (`mqstore produce`, the
services, another Spark job): every size its files fix (segment, consume queue file, index
slots and entries) is read from the directory (`storage/store_sizes.py`), and a new store
gets the engine's embedded profile.  Everything else comes from options named after
`StoreConfig` fields (docs/settings.md), e.g.

    .option("store.index_tags_enabled", "false")

Values are coerced by the field's type (ints, floats, true/false, enums by value, "4,5" for
a tuple); an unknown field, a bad value, or a size the store's files contradict is a
`ValueError` naming the option.  An index file of a length none of the project's profiles
writes needs `store.index_hash_slot_count` or `store.index_count_max` (the length gives the
other) or both (checked against it).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from pathlib import Path

from mqstore.storage import ConfigError, StoreConfig
from mqstore.storage.config_text import coerce_text
from mqstore.storage.store_sizes import (
    config_with_sizes,
    detected_sizes,
    index_file_length,
    profile_fields,
)

OPTION_PREFIX = "store."
_HINTS = typing.get_type_hints(StoreConfig)
_FIELDS = {field.name for field in dataclasses.fields(StoreConfig)}


def _coerce(name: str, text: str) -> object:
    return coerce_text(text, _HINTS[name], where=f"option {OPTION_PREFIX}{name}")


def store_config_from_options(options: Mapping[str, str], *, directory: Path | None,
                              **fixed: object) -> StoreConfig:
    """The config for `directory` (None: a new directory), options and `fixed` fields."""
    given: dict[str, object] = {}
    for key, text in options.items():
        if not key.lower().startswith(OPTION_PREFIX):
            continue
        name = key[len(OPTION_PREFIX):].lower()
        if name not in _FIELDS:
            raise ValueError(f"option {key!r}: StoreConfig has no field {name!r}")
        given[name] = _coerce(name, text)
    detected = detected_sizes(directory, index_hash_slot_count=_int(given, "index_hash_slot_count"),
                              index_count_max=_int(given, "index_count_max")) \
        if directory else {}
    length = index_file_length(directory) if directory else None
    if length is not None and "index_count_max" not in detected:
        raise ValueError(f"{directory}: index files of {length} bytes, a geometry none of the "
                         f"project's profiles writes (40 + 4 x slots + 20 x entries): give the "
                         f"options {OPTION_PREFIX}index_hash_slot_count and/or "
                         f"{OPTION_PREFIX}index_count_max it was made with")
    for name, size in detected.items():
        if name in given and given[name] != size:
            raise ValueError(f"option {OPTION_PREFIX}{name}={given[name]}: the store's files "
                             f"in {directory} were made with {size}")
    try:
        return config_with_sizes({**profile_fields(detected), **given, **detected, **fixed})
    except (ConfigError, TypeError) as error:
        raise ValueError(f"store options: {error}") from None


def _int(given: Mapping[str, object], name: str) -> int | None:
    value = given.get(name)
    return value if isinstance(value, int) else None
