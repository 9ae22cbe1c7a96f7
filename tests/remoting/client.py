"""A small asyncio RocketMQ remoting client for the tests: requests by code, pipelined.

It speaks the frame layout of services/notifier/remoting/frame.py (JSON or binary headers) and
builds what RocketMQ's Java client sends: SEND_MESSAGE_V2 headers, batch bodies, heartbeats.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
import struct
import time
from typing import Any

from mqstore.services.notifier.remoting.frame import SERIALIZE_JSON, Command, decode, encode
from mqstore.storage import StoredMessage
from mqstore.storage.format.message import decode_stored


class RemotingClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 serialize_type: int) -> None:
        self._reader = reader
        self._writer = writer
        self._serialize_type = serialize_type
        self._opaque = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Command]] = {}
        self.pushed: asyncio.Queue[Command] = asyncio.Queue()
        """Requests the server sent of its own (NOTIFY_CONSUMER_IDS_CHANGED, ...)."""
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, address: str, *, serialize_type: int = SERIALIZE_JSON,
                      ssl_context: ssl.SSLContext | None = None) -> RemotingClient:
        """A connection to `address` ("host:port"); over TLS with `ssl_context`."""
        host, _, port = address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port), ssl=ssl_context)
        return cls(reader, writer, serialize_type=serialize_type)

    async def close(self) -> None:
        self._writer.close()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _read(self) -> None:
        while True:
            length = int.from_bytes(await self._reader.readexactly(4), "big")
            answer = decode(await self._reader.readexactly(length))
            if not answer.is_response:
                self.pushed.put_nowait(answer)
                continue
            future = self._waiting.pop(answer.opaque, None)
            if future is not None:
                future.set_result(answer)

    async def request(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
                      *, oneway: bool = False, timeout_s: float = 30.0) -> Command:
        opaque = next(self._opaque)
        command = Command(code, opaque, 0x2 if oneway else 0, dict(ext or {}), body,
                          serialize_type=self._serialize_type)
        future: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        if not oneway:
            self._waiting[opaque] = future
        self._writer.writelines(encode(command))
        if oneway:
            await self._writer.drain()
            return command
        return await asyncio.wait_for(future, timeout_s)

    def raw(self, frame: bytes) -> None:
        self._writer.write(frame)


def properties(**values: str) -> str:
    return "".join(f"{name}\x01{value}\x02" for name, value in values.items())


def send_header(topic: str, queue_id: int, *, props: str = "", sysflag: int = 0,
                batch: bool = False) -> dict[str, str]:
    """SEND_MESSAGE_V2's one-letter header, as the Java client fills it."""
    return {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id),
            "f": str(sysflag), "g": str(int(time.time() * 1000)), "h": "0", "i": props,
            "j": "0", "k": "false", "m": "true" if batch else "false"}


def pull_header(topic: str, queue_id: int, offset: int, *, suspend_ms: int,
                subscription: str = "*") -> dict[str, str]:
    """PULL_MESSAGE's header for group `cg` (suspended `suspend_ms` when there is nothing)."""
    return {"consumerGroup": "cg", "topic": topic, "queueId": str(queue_id),
            "queueOffset": str(offset), "maxMsgNums": "32",
            "sysFlag": str(0x2 | 0x4 if suspend_ms else 0x4), "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms), "subscription": subscription,
            "subVersion": "0", "expressionType": "TAG"}


def batch_body(entries: list[tuple[bytes, str]]) -> bytes:
    """RocketMQ's batch encoding (MessageDecoder.encodeMessages)."""
    parts = []
    for body, props in entries:
        encoded = props.encode("utf-8")
        size = 20 + len(body) + 2 + len(encoded)
        parts.append(struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body
                     + struct.pack(">h", len(encoded)) + encoded)
    return b"".join(parts)


def records(body: bytes) -> list[StoredMessage]:
    """A pull body: whole commit log records back to back."""
    found = []
    position = 0
    while position < len(body):
        message = decode_stored(body, position)
        found.append(message)
        position += message.total_size
    return found


def heartbeat(client_id: str, group: str, topic: str, expression: str = "*", *,
              expression_type: str = "TAG", sub_version: int = 1) -> bytes:
    tags = [] if expression == "*" or expression_type != "TAG" else [
        tag.strip() for tag in expression.split("||")]
    document: dict[str, Any] = {
        "clientID": client_id, "producerDataSet": [],
        "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY",
                             "messageModel": "CLUSTERING",
                             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                             "subscriptionDataSet": [{"topic": topic, "subString": expression,
                                                      "expressionType": expression_type,
                                                      "subVersion": sub_version,
                                                      "tagsSet": tags, "codeSet": []}],
                             "unitMode": False}]}
    return json.dumps(document).encode("utf-8")
