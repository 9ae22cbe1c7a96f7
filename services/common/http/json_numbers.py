"""Integers in JSON request bodies, by JSON Schema's rule: a number is an integer when its
fraction is zero, however it is written (`3`, `3.0`, `3e0`).

The OpenAPI documents say `"type": "integer"`, which takes `3.0`; Python's `json` reads it
as a float, and a float past 2^53 has lost its last digits (`9223372036854775807.0` reads
as 2^63).  The services parse bodies with `parse_float=Decimal` (`JSON_NUMBERS`), so every
number arrives exact, and `json_integer` takes the integral ones.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

DIGITS_MAX = 19
"""Integral decimals of more digits are refused unconverted: every bound the services check
is below 2^63 (19 digits), and converting `1e999999999` would build a huge int."""

JSON_NUMBERS: dict[str, Any] = {"parse_float": Decimal}
"""Keyword arguments for `json.loads`: numbers with a fraction or exponent as exact Decimals."""


def json_integer(value: object) -> int | None:
    """`value` as an int if it is a JSON integer of at most `DIGITS_MAX` digits (or a
    Python int of any size), else None (booleans, strings, fractions, non-finite)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, Decimal) or not value.is_finite():
        return None
    if value.is_zero():
        return 0
    if value.adjusted() >= DIGITS_MAX or value != value.to_integral_value():
        return None
    return int(value)
