"""`mqstore admin retries`, `delays` and `transactions`: failed, delayed and half messages
waiting.

    retries [--group G]   GET /v1/retries[?group=G]
    delays                GET /v1/delays
    transactions          GET /v1/transactions

A consumer group's failed messages wait in `%RETRY%<group>` for their next delivery, and
those past their max reconsume times sit in `%DLQ%<group>` for good (docs/remoting.md);
messages sent with a delay level, and send-backs before their retry, wait in
`SCHEDULE_TOPIC_XXXX`, one queue per level.  A topic's messages are max_offset -
min_offset (what retention left); a level's waiting messages are its queue's max offset
minus the schedule's next offset (`config/delayOffset.json`, as the writer last wrote it).
A transaction's half message waits in `RMQ_SYS_TRANS_HALF_TOPIC` until an op message in
`RMQ_SYS_TRANS_OP_HALF_TOPIC` ends it; the check service's progress bounds them live
(`pending`), its last pass counts them (`waiting`, services/notifier/transaction_status.py).
"""

from __future__ import annotations

import datetime
from typing import Any

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.context import Admin
from mqstore.services.admin.output import Report, Table


def retries(admin: Admin, *, group: str | None) -> Report:
    query = None if group is None else {"group": group}
    document = admin.notifier("GET", "/v1/retries", query=query)
    groups = document["groups"]
    if group is not None and not groups:
        raise AdminError(f"group {group} has no retry or dead letter topic (GET /v1/retries "
                         f"lists none for it)")
    rows = [[entry["group"], *_topic_cells(entry["retry"]), *_topic_cells(entry["dead_letter"])]
            for entry in groups]
    dead = sum(entry["dead_letter"]["messages"] for entry in groups if entry["dead_letter"])
    return Report(document, [Table(["group", "retry_topic", "retry_messages", "dlq_topic",
                                    "dlq_messages"], rows)],
                  [f"{len(groups)} group(s), {dead} dead-lettered message(s)"])


def delays(admin: Admin) -> Report:
    document = admin.notifier("GET", "/v1/delays")
    rows = [[level["level"], _delay(level["delay_ms"]), level["max_offset"],
             level["next_offset"], level["waiting"]] for level in document["levels"]]
    return Report(document, [Table(["level", "delay", "max_offset", "next_offset", "waiting"],
                                   rows, title=f"topic {document['topic']}")],
                  [f"{document['waiting']} message(s) waiting"])


def transactions(admin: Admin) -> Report:
    document = admin.notifier("GET", "/v1/transactions")
    topics = [[kind, *_topic_cells(document[f"{kind}_topic"])]
              for kind in ("half", "op", "discarded")]
    check, found = document["check"], document["last_pass"]
    progress = [check["group"], check["half_offset"], check["op_offset"], check["pending"]]
    if found is None:
        summary = (f"{check['pending']} half message(s) past the check's progress; no check "
                   f"pass seen (no remoting front, or none ended yet)")
        progress += [None, None]
    else:
        summary = (f"{found['waiting']} half message(s) waiting at the last check pass"
                   + ("" if found["ops_complete"] else " (at most: not every op was read)"))
        progress += [found["waiting"], _time(found["finished_ms"])]
    return Report(document, [
        Table(["kind", "topic", "messages"], topics),
        Table(["group", "half_offset", "op_offset", "pending", "waiting", "last_pass"],
              [progress], title="check progress")], [summary])


def _time(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _topic_cells(topic: dict[str, Any] | None) -> list[Any]:
    return [None, None] if topic is None else [topic["topic"], topic["messages"]]


def _delay(delay_ms: int | None) -> str:
    """`delay_ms` in the table's own unit (`1s`, `2m`, `1h`, as message_delay_levels)."""
    if delay_ms is None:
        return "past the table"
    for unit, size_ms in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if delay_ms % size_ms == 0:
            return f"{delay_ms // size_ms}{unit}"
    return f"{delay_ms}ms"
