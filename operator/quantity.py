"""Kubernetes resource quantities (`50Gi`, `1.5T`, `500M`) as whole bytes, for comparing
storage sizes.  Only what volume sizes use: a plain or decimal number and an optional binary
(Ki..Ei) or decimal (k..E) suffix; milli and exponent forms are refused."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
           "Ei": 1 << 60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_PATTERN = re.compile(r"^(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)(?P<suffix>[KMGTPE]i|[kMGTPE])?$")


class QuantityError(ValueError):
    """Not a storage quantity this operator understands."""


def quantity_bytes(text: str) -> int:
    """`"50Gi"` -> 53687091200.  Fractions of a byte round up (Kubernetes does the same)."""
    match = _PATTERN.match(str(text).strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a storage quantity such as 50Gi")
    suffix = match["suffix"] or ""
    factor = _BINARY.get(suffix) or _DECIMAL[suffix]
    try:
        value = Decimal(match["number"]) * factor
    except InvalidOperation:
        raise QuantityError(f"{text!r} is not a storage quantity such as 50Gi") from None
    whole = int(value)
    return whole + 1 if value > whole else whole
