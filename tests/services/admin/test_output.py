"""Tables of `mqstore admin` (services/admin/output.py): integers right-aligned with `-` for
none, text and empty columns left-aligned."""

from __future__ import annotations

from mqstore.services.admin.output import Table, render


def test_integer_columns_align_right_and_blank_columns_left() -> None:
    lines = render(Table(["queue", "committed_offset", "reason", "topics"],
                         [[0, 12, None, ["A", "B"]], [10, None, None, []]]))
    assert lines == ["QUEUE  COMMITTED_OFFSET  REASON  TOPICS",
                     "    0                12  -       A,B",
                     "   10                 -  -       -"]


def test_an_empty_table_says_so() -> None:
    assert render(Table(["topic"], [], title="topics")) == ["topics", "TOPIC", "(none)"]
