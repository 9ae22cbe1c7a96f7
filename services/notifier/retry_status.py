"""`GET /v1/retries` and `GET /v1/delays`: where consumers' failed and delayed messages wait.

    GET /v1/retries[?group=G]   per consumer group, its `%RETRY%<group>` and `%DLQ%<group>`
                                topics with their queues and message counts
    GET /v1/delays              per delay level, its `SCHEDULE_TOPIC_XXXX` queue (level - 1),
                                the schedule's next offset and the messages still waiting

Read from the notifier's store view (the queues' offsets, as the indexer published them)
and, for the delays, the schedule's progress file `config/delayOffset.json`
(storage/files/delay_offsets_file.py: level -> next offset), on the volume every service
shares.  A topic's messages are max_offset - min_offset, what retention left, as
`GET /v1/topics/{topic}/queues` counts them; a level's waiting messages are max_offset -
max(next offset, min_offset).  The file holds the writer's progress as of its last write
(every `writer.delay_offsets_persist_interval_ms`, and only as far as the delivered copies
are flushed), so `waiting` may count a second's deliveries that already happened; the
writer's `mqstore_delay_messages_waiting` gauge is its live figure.  `mqstore admin retries`
and `mqstore admin delays` show these (services/admin/retries.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from mqstore.services.common.http.answers import ServiceError, json_response
from mqstore.services.common.topics.rules import DLQ_PREFIX, RETRY_PREFIX
from mqstore.services.notifier.requests import check_group
from mqstore.storage import StoreFormatError
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile
from mqstore.storage.format.delay_levels import SCHEDULE_TOPIC, DelayLevels
from mqstore.storage.reads.store_view import StoreView

KINDS = {RETRY_PREFIX: "retry", DLQ_PREFIX: "dead_letter"}
"""The topic prefix of each kind of a group's topic, and the kind's name in the answer."""


def topic_json(view: StoreView, topic: str) -> dict[str, Any]:
    """A topic with its queues' offsets and its message count."""
    queues = [{"queue_id": queue_id, "min_offset": view.min_offset(topic, queue_id),
               "max_offset": view.max_offset(topic, queue_id)}
              for queue_id in view.queue_ids(topic)]
    return {"topic": topic, "queues": queues,
            "messages": sum(queue["max_offset"] - queue["min_offset"] for queue in queues)}


def retries_json(view: StoreView, topics: list[str], *, group: str | None) -> dict[str, Any]:
    """The retry and dead letter topics among `topics`, by group (only `group`'s if given),
    groups in name order; a group with one of the two has None for the other."""
    groups: dict[str, dict[str, Any]] = {}
    for topic in sorted(topics):
        for prefix, kind in KINDS.items():
            if topic.startswith(prefix) and len(topic) > len(prefix):
                name = topic[len(prefix):]
                if group is None or name == group:
                    entry = groups.setdefault(name, {"group": name, "retry": None,
                                                     "dead_letter": None})
                    entry[kind] = topic_json(view, topic)
    return {"groups": [groups[name] for name in sorted(groups)]}


def delays_json(view: StoreView, levels: DelayLevels,
                next_offsets: dict[int, int]) -> dict[str, Any]:
    """Every level of the table (and any schedule queue past it), with its offsets and its
    waiting messages."""
    numbers = set(range(1, levels.max_level + 1))
    numbers.update(queue_id + 1 for queue_id in view.queue_ids(SCHEDULE_TOPIC))
    rows = []
    for level in sorted(numbers):
        queue_id = level - 1
        min_offset = view.min_offset(SCHEDULE_TOPIC, queue_id)
        max_offset = view.max_offset(SCHEDULE_TOPIC, queue_id)
        next_offset = next_offsets.get(level, 0)
        rows.append({"level": level, "delay_ms": levels.delay_ms(level), "queue_id": queue_id,
                     "min_offset": min_offset, "max_offset": max_offset,
                     "next_offset": next_offset,
                     "waiting": max(0, max_offset - max(next_offset, min_offset))})
    return {"topic": SCHEDULE_TOPIC, "levels": rows,
            "waiting": sum(row["waiting"] for row in rows)}


class RetryStatus:
    """The two views, over the notifier's store view and its list of topics."""

    def __init__(self, view: StoreView, *, topic_names: Callable[[], list[str]]) -> None:
        """`topic_names`: the topics to look at (created or holding queues, not deleted)."""
        self._view = view
        self._topic_names = topic_names
        self._levels = DelayLevels.parse(view.config.message_delay_levels)
        self._offsets_file = DelayOffsetsFile(view.directory)

    async def retries(self, request: web.Request) -> web.Response:
        """GET /v1/retries?group="""
        group = request.query.get("group")
        if group is not None:
            check_group(group)
        return json_response(retries_json(self._view, self._topic_names(), group=group))

    async def delays(self, request: web.Request) -> web.Response:
        """GET /v1/delays"""
        try:  # a small file, but a file: off the loop, as the offsets files are read
            next_offsets = await asyncio.to_thread(self._offsets_file.read)
        except StoreFormatError as error:
            raise ServiceError(500, "DELAY_OFFSETS_CORRUPT", str(error)) from None
        return json_response(delays_json(self._view, self._levels, next_offsets))
