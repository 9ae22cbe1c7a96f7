"""How late delayed and timer messages arrive: mqstore beside Apache RocketMQ 5.5.0, same run.

    .venv/bin/python bench/delivery_lateness.py [--messages 200 --spread-s 5]

For each broker (RocketMQ 5.5.0's name server and broker,
tests/remoting_clients/rocketmq_peer.py; `mqstore up`), two cases of `--messages` sends
spread evenly over `--spread-s` seconds, each to queue 0 of a fresh topic, sent with the
project's remoting client (tests/remoting/client.py) so no client JVM shares the cores:

  delay-level-2   `DELAY=2` (2 s: both run the tests' table, level n waiting n seconds,
                  tests/remoting_clients/delay_levels.py)
  timer-3s        `TIMER_DELIVER_MS` = the send's time + 3 s (RocketMQ 5's timer wheel)

A reader long-polls the topic from offset 0 all the while.  Lateness = when the reader first
got the message - when it was due (send time + the delay); p50, p99 and max in ms (a timer
message may come up to the brokers' 1 s precision early: negative lateness).  Results go to
stdout as JSON (and bench/results/delivery-lateness-<time>.json).  Wall-clock figures move
with the machine's load: quote them with the load average printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mqstore.services.notifier.remoting import codes
from tests.remoting.client import (
    RemotingClient,
    properties,
    pull_header,
    records,
    send_header,
)
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.delay_levels import (
    MQSTORE_ENV,
    TEST_DELAY_LEVELS,
    delay_ms,
)
from tests.remoting_clients.rocketmq_peer import RocketMqPeer

RESULTS = Path(__file__).resolve().parent / "results"
CASES = {"delay-level-2": delay_ms(2), "timer-3s": 3000}
"""Case -> the delay each message asks for, ms."""
WARM_UP = b"warm-up"
"""The first message of a topic, not delayed: it creates the topic."""
TAIL_S = 4.0
"""How long the reader goes on after the last message was due, for one not yet seen."""


def _properties(case: str, index: int, sent_ms: int) -> str:
    if case == "delay-level-2":
        return properties(DELAY="2", KEYS=f"k{index}")
    return properties(TIMER_DELIVER_MS=str(sent_ms + CASES[case]), KEYS=f"k{index}")


async def _case(address: str, case: str, count: int, spread_s: float) -> dict[str, Any]:
    topic = f"late-{case}-{os.getpid()}-{int(time.time())}"
    sender = await RemotingClient.connect(address)
    reader = await RemotingClient.connect(address)
    first = await sender.request(codes.SEND_MESSAGE_V2, send_header(topic, 0), WARM_UP)
    assert first.code == codes.SUCCESS, first.remark  # creates the topic
    due_ms: dict[bytes, int] = {}
    seen_ms: dict[bytes, int] = {}

    async def send_all() -> None:
        for index in range(count):
            sent = int(time.time() * 1000)
            body = b"m%d" % index
            due_ms[body] = sent + CASES[case]
            answer = await sender.request(codes.SEND_MESSAGE_V2, send_header(
                topic, 0, props=_properties(case, index, sent)), body)
            assert answer.code == codes.SUCCESS, answer.remark
            await asyncio.sleep(spread_s / count)

    async def read_all() -> None:
        offset = 0
        while len(seen_ms) < count and (len(due_ms) < count or time.time() * 1000 < max(
                due_ms.values()) + TAIL_S * 1000):
            answer = await reader.request(codes.PULL_MESSAGE, pull_header(
                topic, 0, offset, suspend_ms=1000))
            if answer.code == codes.SUCCESS:
                now = int(time.time() * 1000)
                for message in records(answer.body):
                    if bytes(message.body) != WARM_UP:
                        seen_ms.setdefault(bytes(message.body), now)
                offset = int(answer.ext_fields["nextBeginOffset"])

    await asyncio.gather(send_all(), read_all())
    await sender.close()
    await reader.close()
    late = sorted(seen_ms[body] - due for body, due in due_ms.items() if body in seen_ms)
    return {"case": case, "sent": count, "received": len(late),
            "lateness_ms": {"p50": statistics.median(late) if late else None,
                            "p99": late[int(len(late) * 0.99) - 1] if late else None,
                            "max": late[-1] if late else None, "min": late[0] if late else None}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--spread-s", type=float, default=5.0)
    options = parser.parse_args()
    rows = []
    load_before = os.getloadavg()[0]
    with RocketMqPeer.start() as peer:
        for case in CASES:
            rows.append({"broker": "rocketmq-5.5.0", **asyncio.run(
                _case(peer.broker, case, options.messages, options.spread_s))})
    with tempfile.TemporaryDirectory() as directory, mqstore_up(
            Path(directory), settings={MQSTORE_ENV: TEST_DELAY_LEVELS}) as ports:
        for case in CASES:
            rows.append({"broker": "mqstore", **asyncio.run(_case(
                f"127.0.0.1:{ports['remoting']}", case, options.messages, options.spread_s))})
    result = {"load_average_before": load_before, "load_average_after": os.getloadavg()[0],
              "rows": rows}
    print(json.dumps(result, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"delivery-lateness-{time.strftime('%Y%m%dT%H%M%S')}.json").write_text(
        json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
