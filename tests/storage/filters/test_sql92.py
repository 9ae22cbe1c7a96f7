"""SQL92 filters: RocketMQ 5.5.0's evaluation table (broker features reference, 5.4), its
grammar (5.3) and its compiler's refusals, the bounds, and the cache."""

from __future__ import annotations

import random

import pytest

from mqstore.storage import Sql92ExpressionError
from mqstore.storage.filters import Sql92Cache, compile_sql92
from mqstore.storage.filters.sql92_nodes import DEPTH_MAX
from tests.storage.filters.sql92_cases import condition, outcome, property_map

ABSENT = None
COLUMNS = ("7", "5", "6.5", "x", ABSENT, "10000000000")
"""The columns of the reference table: `a=7`, `a=5`, `a=6.5`, `a=x`, no `a`, `a=10^10`."""
TABLE = {
    # expression: outcome per column (T, F, N: null, X: the evaluation throws)
    "a > 5": "TFXXNX",
    "a > 5.0": "TFTXNT",
    "a = 5": "FTXXNX",
    "a = '5'": "FTFFNF",
    "a <> 5": "TFXXNX",
    "NOT (a > 5)": "FTXXNX",
    "a IS NULL": "FFFFTF",
    "a IS NOT NULL": "TTTTFT",
    "a BETWEEN 1 AND 10": "TTXXNX",
    "a IN ('5','7')": "TTFFNF",
    "a NOT IN ('5','7')": "FFTTNT",
    "a > 5 OR a IS NULL": "TFXXTX",
}


def properties_of(column: str | None) -> dict[str, str]:
    return {} if column is None else {"a": column}


@pytest.mark.parametrize("expression", sorted(TABLE))
def test_the_reference_table(expression: str) -> None:
    compiled = compile_sql92(expression)
    found = "".join(outcome(compiled, properties_of(column)) for column in COLUMNS)
    assert found == TABLE[expression]


@pytest.mark.parametrize("expression", sorted(TABLE))
def test_only_true_matches(expression: str) -> None:
    """Null, FALSE and a throw all reject the message (`isMatchedByCommitLog`)."""
    compiled = compile_sql92(expression)
    for column, wanted in zip(COLUMNS, TABLE[expression], strict=True):
        assert compiled(properties_of(column)) is (wanted == "T"), (expression, column)


@pytest.mark.parametrize(("expression", "matches", "misses"), [
    ("s CONTAINS 'ell'", [{"s": "hello"}], [{}, {"s": "help"}]),  # absent: FALSE, not null
    ("s NOT CONTAINS 'ell'", [{"s": "help"}], [{}, {"s": "hello"}]),
    ("s STARTSWITH 'he' AND s ENDSWITH 'lo'", [{"s": "hello"}], [{"s": "help"}]),
    ("s CONTAINS ''", [], [{"s": "x"}]),  # an empty search is always FALSE
    ("b = TRUE", [{"b": "true"}, {"b": "TRUE"}], [{"b": "yes"}, {}]),
    ("b = 'true'", [{"b": "true"}], [{"b": "TRUE"}]),
    ("TRUE", [{}, {"a": "1"}], []),
    ("NULL", [], [{}]),
    ("a", [], [{}, {"a": "true"}]),  # a bare property: null or FALSE, never TRUE
    ("a > 5 AND TAGS = 'tq'", [{"a": "7", "TAGS": "tq"}], [{"a": "9", "TAGS": "other"}]),
    ("A > 5", [{"A": "6"}], [{"a": "6"}]),  # property names are case-sensitive
    ("a between 1 and 9 and not (b is null)", [{"a": "3", "b": ""}], [{"a": "3"}]),
    ("a >= -2147483648 AND a < 2147483648", [{"a": "-2147483648"}], [{"a": "2147483648"}]),
    ("a > 5 -- the rest of the line\n AND b = 'x'", [{"a": "6", "b": "x"}], [{"a": "6"}]),
    ("/* c */ a > 5 /* c */", [{"a": "6"}], [{"a": "5"}]),
    ("a = 'it''s'", [{"a": "it's"}], [{"a": "it''s"}]),
    ("a > 5 xyz", [{"a": "6"}], [{"a": "5"}]),  # RocketMQ ignores what follows
    ("a > 5 -- no line end", [{"a": "6"}], [{"a": "5"}]),  # two minus signs: ignored too
    ("a > 0x10", [{"a": "1"}], [{"a": "0"}]),  # 0, then x10: ignored
    ("a > 5.0", [{"a": "NaN"}, {"a": "5.5f"}, {"a": " 6 "}], [{"a": "5"}, {"a": "inf"}]),
    ("a = 5", [{"a": "+5"}, {"a": "05"}], [{"a": " 5"}, {"a": "5 "}, {"a": "1_0"}]),
])
def test_grammar_and_values(expression: str, matches: list[dict[str, str]],
                            misses: list[dict[str, str]]) -> None:
    compiled = compile_sql92(expression)
    assert [compiled(found) for found in matches] == [True] * len(matches)
    assert [compiled(found) for found in misses] == [False] * len(misses)


