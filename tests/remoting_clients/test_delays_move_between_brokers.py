"""A store moves between Apache RocketMQ 5.5.0 and mqstore with its pending delays.

RocketMQ's broker takes two delayed sends (levels 1 and 8 of the test table: 1 s and 8 s),
delivers the first, and is stopped before the second is due; `mqstore up` then opens the
same store directory.  It must deliver the second once, not before it is due, and not the
first again: the schedule's consume queue (its entries' due times), its progress in
`config/delayOffset.json` and the records are RocketMQ's, read as they are.  And the other
way: mqstore takes the sends and stops; RocketMQ's broker opens its directory and delivers.
Sends and pulls use the project's own remoting client (tests/remoting/client.py), so no JVM
client is needed beside the broker.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from mqstore.services.notifier.remoting import codes
from mqstore.storage.files.delay_offsets_file import DelayOffsetsFile
from tests.remoting.client import (
    RemotingClient,
    properties,
    pull_header,
    records,
    send_header,
)
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.delay_levels import MQSTORE_ENV, TEST_DELAY_LEVELS, delay_ms
from tests.remoting_clients.rocketmq_peer import RocketMqPeer

pytestmark = pytest.mark.remoting_clients

TOPIC = "Later"
SEGMENT_BYTES = 64 << 20
"""Commit log segments of both brokers (`mqstore_up`'s, and RocketMQ's
`mappedFileSizeCommitLog`): each refuses a log of segments of another size."""
ROCKETMQ_SETTINGS = {"mappedFileSizeCommitLog": SEGMENT_BYTES}
MQSTORE_SETTINGS = {MQSTORE_ENV: TEST_DELAY_LEVELS,
                    "MQSTORE_STORE__SEGMENT_SIZE_BYTES": str(SEGMENT_BYTES)}
SOON, LATE = 1, 8
"""Delay levels: SOON is delivered before the move, LATE after it."""


async def _send_both(address: str) -> float:
    """Send the two delayed messages to `address`; the wall time of the sends (s)."""
    client = await RemotingClient.connect(address)
    try:
        for level in (SOON, LATE):
            answer = await client.request(codes.SEND_MESSAGE_V2, send_header(
                TOPIC, 0, props=properties(DELAY=str(level), KEYS=f"level-{level}")),
                f"level {level}".encode())
            assert answer.code == codes.SUCCESS, answer.remark
        return time.time()
    finally:
        await client.close()


async def _delivered(address: str, *, wanted: int, timeout_s: float) -> list[tuple[bytes, float]]:
    """Bodies of the topic's queue 0 and when each was first seen, until `wanted` are there
    and 2 s more have passed (a duplicate would show), or the timeout."""
    client = await RemotingClient.connect(address)
    seen: list[tuple[bytes, float]] = []
    offset, deadline, settled_at = 0, time.monotonic() + timeout_s, None
    try:
        while time.monotonic() < deadline:
            answer = await client.request(codes.PULL_MESSAGE, pull_header(
                TOPIC, 0, offset, suspend_ms=500))
            if answer.code == codes.SUCCESS:
                seen += [(bytes(m.body), time.time()) for m in records(answer.body)]
                offset = int(answer.ext_fields["nextBeginOffset"])
            elif answer.code not in (codes.PULL_NOT_FOUND, codes.PULL_OFFSET_MOVED,
                                     codes.PULL_RETRY_IMMEDIATELY, codes.TOPIC_NOT_EXIST):
                raise AssertionError(f"pull answered {answer.code}: {answer.remark}")
            else:
                await asyncio.sleep(0.2)
            if len(seen) >= wanted and settled_at is None:
                settled_at = time.monotonic()
            if settled_at is not None and time.monotonic() - settled_at > 2:
                break
        return seen
    finally:
        await client.close()


def test_rocketmq_pending_delays_are_delivered_by_mqstore(tmp_path: Path) -> None:
    (tmp_path / "rocketmq").mkdir()
    with RocketMqPeer.start(work_dir=tmp_path / "rocketmq",
                            broker_settings=ROCKETMQ_SETTINGS) as peer:
        sent_at = asyncio.run(_send_both(peer.broker))
        time.sleep(delay_ms(SOON) / 1000 + 1.5)  # SOON delivered by RocketMQ
    store = tmp_path / "rocketmq" / "store"
    assert DelayOffsetsFile(store).read().get(SOON) == 1, "RocketMQ persisted its progress"
    moved = tmp_path / "mqstore"
    moved.mkdir()
    shutil.move(store, moved / "data")
    with mqstore_up(moved, settings=MQSTORE_SETTINGS) as ports:
        seen = asyncio.run(_delivered(f"127.0.0.1:{ports['remoting']}", wanted=2,
                                      timeout_s=delay_ms(LATE) / 1000 + 20))
    assert [body for body, _ in seen] == [b"level 1", b"level 8"], seen
    assert seen[1][1] >= sent_at + delay_ms(LATE) / 1000 - 1.0, "delivered before due"
    assert DelayOffsetsFile(moved / "data").read().get(LATE) == 1


def test_mqstore_pending_delays_are_delivered_by_rocketmq(tmp_path: Path) -> None:
    moved = tmp_path / "mqstore"
    moved.mkdir()
    with mqstore_up(moved, settings=MQSTORE_SETTINGS) as ports:
        sent_at = asyncio.run(_send_both(f"127.0.0.1:{ports['remoting']}"))
        time.sleep(delay_ms(SOON) / 1000 + 1.5)  # SOON delivered by mqstore
    assert DelayOffsetsFile(moved / "data").read().get(SOON) == 1, "mqstore persisted it"
    (tmp_path / "rocketmq").mkdir()
    shutil.move(moved / "data", tmp_path / "rocketmq" / "store")
    with RocketMqPeer.start(work_dir=tmp_path / "rocketmq",
                            broker_settings=ROCKETMQ_SETTINGS) as peer:
        seen = asyncio.run(_delivered(peer.broker, wanted=2,
                                      timeout_s=delay_ms(LATE) / 1000 + 20))
    assert [body for body, _ in seen] == [b"level 1", b"level 8"], seen
    assert seen[1][1] >= sent_at + delay_ms(LATE) / 1000 - 1.0, "delivered before due"
