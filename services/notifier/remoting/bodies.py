"""JSON bodies as RocketMQ's fastjson writes and reads them.

Compact (no spaces: Go's route parser splits on `,` and `:`), keys sorted, and maps keyed by
a MessageQueue written with JSON objects as keys, which is not JSON but is what fastjson
writes and what 5.5's fastjson2 demands (it refuses string-encoded keys):

    {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":10,...}}}

`dumps(value)` writes any JSON value, where a `QueueKeyed` mapping gets the object keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from mqstore.services.notifier.remoting.codes import SUBSCRIPTION_PARSE_FAILED, RemotingError


class MessageQueue(NamedTuple):
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, object]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


class QueueKeyed(dict[MessageQueue, Any]):
    """A map whose keys are message queues: written with object keys."""


def dumps(value: object) -> str:
    if isinstance(value, MessageQueue):  # before tuples: it is a NamedTuple
        return dumps(value.to_json())
    if isinstance(value, QueueKeyed):
        return "{" + ",".join(f"{dumps(key.to_json())}:{dumps(item)}"
                              for key, item in sorted(value.items())) + "}"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{json.dumps(str(key))}:{dumps(item)}"
                              for key, item in sorted(value.items())) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return "[" + ",".join(dumps(item) for item in items) + "]"
    return json.dumps(value, separators=(",", ":"))


def encode(value: object) -> bytes:
    return dumps(value).encode("utf-8")


def loads_object(body: bytes | memoryview, *, what: str) -> dict[str, Any]:
    """A request body that must be a JSON object; a bad one is refused with a remark."""
    try:
        document = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise RemotingError(SUBSCRIPTION_PARSE_FAILED if what == "heartbeat" else 1,
                            f"{what} body is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise RemotingError(1, f"{what} body must be a JSON object")
    return document


def queue_of(document: object, *, what: str) -> MessageQueue:
    """A MessageQueue from its JSON form."""
    if not isinstance(document, dict):
        raise RemotingError(1, f"{what}: a message queue must be an object")
    topic, broker, queue_id = (document.get("topic"), document.get("brokerName"),
                               document.get("queueId"))
    if not isinstance(topic, str) or not isinstance(broker, str) or not isinstance(
            queue_id, int) or isinstance(queue_id, bool):
        raise RemotingError(1, f"{what}: a message queue needs topic, brokerName and an "
                               f"integer queueId")
    return MessageQueue(topic, broker, queue_id)
