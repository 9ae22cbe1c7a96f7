"""Which implementation the hot codecs run: C, or the Python reference.

The functions that run once per record on the store's hot paths have C twins in the
extension module `mqstore.storage.format._records` (storage/format/_records.c):

    java_hash.java_string_hash     tag codes (dispatch, reads), index key hashes
    record.check_record            recovery, dispatch, reads, scrub; record.holds_entry
    properties.decode_properties   dispatch, reads
    encoder.MessageEncoder.prepare the put path: a message checked and CRC'd (per encoder)
    encoder.write_record           the put path: one record written in place
    encoder.pack_batch             the put path: a batch's records packed into one bytes
    dispatch_scan.scan_records     dispatch: a run of whole records read in one call
    files.index_put.put_index_keys dispatch: a run's index keys stored in one call
    batch_body.split_batch         the writer: a producer's batch body split into messages

The Python functions stay, renamed `<name>_reference`: they define the behaviour, and
tests/storage/format/test_compiled_equivalence.py holds every C twin to its reference.  Each
module (or encoder) picks its implementation once, through `pick`:

* `MQSTORE_NO_EXTENSIONS=1` in the environment: the references, everywhere.
* Otherwise the extension must load: a missing or stale build raises ImportError saying to
  run scripts/setup.sh (which builds it) -- never a quiet fall back to the slower path.

A C twin answers only the arguments the store passes (exact ints, bytes / bytearray /
memoryview / mmap.mmap); it hands anything else to its reference, so results and exceptions
are the reference's own for every input.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any, TypeVar, cast

ENVIRONMENT_VARIABLE = "MQSTORE_NO_EXTENSIONS"
ABI_VERSION = 5
"""The `ABI_VERSION` storage/format/_records.c must report; a build of another is stale."""
REFERENCE_SUFFIX = "_reference"

F = TypeVar("F", bound=Callable[..., Any])


def _extensions_disabled() -> bool:
    value = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if value not in ("", "0", "1"):
        raise ImportError(f"{ENVIRONMENT_VARIABLE}={value!r}: set it to 1 for the pure-Python "
                          f"reference, or leave it unset (or 0) for the C extension")
    return value == "1"


EXTENSIONS_DISABLED = _extensions_disabled()
"""True when `MQSTORE_NO_EXTENSIONS=1`: every `pick` returns the reference."""


def load(name: str, abi_version: int) -> ModuleType:
    """The extension module `mqstore.storage.format.<name>`, checked to be built from the
    source this code expects (its `ABI_VERSION`); ImportError, with the one-line remedy, if it
    is not built or is a stale build."""
    qualified = f"{__package__}.{name}"
    try:
        module = importlib.import_module(qualified)
    except ImportError as error:
        raise ImportError(
            f"mqstore's C extension {qualified} is not built ({error}): run "
            f"scripts/setup.sh, or set {ENVIRONMENT_VARIABLE}=1 for the pure-Python "
            f"reference") from error
    if abi_version != module.ABI_VERSION:
        raise ImportError(
            f"{qualified} ({module.__file__}) is a stale build (ABI {module.ABI_VERSION}, "
            f"expected {abi_version}): run scripts/setup.sh")
    return module


@cache
def extension() -> ModuleType:
    """The loaded `_records` extension (`load`)."""
    return load("_records", ABI_VERSION)


def compiled_twin(reference: F) -> F:
    """The C twin of a reference function named `<name>_reference` that `_records.bind`
    knows (java_string_hash, decode_properties, put_index_keys, split_batch)."""
    name = reference.__name__.removesuffix(REFERENCE_SUFFIX)
    return cast(F, extension().bind(name, reference))


def pick(reference: F, compiled: Callable[[], Callable[..., Any]] | None = None) -> F:
    """`reference` when the extensions are disabled, else its C twin: `compiled()` if given,
    else `compiled_twin(reference)`.  Raises ImportError when the extension is missing."""
    if EXTENSIONS_DISABLED:
        return reference
    return cast(F, compiled() if compiled is not None else compiled_twin(reference))
