"""`ConsumerOffsets.groups()`: the groups an operator lists (GET /v1/groups, `mqstore admin
groups list`): every group with a file and its topics; stray files are no groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.storage import StoreFormatError
from mqstore.storage.files.consumer_offsets import ConsumerOffsets


def test_groups_name_every_group_with_offsets_and_its_topics(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path, lock_timeout_ms=1000)
    assert offsets.groups() == {}
    offsets.commit("billing", "Orders", {0: 3})
    offsets.commit("billing", "Audit", {1: 1})
    offsets.commit("audit", "Audit", {0: 0})
    (offsets.directory / "not a group.json").write_text("{}")  # left by hand: skipped
    (offsets.directory / "notes.txt").write_text("")
    assert offsets.groups() == {"audit": ["Audit"], "billing": ["Audit", "Orders"]}


def test_a_corrupt_group_file_is_named_not_skipped(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path, lock_timeout_ms=1000)
    offsets.commit("billing", "Orders", {0: 3})
    offsets.path("billing").write_text("{junk")
    with pytest.raises(StoreFormatError, match=r"billing\.json"):
        offsets.groups()
