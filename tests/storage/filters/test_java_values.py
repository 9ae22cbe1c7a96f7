"""Java's parsers and orderings where they differ from Python's
(storage/filters/java_values.py)."""

from __future__ import annotations

import math

import pytest

from mqstore.storage.filters.java_values import (
    Sql92EvaluationError,
    compare_double,
    java_boolean,
    java_double,
    java_integer,
    java_long,
)


@pytest.mark.parametrize(("text", "value"), [
    ("7", 7), ("+7", 7), ("-7", -7), ("007", 7), ("2147483647", 2147483647),
    ("-2147483648", -2147483648), ("٣", 3),
])
def test_integer_value_of(text: str, value: int) -> None:
    assert java_integer(text) == value


@pytest.mark.parametrize("text", [
    "", "+", "-", " 7", "7 ", "1_0", "7.0", "0x10", "2147483648", "7L", "𝟕",
])
def test_integer_value_of_refuses(text: str) -> None:
    with pytest.raises(Sql92EvaluationError):
        java_integer(text)


def test_long_value_of_takes_64_bits() -> None:
    assert java_long("10000000000") == 10_000_000_000
    assert java_long("-9223372036854775808") == -(1 << 63)
    with pytest.raises(Sql92EvaluationError):
        java_long("9223372036854775808")


@pytest.mark.parametrize(("text", "value"), [
    ("6.5", 6.5), (" 6.5\t", 6.5), ("6.5f", 6.5), ("6.5D", 6.5), ("5.", 5.0), (".5", 0.5),
    ("1e3", 1000.0), ("+1E-3", 0.001), ("0x1p3", 8.0), ("-0x1.8p1", -3.0), ("Infinity", math.inf),
    ("-Infinity", -math.inf), ("1e400", math.inf),
])
def test_double_value_of(text: str, value: float) -> None:
    assert java_double(text) == value


@pytest.mark.parametrize("text", ["", ".", "e3", "inf", "nan", "1_0", "0x10", "1e", "٣"])
def test_double_value_of_refuses(text: str) -> None:
    with pytest.raises(Sql92EvaluationError):
        java_double(text)


def test_double_value_of_nan() -> None:
    assert math.isnan(java_double("NaN"))
    assert math.isnan(java_double("-NaN"))


def test_boolean_value_of_never_refuses() -> None:
    assert [java_boolean(text) for text in ("true", "TRUE", "tRuE", "yes", "", "true ")] == \
        [True, True, True, False, False, False]


def test_double_compare_orders_zero_signs_and_nan() -> None:
    assert compare_double(-0.0, 0.0) == -1
    assert compare_double(math.nan, math.inf) == 1
    assert compare_double(math.nan, math.nan) == 0
    assert compare_double(1.0, 2.0) == -1
