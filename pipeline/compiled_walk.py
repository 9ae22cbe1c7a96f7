"""Which record walk the data source runs: C, or the Python reference.

Three bulk steps of a read run once per record; each has a C twin in the extension module
`mqstore.storage.format._walk` (storage/format/_walk.c), as the engine's per-record codecs
have theirs in `_records` (storage/format/compiled.py, docs/compiled.md):

    walk.walk_starts                     record starts along TOTALSIZE
    decode.decode_heads                  each record checked as `record.check_record` does,
                                         its fixed fields decoded
    record_columns.record_columns        body, properties, tags, keys, hosts and msg id of
                                         checked records, as `StoredMessage` has them

The Python functions, named `<name>_reference`, are the definition: they are written with the
engine's own `record.check_record`, `decode_stored` and `properties.decode_properties`, and
tests/pipeline/test_compiled_walk.py holds each C twin to identical results.  The choice is
the engine's (`compiled.EXTENSIONS_DISABLED`): `MQSTORE_NO_EXTENSIONS=1` picks the references;
otherwise the extension must load, or the import fails saying how to build it.  A C twin
returns None for what it does not answer as the reference would (another buffer type, a
record that is not well formed): its Python wrapper then runs the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, TypeVar

from mqstore.storage.format import compiled, properties, record

ABI_VERSION = 1
"""The `ABI_VERSION` storage/format/_walk.c must report; a build of another is stale."""

LAYOUT_ITEMS = (
    "total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
    "sysflag", "born_timestamp_ms", "born_host", "store_timestamp_ms", "store_host", "body",
    "born_host_bytes", "store_host_bytes", "head_bytes", "topic_length_bytes",
    "properties_length_bytes")
"""What the C walk is told of each record layout: field offsets (from `record.RECORD_FIELDS`;
"body" is BODYLEN's), the two hosts' widths (address + int32 port) and the head and length
prefix sizes.  storage/format/_walk.c checks the names against its own list."""

F = TypeVar("F", bound=Callable[..., Any])


def _layout_items(layout: record.RecordLayout) -> tuple[int, ...]:
    widths = {"born_host_bytes": (16 if layout.born_v6 else 4) + 4,
              "store_host_bytes": (16 if layout.store_v6 else 4) + 4,
              "head_bytes": layout.head.size,
              "topic_length_bytes": layout.topic_length.size,
              "properties_length_bytes": layout.properties_length.size}
    return tuple(widths[name] if name in widths else layout.offsets[name]
                 for name in LAYOUT_ITEMS)


def _layouts() -> tuple[tuple[int, ...], ...]:
    """Every layout, indexed born v6 * 4 + store v6 * 2 + v2 (the order C reads them in)."""
    return tuple(_layout_items(record.LAYOUTS[born_v6, store_v6, v2])
                 for born_v6 in (False, True) for store_v6 in (False, True)
                 for v2 in (False, True))


@cache
def walk_extension() -> ModuleType:
    """The loaded and bound extension; ImportError, with the one-line remedy, if it is not
    built or was built from another version of its source."""
    _walk = compiled.load("_walk", ABI_VERSION)
    _walk.bind(
        layout_items=LAYOUT_ITEMS, layouts=_layouts(),
        magics=(record.MAGIC_V1, record.MAGIC_V2),
        sizes=(record.BLANK_SIZE_BYTES, record.LAYOUTS[False, False, False].record_size(
            body_bytes=0, topic_bytes=0, properties_bytes=0)),
        host_bits=(int(record.SysFlag.BORN_HOST_V6), int(record.SysFlag.STORE_HOST_V6)),
        property_names=(properties.PROPERTY_TAGS.encode(), properties.PROPERTY_KEYS.encode()),
        separators=(properties.PROPERTY_SEPARATOR.encode(),
                    properties.NAME_VALUE_SEPARATOR.encode(),
                    properties.KEY_SEPARATOR.encode()),
        decode_properties=properties.decode_properties)
    return _walk


def pick(reference: F, compiled_twin: F) -> F:
    """`reference` when the extensions are disabled, else `compiled_twin` (a Python wrapper
    of the C function), after checking that the extension loads."""
    if compiled.EXTENSIONS_DISABLED:
        return reference
    walk_extension()
    return compiled_twin
