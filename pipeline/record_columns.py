"""The variable columns of checked records: body, tags, keys, properties, hosts and msg id.

Each row is what the engine's `StoredMessage` says of the record (storage/format/message.py):
the body, `properties` as `decode_properties` decodes them (RocketMQ's decoder: a repeated
name keeps its first place and takes the last value, as a dict does), `tags` and `keys` from
them, `born_host` and `store_host` as "ip:port", and RocketMQ's offset `msg_id`.

`record_columns_reference` is the definition: each record decoded as `decode_stored` does.
Its C twin in storage/format/_walk.c (picked by compiled_walk.py unless
MQSTORE_NO_EXTENSIONS=1) returns the Arrow buffers of every column in one call, cutting
properties and keys out of the segment with no Python object per record; properties that
are not UTF-8 it hands, record by record, to `decode_properties`.  Only hosts are formatted
in Python, once per distinct host.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mqstore.storage.format import record
from mqstore.storage.format.message import StoredMessage, format_host
from mqstore.storage.format.properties import decode_properties

from .compiled_walk import pick, walk_extension
from .schema import KEYS_TYPE, PROPERTIES_TYPE

Ints = npt.NDArray[np.int64]

BATCH_BYTES_MAX = (1 << 31) - 1
"""Arrow's binary and string arrays have 32-bit offsets."""


@dataclasses.dataclass(frozen=True)
class RecordColumns:
    body: pa.Array
    tags: pa.Array
    keys: pa.Array
    properties: pa.Array
    born_host: pa.Array
    store_host: pa.Array
    msg_id: pa.Array


def _check_body_bytes(total_bytes: int) -> None:
    if total_bytes > BATCH_BYTES_MAX:
        raise ValueError("one Arrow batch of bodies exceeds 2 GiB: lower batchRows")


def record_columns_reference(buffer: record.ReadableBuffer, starts: Ints) -> RecordColumns:
    """The columns of the records at `starts`, which `decode_heads` found good: each record
    decoded as `decode_stored` does, its hosts formatted by `format_host` (once per host)."""
    messages, born_hosts, store_hosts = [], [], []
    for position in starts.tolist():
        layout, head = record.decode_head(buffer, position)
        body, _, encoded = record.decode_variable(buffer, position, layout, head)
        with body:
            messages.append(StoredMessage(head, body=bytes(body), topic="",
                                          properties=decode_properties(encoded)))
        born_hosts.append(_format_host(head.born_host))
        store_hosts.append(_format_host(head.store_host))
    _check_body_bytes(sum(len(message.body) for message in messages))
    return RecordColumns(
        body=pa.array([message.body for message in messages], pa.binary()),
        tags=pa.array([message.tags for message in messages], pa.string()),
        keys=pa.array([list(message.keys) for message in messages], KEYS_TYPE),
        properties=pa.array([list(message.properties.items()) for message in messages],
                            PROPERTIES_TYPE),
        born_host=pa.array(born_hosts, pa.string()),
        store_host=pa.array(store_hosts, pa.string()),
        msg_id=pa.array([message.msg_id for message in messages], pa.string()))


_format_host = lru_cache(maxsize=4096)(format_host)
"""`format_host` (ipaddress) costs more than decoding a record: once per distinct host."""


def _host_text(key: bytes) -> str:
    """`format_host` of an address + big-endian int32 port, as the record stores them."""
    return _format_host((key[:-4], int.from_bytes(key[-4:], "big", signed=True)))


def _strings(offsets: bytes, data: bytes, count: int, *,
             validity: bytes | None = None) -> pa.Array:
    bitmap = pa.py_buffer(validity) if validity is not None else None
    return pa.Array.from_buffers(pa.string(), count,
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])


def _int32s(raw: bytes) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), len(raw) // 4, [None, pa.py_buffer(raw)])


def _hosts(indices: bytes, keys: list[bytes]) -> pa.Array:
    dictionary = pa.array([_host_text(key) for key in keys], type=pa.string())
    return pa.DictionaryArray.from_arrays(_int32s(indices), dictionary).dictionary_decode()


def _record_columns_compiled(buffer: record.ReadableBuffer, starts: Ints) -> RecordColumns:
    raw = walk_extension().record_columns(buffer, np.ascontiguousarray(starts, np.int64))
    if raw is None:
        return record_columns_reference(buffer, starts)
    (body_offsets, bodies, map_offsets, name_offsets, names, value_offsets, values,
     tag_validity, tag_offsets, tags, key_list_offsets, key_offsets, keys, born_hosts,
     store_hosts, msg_id_offsets, msg_ids, hosts) = raw
    count = len(starts)
    columns = RecordColumns(
        body=pa.Array.from_buffers(pa.binary(), count, [
            None, pa.py_buffer(body_offsets), pa.py_buffer(bodies)]),
        tags=_strings(tag_offsets, tags, count, validity=tag_validity),
        keys=pa.ListArray.from_arrays(_int32s(key_list_offsets), _strings(
            key_offsets, keys, len(key_offsets) // 4 - 1), type=KEYS_TYPE),
        properties=pa.MapArray.from_arrays(
            _int32s(map_offsets), _strings(name_offsets, names, len(name_offsets) // 4 - 1),
            _strings(value_offsets, values, len(value_offsets) // 4 - 1),
            type=PROPERTIES_TYPE),
        born_host=_hosts(born_hosts, hosts),
        store_host=_hosts(store_hosts, hosts),
        msg_id=_strings(msg_id_offsets, msg_ids, count))
    for field in dataclasses.fields(columns):
        getattr(columns, field.name).validate()
    return columns


record_columns = pick(record_columns_reference, _record_columns_compiled)
"""The variable columns of good records (see `record_columns_reference`): C, or the
reference itself when MQSTORE_NO_EXTENSIONS=1."""
