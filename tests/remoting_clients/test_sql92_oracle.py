"""mqstore's SQL92 evaluator against RocketMQ 5.5.0's own filter (`rocketmq-filter`), on
seeded random expressions and property maps (tests/storage/filters/sql92_cases.py): each
expression must compile on both or on neither, and give the same T, F, null or throw on
every map.  No server runs: the jar's compiler and evaluator are called directly."""

from __future__ import annotations

import pytest

from mqstore.storage import Sql92ExpressionError
from mqstore.storage.filters import compile_sql92
from tests.remoting_clients import sql92_oracle
from tests.storage.filters.sql92_cases import cases, outcome

pytestmark = pytest.mark.remoting_clients

SEEDS = (1, 2, 3)
EXPRESSIONS_PER_SEED = 2000


def mqstore_answer(expression: str, maps: list[dict[str, str]]) -> str | None:
    try:
        compiled = compile_sql92(expression)
    except Sql92ExpressionError:
        return None
    return "".join(outcome(compiled, found) for found in maps)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_expression_answers_as_rocketmq(seed: int) -> None:
    requests = cases(seed, EXPRESSIONS_PER_SEED)
    rocketmq = sql92_oracle.evaluate(requests)
    compiled = sum(answer is not None for answer in rocketmq)
    assert compiled > EXPRESSIONS_PER_SEED // 3  # the cases exercise evaluation, not parsing
    mqstore = [mqstore_answer(expression, maps) for expression, maps in requests]
    differences = [(request, theirs, ours)
                   for request, theirs, ours in zip(requests, rocketmq, mqstore, strict=True)
                   if theirs != ours]
    assert differences == []
