"""`mqstore admin groups`: list, describe (committed offsets and lag), reset.

    list                              GET  /v1/groups
    describe GROUP [--topic T]        GET  /v1/groups (the group's topics, without --topic)
                                      GET  /v1/groups/{group}/offsets?topic=T
                                      GET  /v1/topics/{topic}/queues
    reset GROUP --topic T --offset N  GET  /v1/topics/{topic}/queues, then
       | --time ISO | --timestamp-ms  GET  /v1/topics/{topic}/queues/{q}/offset-by-time
                                           (by time), then
                                      POST /v1/groups/{group}/offsets {"reset": true}

Lag is RocketMQ's `consumerProgress` diff (services/admin/lag.py, shared with the
operator's drain): max_offset minus the committed offset (the next offset to consume).  A
queue the group never committed on shows no committed offset, and its lag counts from
min_offset.  A reset by offset sets each queue to the
offset clamped to the queue's [min_offset, max_offset] (outside it there is nothing to
read, and a commit past the end would skip what comes next); a reset by time sets each to
the first offset stored at or after the time (the max offset if none).  Consumers running
keep their own positions until their next commit: stop them first, as with mqadmin.
"""

from __future__ import annotations

from typing import Any

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.context import Admin, quoted
from mqstore.services.admin.lag import queue_lag
from mqstore.services.admin.output import Report, Table


def list_groups(admin: Admin) -> Report:
    document = admin.notifier("GET", "/v1/groups")
    return Report(document, [Table(["group", "topics"],
                                   [[row["group"], row["topics"]] for row in document["groups"]])])


def describe_group(admin: Admin, group: str, *, topic: str | None) -> Report:
    topics = [topic] if topic is not None else _topics_of(admin, group)
    rows: list[list[Any]] = []
    described: list[dict[str, Any]] = []
    for name in topics:
        committed = _committed(admin, group, name)
        queues = []
        for queue in _queues(admin, name):
            queue_id = queue["queue_id"]
            offset = committed.get(queue_id)
            lag = queue_lag(queue, offset)
            queues.append({**queue, "committed_offset": offset, "lag": lag})
            rows.append([name, queue_id, offset, queue["max_offset"], lag])
        described.append({"topic": name, "queues": queues,
                          "lag": sum(queue["lag"] for queue in queues)})
    total = sum(entry["lag"] for entry in described)
    return Report({"group": group, "topics": described, "lag": total},
                  [Table(["topic", "queue", "committed_offset", "max_offset", "lag"], rows,
                         title=f"group {group}")],
                  [f"total lag {total}"])


def reset_group(admin: Admin, group: str, *, topic: str, queue_id: int | None,
                offset: int | None, timestamp_ms: int | None) -> Report:
    assert (offset is None) != (timestamp_ms is None)
    queues = _queues(admin, topic)
    if queue_id is not None:
        queues = [queue for queue in queues if queue["queue_id"] == queue_id]
        if not queues:
            raise AdminError(f"topic {topic} has no queue {queue_id}")
    if not queues:
        raise AdminError(f"topic {topic} has no queues: nothing to reset")
    before = _committed(admin, group, topic)
    wanted: dict[int, int] = {}
    for queue in queues:
        if offset is not None:
            wanted[queue["queue_id"]] = min(max(offset, queue["min_offset"]),
                                            queue["max_offset"])
        else:
            found = admin.notifier(
                "GET", f"/v1/topics/{quoted(topic)}/queues/{queue['queue_id']}/offset-by-time",
                query={"timestamp_ms": timestamp_ms})
            wanted[queue["queue_id"]] = found["offset"]
    after = admin.notifier("POST", f"/v1/groups/{quoted(group)}/offsets", body={
        "topic": topic, "offsets": {str(q): o for q, o in wanted.items()}, "reset": True})
    rows = [[topic, queue_id, before.get(queue_id), wanted[queue_id]]
            for queue_id in sorted(wanted)]
    return Report({**after, "previous_offsets": {str(q): o for q, o in sorted(before.items())}},
                  [Table(["topic", "queue", "previous_offset", "offset"], rows,
                         title=f"group {group} reset")],
                  [f"reset {len(rows)} queue(s) of {topic} for group {group}"])


def _topics_of(admin: Admin, group: str) -> list[str]:
    for row in admin.notifier("GET", "/v1/groups")["groups"]:
        if row["group"] == group:
            topics: list[str] = row["topics"]
            return topics
    raise AdminError(f"group {group} has no committed offsets (GET /v1/groups does not list "
                     f"it); name a --topic to see its lag anyway")


def _committed(admin: Admin, group: str, topic: str) -> dict[int, int]:
    document = admin.notifier("GET", f"/v1/groups/{quoted(group)}/offsets",
                              query={"topic": topic})
    return {int(queue_id): offset for queue_id, offset in document["offsets"].items()}


def _queues(admin: Admin, topic: str) -> list[dict[str, Any]]:
    queues: list[dict[str, Any]] = admin.notifier(
        "GET", f"/v1/topics/{quoted(topic)}/queues")["queues"]
    return queues
