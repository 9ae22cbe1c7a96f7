"""JSON bodies as fastjson writes them: object keys for message-queue maps, compact text."""

from __future__ import annotations

import pytest

from mqstore.services.notifier.remoting.bodies import MessageQueue, QueueKeyed, dumps, queue_of
from mqstore.services.notifier.remoting.codes import RemotingError


def test_queue_keyed_maps_have_object_keys_sorted_by_queue() -> None:
    table = QueueKeyed({MessageQueue("t", "b", 1): 42, MessageQueue("t", "b", 0): 7})
    assert dumps({"offsetTable": table}) == (
        '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:7,'
        '{"brokerName":"b","queueId":1,"topic":"t"}:42}}')


def test_plain_values_are_compact_with_sorted_keys() -> None:
    assert dumps({"b": [1, "x"], "a": {"0": "127.0.0.1:9876"}, "c": None, "d": 1.5}) == \
        '{"a":{"0":"127.0.0.1:9876"},"b":[1,"x"],"c":null,"d":1.5}'


def test_a_lock_body_queue_parses_and_a_bad_one_is_refused() -> None:
    assert queue_of({"topic": "t", "brokerName": "b", "queueId": 2}, what="mq") == \
        MessageQueue("t", "b", 2)
    with pytest.raises(RemotingError, match="integer queueId"):
        queue_of({"topic": "t", "brokerName": "b", "queueId": "2"}, what="mq")
