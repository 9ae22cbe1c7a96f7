"""`mqstore admin messages`: find messages by key, by msg id, by queue offset.

    key TOPIC KEY        GET /v1/topics/{topic}/messages?key=&begin_ms=&end_ms=&max_messages=
    id MSG_ID            GET /v1/messages/{physical_offset}
    offset TOPIC Q N     GET /v1/topics/{topic}/queues/{q}/messages?offset=N&max_messages=1

A msg id is the hex of the store host (IPv4 address and port: 8 bytes; IPv6: 20) and the
8-byte commit log position of the record (RocketMQ's `MessageDecoder.createMessageId`): its
last 16 hex digits are the position the lookup reads at, as `mqadmin queryMsgById` does.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from mqstore.services.admin.client import AdminError
from mqstore.services.admin.context import Admin, quoted
from mqstore.services.admin.output import Report, Table

MSG_ID_HEX_LENGTHS = (32, 56)
"""IPv4: 8 + 8 bytes; IPv6: 20 + 8 bytes (hex: two digits a byte)."""
BODY_SHOWN_CHARACTERS_MAX = 60
"""A table cell shows this much of a body; --output json carries it whole (base64)."""
COLUMNS = ["topic", "queue", "offset", "msg_id", "stored", "tags", "keys", "body"]


def by_key(admin: Admin, topic: str, key: str, *, begin_ms: int | None, end_ms: int | None,
           max_messages: int | None) -> Report:
    query: dict[str, object] = {"key": key}
    for name, value in (("begin_ms", begin_ms), ("end_ms", end_ms),
                        ("max_messages", max_messages)):
        if value is not None:
            query[name] = value
    document = admin.notifier("GET", f"/v1/topics/{quoted(topic)}/messages", query=query)
    return _messages(document, document["messages"])


def by_id(admin: Admin, msg_id: str) -> Report:
    position = physical_offset_of(msg_id)
    document = admin.notifier("GET", f"/v1/messages/{position}")
    return _messages(document, [document])


def by_offset(admin: Admin, topic: str, queue_id: int, offset: int) -> Report:
    document = admin.notifier("GET", f"/v1/topics/{quoted(topic)}/queues/{queue_id}/messages",
                              query={"offset": offset, "max_messages": 1})
    found = [message for message in document["messages"] if message["queue_offset"] == offset]
    if not found:
        raise AdminError(f"no message at {topic}/{queue_id} offset {offset}: "
                         f"{document['status']} (the queue holds offsets "
                         f"[{document['min_offset']}, {document['max_offset']}))")
    return _messages(found[0], found)


def physical_offset_of(msg_id: str) -> int:
    text = msg_id.strip()
    if len(text) not in MSG_ID_HEX_LENGTHS or any(c not in "0123456789abcdefABCDEF"
                                                  for c in text):
        raise AdminError(f"msg id {msg_id!r}: not a msg id (32 or 56 hex digits: the store "
                         f"host and the commit log position)")
    return int(text[-16:], 16)


def _messages(document: dict[str, Any], messages: list[dict[str, Any]]) -> Report:
    rows = [[m["topic"], m["queue_id"], m["queue_offset"], m["msg_id"],
             _time(m["store_timestamp_ms"]), m["tags"], m["keys"], _body(m["body_base64"])]
            for m in messages]
    return Report(document, [Table(COLUMNS, rows)], [f"{len(rows)} message(s)"])


def _time(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _body(body_base64: str) -> str:
    body = base64.b64decode(body_base64)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, binary>"
    if not text.isprintable():
        return f"<{len(body)} bytes, binary>"
    if len(text) > BODY_SHOWN_CHARACTERS_MAX:
        return text[:BODY_SHOWN_CHARACTERS_MAX - 3] + "..."
    return text
