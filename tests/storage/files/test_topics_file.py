"""`TopicsFile` (storage/files/topics_file.py): the one reader and writer of
`config/topics.json` (issue 22, Found 5: the file was parsed in two places, by the remoting
front's table and the writer's gate, each its own way)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from mqstore.storage.files.topics_file import (
    EMPTY,
    TOPICS_FILE,
    TopicEntry,
    TopicsFile,
    TopicsFileFormatError,
)


def test_no_file_reads_empty_and_a_change_writes_it_whole(tmp_path: Path) -> None:
    topics = TopicsFile(tmp_path)
    assert topics.read() == EMPTY
    with topics.changing() as change:
        change.created["Pay"] = TopicEntry(4, 2, 6)
        change.deleted.add("Old")
    document = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert document == {"version": 1, "deleted": ["Old"], "topics": {
        "Pay": {"read_queue_nums": 4, "write_queue_nums": 2, "perm": 6}}}
    assert TopicsFile(tmp_path).read().created == {"Pay": TopicEntry(4, 2, 6)}


def test_a_change_that_raises_writes_nothing(tmp_path: Path) -> None:
    topics = TopicsFile(tmp_path)
    with pytest.raises(RuntimeError), topics.changing() as change:
        change.created["Pay"] = TopicEntry(1, 1, 6)
        raise RuntimeError("refused")
    assert not (tmp_path / TOPICS_FILE).exists()


def test_every_reader_sees_another_writers_change(tmp_path: Path) -> None:
    reader, writer = TopicsFile(tmp_path), TopicsFile(tmp_path)
    assert reader.read() == EMPTY
    with writer.changing() as change:
        change.created["Ship"] = TopicEntry(8, 8, 6)
    assert set(reader.read().created) == {"Ship"}


def test_changes_from_many_threads_lose_none(tmp_path: Path) -> None:
    def create(number: int) -> None:
        with TopicsFile(tmp_path).changing() as change:
            change.created[f"T{number}"] = TopicEntry(1, 1, 6)

    threads = [threading.Thread(target=create, args=(number,)) for number in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(TopicsFile(tmp_path).read().created) == 16


@pytest.mark.parametrize("text", ["not json", "[]", '{"version": 2}',
                                  '{"version": 1, "topics": {"A": {"perm": "6"}}}',
                                  '{"version": 1, "deleted": "A"}'])
def test_a_file_of_another_format_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / TOPICS_FILE).parent.mkdir()
    (tmp_path / TOPICS_FILE).write_text(text)
    with pytest.raises(TopicsFileFormatError, match=r"topics\.json"):
        TopicsFile(tmp_path).read()
