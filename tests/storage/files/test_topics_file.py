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
    assert document["topicConfigTable"] == {"Pay": {
        "topicName": "Pay", "readQueueNums": 4, "writeQueueNums": 2, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}}}
    assert document["mqstoreDeletedTopics"] == ["Old"]
    assert document["dataVersion"]["counter"] == 1
    assert TopicsFile(tmp_path).read().created == {"Pay": TopicEntry(4, 2, 6)}


ROCKETMQ_TOPICS = {"dataVersion": {"counter": 7, "stateVersion": 0, "timestamp": 1},
                   "topicConfigTable": {
                       "TBW102": {"topicName": "TBW102", "readQueueNums": 8,
                                  "writeQueueNums": 8, "perm": 7, "order": False,
                                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                  "attributes": {}},
                       "Ordered": {"topicName": "Ordered", "readQueueNums": 2,
                                   "writeQueueNums": 2, "perm": 6, "order": True,
                                   "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                   "attributes": {"+message.type": "FIFO"}}}}
"""What a RocketMQ 5.5.0 broker keeps in `config/topics.json` (trimmed to two topics)."""


def test_rocketmqs_file_is_read_and_its_fields_kept_through_a_change(tmp_path: Path) -> None:
    (tmp_path / TOPICS_FILE).parent.mkdir()
    (tmp_path / TOPICS_FILE).write_text(json.dumps(ROCKETMQ_TOPICS, indent="\t"))
    topics = TopicsFile(tmp_path)
    assert topics.read().created == {"TBW102": TopicEntry(8, 8, 7),
                                     "Ordered": TopicEntry(2, 2, 6)}
    with topics.changing() as change:
        change.created["Ordered"] = TopicEntry(4, 4, 6)
    document = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert document["topicConfigTable"]["Ordered"]["order"] is True
    assert document["topicConfigTable"]["Ordered"]["attributes"] == {"+message.type": "FIFO"}
    assert document["topicConfigTable"]["Ordered"]["writeQueueNums"] == 4
    assert document["dataVersion"]["counter"] == 8


def test_the_earlier_layout_is_read_and_rewritten_as_rocketmqs(tmp_path: Path) -> None:
    (tmp_path / TOPICS_FILE).parent.mkdir()
    (tmp_path / TOPICS_FILE).write_text(json.dumps({"version": 1, "deleted": ["Old"], "topics": {
        "Pay": {"read_queue_nums": 4, "write_queue_nums": 2, "perm": 6}}}))
    topics = TopicsFile(tmp_path)
    assert topics.read().created == {"Pay": TopicEntry(4, 2, 6)}
    with topics.changing() as change:
        change.created["Ship"] = TopicEntry(1, 1, 6)
    document = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert set(document["topicConfigTable"]) == {"Pay", "Ship"}
    assert document["mqstoreDeletedTopics"] == ["Old"]


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
                                  '{"version": 1, "deleted": "A"}',
                                  '{"topicConfigTable": {"A": {"readQueueNums": 1}}}',
                                  '{"topicConfigTable": [], "mqstoreDeletedTopics": []}'])
def test_a_file_of_another_format_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / TOPICS_FILE).parent.mkdir()
    (tmp_path / TOPICS_FILE).write_text(text)
    with pytest.raises(TopicsFileFormatError, match=r"topics\.json"):
        TopicsFile(tmp_path).read()
