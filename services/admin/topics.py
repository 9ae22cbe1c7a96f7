"""`mqstore admin topics`: list, describe, create, delete (the notifier's topic routes).

    list                     GET    /v1/topics
    describe TOPIC           GET    /v1/topics/{topic}/queues   (+ GET /v1/topics)
    create TOPIC [--queues]  PUT    /v1/topics/{topic}?queue_count=N
    delete TOPIC             DELETE /v1/topics/{topic}

A queue's size is its message count, max_offset - min_offset: the offsets retention left
(RocketMQ's `topicStatus` shows the same pair per queue).
"""

from __future__ import annotations

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.context import Admin, quoted
from mqstore.services.admin.output import Report, Table


def list_topics(admin: Admin) -> Report:
    document = admin.notifier("GET", "/v1/topics")
    return Report(document, [Table(["topic"], [[name] for name in document["topics"]])])


def describe_topic(admin: Admin, topic: str) -> Report:
    document = admin.notifier("GET", f"/v1/topics/{quoted(topic)}/queues")
    queues = document["queues"]
    if not queues and topic not in admin.notifier("GET", "/v1/topics")["topics"]:
        raise AdminError(f"topic {topic} does not exist (GET /v1/topics does not list it)")
    rows = [[queue["queue_id"], queue["min_offset"], queue["max_offset"],
             queue["max_offset"] - queue["min_offset"]] for queue in queues]
    total = sum(row[3] for row in rows)
    document = {**document, "message_count": total}
    return Report(document, [Table(["queue", "min_offset", "max_offset", "messages"], rows,
                                   title=f"topic {topic}")],
                  [f"{len(rows)} queue(s), {total} message(s)"])


def create_topic(admin: Admin, topic: str, *, queue_count: int | None) -> Report:
    query = None if queue_count is None else {"queue_count": queue_count}
    document = admin.notifier("PUT", f"/v1/topics/{quoted(topic)}", query=query)
    return Report(document, lines=[f"created topic {document['topic']} with "
                                   f"{document['queue_count']} queue(s)"])


def delete_topic(admin: Admin, topic: str) -> Report:
    document = admin.notifier("DELETE", f"/v1/topics/{quoted(topic)}")
    return Report(document, lines=[f"deleted topic {document['topic']} (its data stays "
                                   f"until retention takes it)"])
