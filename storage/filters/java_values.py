"""Java's value conversions and orderings, as RocketMQ's SQL92 filter applies them.

Every property value is a string; a comparison converts it to the other side's Java class
with that class's own parser (`Integer.valueOf`, `Long.valueOf`, `Double.valueOf`,
`Boolean.valueOf`), and a string the parser refuses makes the whole expression throw, which
RocketMQ's broker takes as "no match".  Python's own parsers accept other strings (`int`
takes `" 7"` and `"1_000"`; `float` takes `"inf"`), so each Java rule is written out here.

Orderings follow `compareTo`: `Double.compare` puts -0.0 below 0.0 and NaN above everything
(equal to itself), where Python's `<` says neither.
"""

from __future__ import annotations

import math
import re
import struct

from ..errors import StoreError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_POSITIVE = 5e-324
"""Java's `Double.MIN_VALUE`: a float literal below it (0.0, or one that underflows to it)
is refused by RocketMQ's parser."""

_SIGNED_DIGITS = re.compile(r"[+-]?(\d+)")
"""`Integer.parseInt`: an optional sign, then decimal digits (`Character.digit`: any Unicode
decimal digit in the BMP; `\\d` of a str pattern is Unicode's decimal digits)."""
_JAVA_DOUBLE = re.compile(
    r"""[+-]?(?:NaN|Infinity
           |(?P<decimal>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
           |(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)
    """, re.VERBOSE)
"""`Double.valueOf`'s grammar (`FloatingDecimal.readJavaFormatString`): ASCII digits only, an
optional type suffix, hexadecimal with a binary exponent, `NaN` and `Infinity` spelt so."""
_JAVA_WHITESPACE = "".join(chr(code) for code in range(0x21))
"""What `String.trim` removes from both ends (every char up to U+0020)."""
_DOUBLE_BITS = struct.Struct(">q")
_CANONICAL_NAN = float("nan")
CANONICAL_NAN_BITS = 0x7FF8000000000000


class Sql92EvaluationError(StoreError):
    """A SQL92 expression threw while evaluated against one message (a value its Java
    parser refuses, a class cast RocketMQ's code makes): the message does not match."""


def java_integer(text: str) -> int:
    """`Integer.valueOf(text)`."""
    return _java_integral(text, INT_MIN, INT_MAX, what="Integer")


def java_long(text: str) -> int:
    """`Long.valueOf(text)`."""
    return _java_integral(text, LONG_MIN, LONG_MAX, what="Long")


def _java_integral(text: str, low: int, high: int, *, what: str) -> int:
    match = _SIGNED_DIGITS.fullmatch(text)
    if match is None or (not text.isascii() and max(map(ord, text)) > 0xFFFF):
        raise Sql92EvaluationError(f"{what}.valueOf({text[:40]!r}) throws")
    value = int(text)
    if not low <= value <= high:
        raise Sql92EvaluationError(f"{what}.valueOf({text[:40]!r}) throws: out of range")
    return value


def java_double(text: str) -> float:
    """`Double.valueOf(text)`."""
    trimmed = text.strip(_JAVA_WHITESPACE)
    match = _JAVA_DOUBLE.fullmatch(trimmed)
    if match is None:
        raise Sql92EvaluationError(f"Double.valueOf({text[:40]!r}) throws")
    negative = trimmed.startswith("-")
    if match["decimal"] is not None:
        return float(("-" if negative else "") + match["decimal"])
    if match["hex"] is not None:
        try:
            value = float.fromhex(match["hex"])
        except OverflowError:  # Java rounds a binary exponent too large to Infinity
            value = float("inf")
        return -value if negative else value
    if "NaN" in trimmed:
        return _CANONICAL_NAN
    return float("-inf") if negative else float("inf")


def java_boolean(text: str) -> bool:
    """`Boolean.valueOf(text)`: true only for "true" in any case; anything else is false."""
    return len(text) == 4 and text.lower() == "true"


def compare_integral(left: int, right: int) -> int:
    """`Integer.compareTo` / `Long.compareTo` (and `Boolean.compareTo`: false < true)."""
    return (left > right) - (left < right)


def compare_double(left: float, right: float) -> int:
    """`Double.compare`: numeric order, but -0.0 < 0.0 and NaN above everything, equal to
    itself (it orders `doubleToLongBits`, whose NaN is one canonical value)."""
    if left < right:
        return -1
    if left > right:
        return 1
    return compare_integral(_java_bits(left), _java_bits(right))


def _java_bits(value: float) -> int:
    """`Double.doubleToLongBits`: the IEEE bits as a signed long, NaN as its one canonical
    pattern.  Only asked of equal values (+0.0 / -0.0) and NaN, where its order is Java's."""
    if math.isnan(value):
        return CANONICAL_NAN_BITS
    (bits,) = _DOUBLE_BITS.unpack(struct.pack(">d", value))
    return int(bits)


def compare_string(left: str, right: str) -> int:
    """`String.compareTo` for what RocketMQ asks of it here: only whether it is 0 (the
    `<` family converts two strings to doubles first)."""
    return 0 if left == right else (1 if left > right else -1)
