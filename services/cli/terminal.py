"""`mqstore produce --url` and `mqstore consume`: the services from a terminal.

Both go through `mqstore.client`, so they retry what the client retries (503, a dropped
connection) and stop on what it raises.  Long runs show a progress bar on stderr (counts and
rate) when stderr is a terminal and `--quiet` is not given; the summary line goes to stdout.
`consume --print` writes one JSON line per message to stdout (bodies as UTF-8 when they are
text, else base64) for piping into other tools.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable
from typing import Never

from tqdm import tqdm

from mqstore.client import Consumer, OutgoingMessage, Producer, ReceivedMessage

PROGRESS_FROM_COUNT = 1000
"""Runs shorter than this print no progress bar (the summary line is enough)."""


def produce_over_http(url: str, *, topic: str, count: int, body_bytes: int, batch: int,
                      say: Callable[[str], None], quiet: bool = False) -> int:
    body = bytes(range(256)) * (body_bytes // 256) + bytes(body_bytes % 256)
    started = time.perf_counter()
    sent = not_durable = 0
    with Producer(url) as producer, _progress(count, "produce", quiet=quiet) as progress:
        while sent < count:
            size = min(batch, count - sent)
            messages = [OutgoingMessage(topic, body, keys=(f"key-{sent + i}",))
                        for i in range(size)]
            results = producer.send_batch(messages)
            not_durable += sum(1 for result in results if result.status != "PUT_OK")
            sent += size
            progress.update(size)
    elapsed = time.perf_counter() - started
    say(f"sent {sent} messages of {body_bytes} B to {url} in {elapsed:.2f} s: "
        f"{sent / elapsed:,.0f} msg/s" + (f"; {not_durable} written but not confirmed "
                                          f"durable (FLUSH_DISK_TIMEOUT)" if not_durable else ""))
    return 0


def consume_over_http(url: str, *, group: str, topic: str, count: int | None, wait_ms: int,
                      print_messages: bool, say: Callable[[str], None],
                      quiet: bool = False) -> int:
    """Poll and commit until `count` messages arrived (None: until a poll of `wait_ms`
    comes back empty)."""
    received = 0
    started = time.perf_counter()
    with Consumer(url, group, topic) as consumer, _progress(count, "consume",
                                                                       quiet=quiet) as progress:
        while count is None or received < count:
            wanted = 64 if count is None else min(64, count - received)
            messages = consumer.poll(max_messages=wanted, wait_ms=wait_ms)
            if not messages and count is None:
                break
            for message in messages:
                if print_messages:
                    sys.stdout.write(_json_line(message))
            consumer.commit()
            received += len(messages)
            progress.update(len(messages))
    elapsed = time.perf_counter() - started
    say(f"received and committed {received} messages of {topic} for group {group} in "
        f"{elapsed:.2f} s")
    return 0


def _json_line(message: ReceivedMessage) -> str:
    try:
        body: dict[str, str] = {"body": message.body.decode()}
    except UnicodeDecodeError:
        body = {"body_base64": base64.b64encode(message.body).decode()}
    return json.dumps({"queue_id": message.queue_id, "queue_offset": message.queue_offset,
                       "msg_id": message.msg_id, "tags": message.tags,
                       "keys": list(message.keys), **body}) + "\n"


def _progress(total: int | None, unit: str, *, quiet: bool) -> tqdm[Never]:
    """None (tqdm's "only on a terminal") unless quiet or too short to need a bar."""
    disable = True if quiet or (total is not None and total < PROGRESS_FROM_COUNT) else None
    return tqdm(total=total, unit=" msg", desc=unit, file=sys.stderr, disable=disable,
                unit_scale=True, leave=False)
