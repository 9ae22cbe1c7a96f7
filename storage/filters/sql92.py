"""SQL92 filters as RocketMQ 5.5.0 serves them (`MessageSelector.bySql("a > 5")`).

`compile_sql92(text)` gives a `Sql92Filter`, a predicate on a message's full stored property
map (user properties and the system ones: `TAGS`, `KEYS`, `UNIQ_KEY`, ...), or raises
`Sql92ExpressionError` where RocketMQ's compiler refuses the text (its CHECK_CLIENT_CONFIG
and pulls then answer SUBSCRIPTION_PARSE_FAILED).  A message matches only when the
expression is TRUE: FALSE, null (an absent property: `a > 5` on a message without `a`) and an
evaluation that throws (`a > 5` on `a=6.5`: the Integer literal makes `a` an Integer) all
reject it, as on RocketMQ's broker (`ExpressionMessageFilter.isMatchedByCommitLog`).

The grammar and its tokens are in sql92_grammar.py, what each construct evaluates to in
sql92_nodes.py and sql92_comparisons.py, Java's parsing of property values in
java_values.py.  RocketMQ's own filter (`rocketmq-filter-5.5.0.jar`) gives the same answer,
compile error, TRUE, FALSE, null or throw, on 6,000 seeded random expressions against 7
property maps each (tests/remoting_clients/test_sql92_oracle.py runs the jar).

`Sql92Cache` keeps compiled expressions, as RocketMQ's parser does (100 entries): a push
consumer's pulls carry no expression, so each one compiles the heartbeat's again otherwise.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping

from ..errors import Sql92ExpressionError
from .java_values import Sql92EvaluationError
from .sql92_grammar import parse
from .sql92_nodes import Node, Value

EXPRESSION_CHARS_MAX = 4096
"""Characters in one expression by default.  RocketMQ sets none but its 16 MiB frame; a
filter names a few properties (`a > 5 AND region IN (...)`: tens of characters, a long IN
list a few thousand).  Compiling costs about 4 µs a character (measured on chains of
`OR`), so 4,096 bounds a cache miss at about 16 ms of the event loop."""
CACHE_ENTRIES_MAX = 100
"""Compiled expressions kept by default: RocketMQ's `SelectorParser` cache holds 100.  One
per (group, topic) subscription in use; past it the least recently used is compiled again."""


class Sql92Filter:
    """A compiled expression; call it with a property map: True only if it is TRUE."""

    __slots__ = ("_evaluate", "expression")

    def __init__(self, expression: str, root: Node) -> None:
        self.expression = expression
        self._evaluate = root.evaluate

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        """TRUE, FALSE or None (unknown); `Sql92EvaluationError` where RocketMQ's
        evaluation throws."""
        return self._evaluate(properties)

    def __call__(self, properties: Mapping[str, str]) -> bool:
        try:
            return self._evaluate(properties) is True
        except Sql92EvaluationError:  # RocketMQ's filter logs it and answers "no match"
            return False

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


def compile_sql92(expression: str, *, chars_max: int = EXPRESSION_CHARS_MAX) -> Sql92Filter:
    """The filter `expression` describes; `Sql92ExpressionError` if RocketMQ's compiler
    would refuse it or it is longer than `chars_max`."""
    if len(expression) > chars_max:
        raise Sql92ExpressionError(f"the expression has {len(expression)} characters; at "
                                   f"most {chars_max} are read")
    return Sql92Filter(expression, parse(expression))


class Sql92Cache:
    """The last `entries_max` expressions compiled, and the last refused (the error is kept
    too, as RocketMQ's cache keeps its exception: a bad expression pulled again is not
    parsed again).  Not thread-safe: one per event loop."""

    def __init__(self, *, entries_max: int = CACHE_ENTRIES_MAX,
                 chars_max: int = EXPRESSION_CHARS_MAX) -> None:
        assert entries_max > 0
        assert chars_max > 0
        self._entries_max = entries_max
        self._chars_max = chars_max
        self._compiled: collections.OrderedDict[str, Sql92Filter | Sql92ExpressionError] = \
            collections.OrderedDict()

    def compile(self, expression: str) -> Sql92Filter:
        found = self._compiled.get(expression)
        if found is None:
            try:
                found = compile_sql92(expression, chars_max=self._chars_max)
            except Sql92ExpressionError as error:
                found = error
            if len(self._compiled) >= self._entries_max:
                self._compiled.popitem(last=False)
            self._compiled[expression] = found
        else:
            self._compiled.move_to_end(expression)
        if isinstance(found, Sql92ExpressionError):
            raise Sql92ExpressionError(str(found))
        return found

    def __len__(self) -> int:
        return len(self._compiled)
