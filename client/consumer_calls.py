"""What a consumer sends and keeps, without I/O (shared by `Consumer` and `AsyncConsumer`).

A consumer of `group` on `topic` keeps, per queue, its position: the next offset after what
its polls returned (the notifier's `next_offsets`, which also move past entries a tag filter
skipped).  Each poll sends those positions, so the notifier continues where the last poll
ended; queues it has no position for start at the group's committed offset.  `commit` sends
the positions that moved since the last commit.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from mqstore.client.errors import ServerError
from mqstore.client.results import error_for


@dataclasses.dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One message a poll returned."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    msg_id: str
    store_timestamp_ms: int
    born_timestamp_ms: int
    tags: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    body: bytes
    reconsume_times: int = 0
    """Times the message was consumed and nacked before: 0, or that of a retry copy."""

    @property
    def origin_topic(self) -> str:
        """The topic the message was sent to: a retry copy (`topic` `%RETRY%<group>`)
        keeps it in its `RETRY_TOPIC` property."""
        return self.properties.get("RETRY_TOPIC", self.topic)


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes | None


def message_from_json(document: Mapping[str, Any]) -> ReceivedMessage:
    return ReceivedMessage(
        topic=document["topic"], queue_id=document["queue_id"],
        queue_offset=document["queue_offset"], physical_offset=document["physical_offset"],
        msg_id=document["msg_id"], store_timestamp_ms=document["store_timestamp_ms"],
        born_timestamp_ms=document["born_timestamp_ms"], tags=document["tags"],
        keys=tuple(document["keys"]), properties=dict(document["properties"]),
        body=base64.b64decode(document["body_base64"], validate=True),
        reconsume_times=document.get("reconsume_times", 0))


def read_answer(request: Request, http_status: int, body: bytes) -> dict[str, Any]:
    """The JSON object of a 200, or raise the error the answer means."""
    if http_status != 200:
        raise error_for(http_status, body)
    try:
        document = json.loads(body)
    except ValueError as error:
        raise ServerError(f"unreadable answer to {request.path}: {error}",
                          http_status=http_status) from None
    if not isinstance(document, dict):
        raise ServerError(f"unreadable answer to {request.path}: not an object",
                          http_status=http_status)
    return document


class ConsumerState:
    """Positions and committed offsets of one consumer; builds its requests."""

    def __init__(self, prefix: str, group: str, topic: str, *,
                 tags: Sequence[str] | None) -> None:
        if not group or not topic:
            raise ValueError("group and topic are required")
        if isinstance(tags, str):
            raise TypeError("tags must be a sequence of strings, not one string")
        self.group = group
        self.topic = topic
        self.tags = list(tags) if tags else None
        self.group_path = f"{prefix}/v1/groups/{urllib.parse.quote(group, safe='')}"
        self.positions: dict[int, int] = {}
        self.committed: dict[int, int] = {}

    def poll_request(self, *, max_messages: int, wait_ms: int) -> Request:
        if max_messages < 1 or wait_ms < 0:
            raise ValueError(f"need max_messages >= 1 and wait_ms >= 0, got {max_messages} "
                             f"and {wait_ms}")
        document: dict[str, object] = {
            "max_messages": max_messages, "wait_ms": wait_ms, "tags": self.tags,
            "offsets": {str(queue_id): offset for queue_id, offset in self.positions.items()}}
        topic = urllib.parse.quote(self.topic, safe="")
        return Request("POST", f"{self.group_path}/topics/{topic}/poll",
                       json.dumps(document).encode())

    def take(self, request: Request, document: Mapping[str, Any]) -> list[ReceivedMessage]:
        """The messages of a poll's answer; positions move to its next offsets."""
        try:
            messages = [message_from_json(item) for item in document["messages"]]
            moved = {int(key): int(value) for key, value in document["next_offsets"].items()}
        except (KeyError, TypeError, ValueError) as error:
            raise ServerError(f"unreadable answer to {request.path}: {error!r}") from None
        self.positions.update(moved)
        return messages

    def commit_request(self) -> Request | None:
        """The commit of every position that moved since the last commit, or None."""
        moved = {queue_id: offset for queue_id, offset in self.positions.items()
                 if self.committed.get(queue_id) != offset}
        if not moved:
            return None
        document = {"topic": self.topic,
                    "offsets": {str(queue_id): offset for queue_id, offset in moved.items()}}
        return Request("POST", f"{self.group_path}/offsets", json.dumps(document).encode())

    def committed_by(self, request: Request, document: Mapping[str, Any]) -> None:
        try:
            stored = {int(key): int(value) for key, value in document["offsets"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ServerError(f"unreadable answer to {request.path}: {error!r}") from None
        self.committed.update(stored)
