"""Shaping what the notifier answers: one JSON object per message, the same everywhere.

    {"topic": "Orders", "queue_id": 3, "queue_offset": 17, "physical_offset": 1048576,
     "msg_id": "7F00000100002A9F0000000000100000", "store_timestamp_ms": ...,
     "born_timestamp_ms": ..., "reconsume_times": 0, "tags": "created", "keys": ["order-17"],
     "properties": {"region": "eu"}, "body_base64": "..."}

`properties` leaves out TAGS and KEYS (they are the `tags` and `keys` fields); the body is
copied out of the mapped segment while the read is held, as base64.  Pull and poll answers
also say `suggest_pull_from_follower` (RocketMQ's `suggestPullingFromSlave`): true when the
newest message answered lies more than `pull_from_follower_memory_ratio` of the machine's
memory behind the log's end, i.e. the reader is far behind and likely reads from disk.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from mqstore.storage import GetResult, StoredMessage
from mqstore.storage.format.properties import PROPERTY_KEYS, PROPERTY_TAGS

_SHOWN_SEPARATELY = frozenset({PROPERTY_TAGS, PROPERTY_KEYS})


def message_json(message: StoredMessage) -> dict[str, Any]:
    return {
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "physical_offset": message.physical_offset,
        "msg_id": message.msg_id,
        "store_timestamp_ms": message.store_timestamp_ms,
        "born_timestamp_ms": message.born_timestamp_ms,
        "reconsume_times": message.reconsume_times,
        "tags": message.tags,
        "keys": list(message.keys),
        "properties": {name: value for name, value in message.properties.items()
                       if name not in _SHOWN_SEPARATELY},
        "body_base64": base64.b64encode(message.body).decode("ascii"),
    }


def pull_json(result: GetResult, *, committed_position: int,
              behind_bytes_max: int) -> dict[str, Any]:
    """A single-queue pull's answer (call it before the result is released)."""
    newest = result.messages[-1].physical_offset if result.messages else None
    answer = {"status": result.status.value, "next_offset": result.next_offset,
              "min_offset": result.min_offset, "max_offset": result.max_offset,
              "messages": [message_json(message) for message in result.messages],
              "suggest_pull_from_follower": suggest_follower(
                  newest, committed_position=committed_position,
                  behind_bytes_max=behind_bytes_max)}
    if result.reason:
        answer["reason"] = result.reason
    return answer


def suggest_follower(newest_position: int | None, *, committed_position: int,
                     behind_bytes_max: int) -> bool:
    """RocketMQ `suggestPullingFromSlave`: the newest message pulled is more than
    `behind_bytes_max` behind the log's end, so it was likely read from disk."""
    return newest_position is not None and committed_position - newest_position > \
        behind_bytes_max


def behind_bytes_max(memory_ratio: float) -> int:
    """`memory_ratio` of this machine's physical memory, in bytes."""
    return int(memory_ratio * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
