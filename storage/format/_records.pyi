"""Types of the C extension built from storage/format/_records.c (see compiled.py)."""

from collections.abc import Callable
from typing import Any

ABI_VERSION: int

def bind(name: str, reference: Callable[[Any], Any], /) -> Callable[[Any], Any]: ...
def bind_check_record(
    reference: Callable[..., Any],
    head_type: type[tuple[Any, ...]],
    result_type: type,
    result_slots: tuple[str, ...],
    statuses: tuple[object, object, object, object],
    layouts: tuple[tuple[object, tuple[int, ...], int, int, int, int, int], ...],
    field_kinds: str,
    magics: tuple[int, int, int],
    sizes: tuple[int, int],
    host_bits: tuple[int, int],
) -> Callable[..., Any]: ...
def bind_record_writer(
    write_reference: Callable[..., Any],
    pack_reference: Callable[..., Any],
    result_type: type,
    result_slots: tuple[str, ...],
    status_ok: object,
    layouts: tuple[tuple[object, tuple[int, ...], int, int, int, int], ...],
    field_kinds: str,
) -> tuple[Callable[..., Any], Callable[..., Any]]: ...
def bind_prepare(
    reference: Callable[[Any], Any],
    message_type: type,
    message_slots: tuple[str, ...],
    common: dict[str, Any],
    body_size_max: int,
    store_host: tuple[bytes, int],
) -> Callable[[Any], Any]: ...
def bind_scan_records(
    reference: Callable[..., Any], record_type: type[tuple[Any, ...]], /
) -> Callable[..., Any]: ...
