"""RocketMQ 5.5.0's own SQL92 filter, run on expressions and property maps (`java/filter/`).

`evaluate(requests)` sends each (expression, maps) to one JVM running `Sql92Oracle` and
returns, per request, None where RocketMQ's compiler refused the expression, else one letter
per map: T, F, N (null) or X (the evaluation threw): what `outcome` in
tests/storage/filters/sql92_cases.py gives for mqstore's evaluator.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from tests.remoting_clients.maven_build import REPO_ROOT, JavaBuild, build

FILTER_PROJECT = REPO_ROOT / "tests" / "remoting_clients" / "java" / "filter"
FILTER_VERSION = "5.5.0"
MAIN_CLASS = "org.mqstore.filter.Sql92Oracle"
RUN_TIMEOUT_S = 120


class OracleError(RuntimeError):
    """The JVM failed or answered a different number of lines. Tests fail on this."""


def _hex(text: str) -> str:
    return text.encode("utf-8").hex()


def _line(expression: str, maps: Sequence[dict[str, str]]) -> str:
    fields = [_hex(expression)]
    fields += [",".join(f"{_hex(name)},{_hex(value)}" for name, value in found.items())
               for found in maps]
    return "\t".join(fields)


def oracle_build() -> JavaBuild:
    """rocketmq-filter's jars and `Sql92Oracle` compiled against them (cached)."""
    return build(FILTER_PROJECT, FILTER_VERSION,
                 required_jar=f"rocketmq-filter-{FILTER_VERSION}.jar")


def evaluate(requests: Sequence[tuple[str, Sequence[dict[str, str]]]]) -> list[str | None]:
    jars = oracle_build()
    stdin = "".join(_line(expression, maps) + "\n" for expression, maps in requests)
    proc = subprocess.run([jars.java, "-Xmx256m", "-cp", jars.classpath, MAIN_CLASS],
                          input=stdin, capture_output=True, text=True, encoding="utf-8",
                          timeout=RUN_TIMEOUT_S, check=False)
    answers = proc.stdout.splitlines()
    if proc.returncode != 0 or len(answers) != len(requests):
        raise OracleError(f"Sql92Oracle exited {proc.returncode} with {len(answers)} lines for "
                          f"{len(requests)} requests\n{proc.stderr[-4000:]}")
    return [answer[3:] if answer.startswith("ok ") else None for answer in answers]
