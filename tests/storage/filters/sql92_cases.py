"""Random SQL92 expressions and property maps, the same for every seed on every machine.

The evaluator's tests run them through `compile_sql92`; tests/remoting_clients/
test_sql92_oracle.py runs the same ones through RocketMQ 5.5.0's own filter and compares.
The pieces are chosen where RocketMQ's rules bite: literals of each Java class (an Integer,
a Long past 2^31, a Double, strings, booleans, NULL), property values each conversion
refuses or reads differently from Python (`"6.5"`, `" 7"`, `"+7"`, `"1_0"`, `"NaN"`,
`"0x1p3"`, `"5d"`), absent properties, keywords in any case, comments, and text after a
complete expression (which RocketMQ ignores).
"""

from __future__ import annotations

import random

from mqstore.storage.filters.java_values import Sql92EvaluationError
from mqstore.storage.filters.sql92 import Sql92Filter

PROPERTY_NAMES = ("a", "b", "s", "z", "TAGS")
"""`z` is never set: an absent property."""
PROPERTY_VALUES = ("7", "5", "6.5", "x", "10000000000", "-3", "0", "NaN", "true", "TRUE",
                   " 7", "+7", "1_0", "0x1p3", "5d", "1e1", "5.0", "-0.0", "", "2147483648",
                   "Infinity", "ell", "hello", "it's", "٣")
INTEGER_LITERALS = ("0", "1", "5", "7", "5L", "2147483647", "2147483648", "10000000000",
                    "9223372036854775807", "9223372036854775808")
FLOAT_LITERALS = ("5.0", "6.5", ".5", "1E1", "5.", "0.0", "1e400", "2.5e-3", "1e-400")
STRING_LITERALS = ("'5'", "'7'", "'x'", "'true'", "''", "'it''s'", "'ell'", "'h'")
KEYWORD_SPELLINGS = {"AND": ("AND", "and", "And"), "OR": ("OR", "or"), "NOT": ("NOT", "not"),
                     "BETWEEN": ("BETWEEN", "between"), "IN": ("IN", "in"),
                     "IS": ("IS", "is"), "NULL": ("NULL", "null"), "TRUE": ("TRUE", "true"),
                     "FALSE": ("FALSE", "False")}
TRAILERS = ("", "", "", "", " -- note\n", " /* note */", " xyz", " )", " 5", " #", " -- end")


def _word(rng: random.Random, keyword: str) -> str:
    return rng.choice(KEYWORD_SPELLINGS.get(keyword, (keyword,)))


def operand(rng: random.Random, depth: int) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(PROPERTY_NAMES)
    if roll < 0.6:
        return rng.choice(INTEGER_LITERALS)
    if roll < 0.7:
        return rng.choice(FLOAT_LITERALS)
    if roll < 0.8:
        return rng.choice(STRING_LITERALS)
    if roll < 0.86:
        return _word(rng, rng.choice(("TRUE", "FALSE", "NULL")))
    if roll < 0.94:
        return rng.choice(("-", "+", "- ")) + operand(rng, depth)
    return "(" + condition(rng, depth + 1) + ")" if depth < 3 else rng.choice(PROPERTY_NAMES)


def _compared(rng: random.Random, left: str, depth: int) -> str:
    return f"{left} {rng.choice(('=', '<>', '>', '>=', '<', '<='))} {operand(rng, depth)}"


def _not(rng: random.Random, chance: float) -> str:
    return _word(rng, "NOT") + " " if rng.random() < chance else ""


def _between(rng: random.Random, left: str, depth: int) -> str:
    return (f"{left} {_not(rng, 0.3)}{_word(rng, 'BETWEEN')} {operand(rng, depth)} "
            f"{_word(rng, 'AND')} {operand(rng, depth)}")


def _in(rng: random.Random, left: str, depth: int) -> str:
    values = ", ".join(rng.choice(STRING_LITERALS) for _ in range(rng.randint(1, 6)))
    return f"{left} {_not(rng, 0.3)}{_word(rng, 'IN')} ({values})"


def _is_null(rng: random.Random, left: str, depth: int) -> str:
    return f"{left} {_word(rng, 'IS')} {_not(rng, 0.5)}{_word(rng, 'NULL')}"


def _text_test(rng: random.Random, left: str, depth: int) -> str:
    test = rng.choice(("CONTAINS", "STARTSWITH", "ENDSWITH", "contains"))
    return f"{left} {_not(rng, 0.3)}{test} {rng.choice(STRING_LITERALS)}"


def _joined(rng: random.Random, left: str, depth: int) -> str:
    joined = _word(rng, rng.choice(("AND", "OR")))
    return f"{condition(rng, depth + 1)} {joined} {condition(rng, depth + 1)}"


def _negated(rng: random.Random, left: str, depth: int) -> str:
    return f"{_word(rng, 'NOT')} ({condition(rng, depth + 1)})"


def _bare_not(rng: random.Random, left: str, depth: int) -> str:
    return f"{_word(rng, 'NOT')} {left}"


def _bare(rng: random.Random, left: str, depth: int) -> str:
    return left


SHAPES = ((0.35, _compared), (0.45, _between), (0.55, _in), (0.62, _is_null),
          (0.7, _text_test), (0.8, _joined), (0.88, _negated), (0.93, _bare_not), (1.0, _bare))
"""Each condition's shape, by the cumulative chance it is picked; nesting ones (joined,
negated) only above depth 3 fall through to the next."""


def condition(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    left = operand(rng, depth)
    for bound, shape in SHAPES:
        nests = shape in (_joined, _negated)
        if roll < bound and not (nests and depth >= 3):
            return shape(rng, left, depth)
    return left


def expression(rng: random.Random) -> str:
    return condition(rng) + rng.choice(TRAILERS)


def property_map(rng: random.Random) -> dict[str, str]:
    return {name: rng.choice(PROPERTY_VALUES) for name in PROPERTY_NAMES
            if name != "z" and rng.random() < 0.8}


def cases(seed: int, count: int, *, maps_per_expression: int = 6
          ) -> list[tuple[str, list[dict[str, str]]]]:
    """`count` expressions, each with its property maps (the empty map among them)."""
    rng = random.Random(seed)
    return [(expression(rng), [{}] + [property_map(rng) for _ in range(maps_per_expression)])
            for _ in range(count)]


def outcome(compiled: object, properties: dict[str, str]) -> str:
    """What an expression gave on one map, as the oracle reports it: T, F, N (null) or X
    (it threw)."""
    assert isinstance(compiled, Sql92Filter)
    try:
        value = compiled.evaluate(properties)
    except Sql92EvaluationError:
        return "X"
    return {True: "T", False: "F", None: "N"}[value]  # type: ignore[index]
