"""What a command shows: `Report`, one JSON document and the tables that say it to a human.

Tables are the default (aligned columns, numbers right-aligned, `-` for nothing); with
`--output json` the document is printed instead, indented, for scripts.  The document is
the services' answers gathered, not the table re-parsed: its fields are the HTTP API's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

OUTPUTS = ("table", "json")


@dataclasses.dataclass(frozen=True)
class Table:
    columns: Sequence[str]
    rows: Sequence[Sequence[object]]
    title: str = ""


@dataclasses.dataclass(frozen=True)
class Report:
    document: dict[str, Any]
    tables: Sequence[Table] = ()
    lines: Sequence[str] = ()
    """Free lines printed after the tables (a summary, what changed)."""


def show(report: Report, *, output: str, say: Callable[[str], None]) -> None:
    if output == "json":
        say(json.dumps(report.document, indent=2, sort_keys=False))
        return
    for index, table in enumerate(report.tables):
        if index:
            say("")
        for line in render(table):
            say(line)
    for line in report.lines:
        say(line)


def render(table: Table) -> list[str]:
    cells = [[_cell(value) for value in row] for row in table.rows]
    numeric = [_numeric_column([row[column] for row in table.rows])
               for column in range(len(table.columns))]
    widths = [max([len(name)] + [len(row[column]) for row in cells])
              for column, name in enumerate(table.columns)]
    lines = [table.title] if table.title else []

    def line(values: Sequence[str]) -> str:
        return "  ".join(value.rjust(width) if numeric[column] else value.ljust(width)
                         for column, (value, width) in enumerate(zip(values, widths,
                                                                     strict=True))).rstrip()

    lines.append(line([name.upper() for name in table.columns]))
    lines.extend(line(row) for row in cells)
    if not table.rows:
        lines.append("(none)")
    return lines


def _cell(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value) or "-"
    return str(value).replace("\n", " ")


def _numeric_column(values: Sequence[object]) -> bool:
    """Right-aligned: integers, with `-` for the rows that have none (a queue never
    committed on); a column of nothing but blanks is text."""
    def is_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    return any(is_int(value) for value in values) and all(
        value is None or is_int(value) for value in values)
