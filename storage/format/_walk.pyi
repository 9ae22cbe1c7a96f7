"""Types of the C extension built from storage/format/_walk.c (see pipeline/compiled_walk.py)."""

from collections.abc import Callable
from typing import Any

ABI_VERSION: int

def bind(
    *,
    layout_items: tuple[str, ...],
    layouts: tuple[tuple[int, ...], ...],
    magics: tuple[int, int],
    sizes: tuple[int, int],
    host_bits: tuple[int, int],
    property_names: tuple[bytes, bytes],
    separators: tuple[bytes, bytes, bytes],
    decode_properties: Callable[[bytes], dict[str, str]],
) -> None: ...
def walk_starts(
    segment: Any, range_start: int, range_end: int, limit: int, /
) -> tuple[bytes, int] | None: ...
def decode_heads(
    segment: Any, starts: Any, base: int, verify_crc: bool,
    record_problem: Callable[[Any, int, int, bool], str | None], /
) -> tuple[bytes, dict[int, str]] | None: ...
def record_columns(segment: Any, starts: Any, /) -> tuple[Any, ...] | None: ...