@pytest.mark.parametrize("expression", [
    "", "a >", "a > 5 AND", "(a > 5", "a IN (5)", "a = NULL", "NULL = a", "a <> NULL",
    "NOT a > 5", "(a > 5) > 3", "a > 'x'", "TRUE > 1", "TRUE = 5", "TRUE = 'x'", "5",
    "'x'", "NOT 5", "5 AND a", "5 IN ('5')", "-a IN ('5')", "a BETWEEN 2 AND 1",
    "a BETWEEN NULL AND 1", "a BETWEEN 'a' AND 'b'", "a = 0.0", "a > 1e400",
    "a > 9223372036854775808", "a > 5 #", "a.b > 5", "a NOT b", "a IS x", "a é 5",
    "a > 5 OR OR", "a CONTAINS 5",
])
def test_what_the_compiler_refuses(expression: str) -> None:
    with pytest.raises(Sql92ExpressionError):
        compile_sql92(expression)


def test_keywords_are_case_insensitive_and_identifiers_are_words() -> None:
    assert compile_sql92("a iS nOt NuLl")({"a": "1"})
    assert compile_sql92("NOTE > 1")({"NOTE": "2"})  # an identifier, not NOT
    assert compile_sql92("$x IS NULL AND _y IS NULL")({})


def test_bounds_are_checked() -> None:
    with pytest.raises(Sql92ExpressionError, match="at most 10"):
        compile_sql92("a > 5 AND b < 100", chars_max=10)
    deep = "NOT " * DEPTH_MAX + "a"
    with pytest.raises(Sql92ExpressionError, match=f"deeper than {DEPTH_MAX}"):
        compile_sql92(deep, chars_max=len(deep))
    long_chain = " OR ".join(f"a = '{index}'" for index in range(500))
    assert compile_sql92(long_chain, chars_max=len(long_chain))({"a": "499"})


def test_the_cache_keeps_the_last_entries_and_refusals() -> None:
    cache = Sql92Cache(entries_max=2, chars_max=100)
    first = cache.compile("a > 1")
    assert cache.compile("a > 1") is first
    for expression in ("a > 2", "a > 3"):
        cache.compile(expression)
    assert len(cache) == 2
    assert cache.compile("a > 1") is not first  # pushed out, compiled again
    for _ in range(2):
        with pytest.raises(Sql92ExpressionError):
            cache.compile("a >")
    assert len(cache) == 2


def test_random_expressions_keep_three_valued_logic() -> None:
    """Over seeded random conditions and maps: NOT flips TRUE and FALSE and keeps null,
    `e OR NOT e` is never FALSE, `e AND NOT e` never TRUE, and a throw stays a throw."""
    rng = random.Random(7)
    for _ in range(600):
        expression = condition(rng)
        try:
            plain = compile_sql92(f"({expression})")
        except Sql92ExpressionError:
            continue
        negated = compile_sql92(f"NOT ({expression})")
        either = compile_sql92(f"({expression}) OR NOT ({expression})")
        both = compile_sql92(f"({expression}) AND NOT ({expression})")
        for found in [{}] + [property_map(rng) for _ in range(5)]:
            value = outcome(plain, found)
            assert outcome(negated, found) == {"T": "F", "F": "T"}.get(value, value)
            assert outcome(either, found) == {"F": "T"}.get(value, value)
            assert outcome(both, found) == {"T": "F"}.get(value, value)


def test_random_expressions_compile_or_are_refused_by_name() -> None:
    """No other exception escapes, whatever the text (the grammar's tokens shuffled)."""
    rng = random.Random(11)
    pieces = ["a", "5", "'x'", "(", ")", "AND", "OR", "NOT", "=", ">", "IN", "BETWEEN",
              "IS", "NULL", ",", "-", "+", "TRUE", "5.5", "--", "/*", "*/", "\n", "#"]
    for _ in range(2000):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        try:
            compiled = compile_sql92(text)
        except Sql92ExpressionError:
            continue
        for found in ({}, {"a": "5"}, {"a": "x"}):
            outcome(compiled, found)
