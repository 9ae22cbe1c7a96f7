"""A held remoting pull goes through the notifier's one long-poll loop (issue 22, Found 2): the
loop was written twice, and the remoting copy skipped the wake-up metrics, so a deployment
serving RocketMQ's clients showed no wake-ups at all."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

from mqstore.services.notifier.remoting import codes
from tests.remoting.client import RemotingClient, records, send_header
from tests.remoting.test_end_to_end import _held_pulls, pull_header
from tests.remoting.up_process import mqstore_up

SEND_ATTEMPTS = 3
"""RocketMQ's producer sends up to 3 times (retryTimesWhenSendFailed 2).  A fresh `mqstore up`
answers its first put after about 3 s (over HTTP too, and before this test's issue as well:
measured 3.0 and 3.3 s), past the front's writer_timeout_ms (3 s), so the first send here
often answers SYSTEM_ERROR and the client's retry stores it."""
WAKEUPS = re.compile(r'^mqstore_pull_wakeups_total\{cause="notice"\} ([0-9.e+]+)$', re.M)


def _notice_wakeups(notifier_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{notifier_port}/metrics", timeout=30) as page:
        found = WAKEUPS.search(page.read().decode())
    assert found is not None
    return float(found.group(1))


def test_a_remoting_pull_woken_by_a_notice_is_counted(tmp_path: Path) -> None:
    with mqstore_up(tmp_path) as ports:
        assert _notice_wakeups(ports["notifier"]) == 0
        asyncio.run(_held_then_woken(f"127.0.0.1:{ports['remoting']}"))
        assert _notice_wakeups(ports["notifier"]) >= 1


async def _held_then_woken(address: str) -> None:
    client = await RemotingClient.connect(address)
    try:
        created = await client.request(codes.UPDATE_AND_CREATE_TOPIC, {
            "topic": "Woken", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"})
        assert created.code == codes.SUCCESS, created.remark
        held = asyncio.create_task(client.request(
            codes.PULL_MESSAGE, pull_header("Woken", 0, 0, suspend_ms=20_000)))
        while await _held_pulls(client) == 0:  # until the server holds it
            assert not held.done()
        for _ in range(SEND_ATTEMPTS):  # SYSTEM_ERROR is in the producer's retry set
            sent = await client.request(codes.SEND_MESSAGE_V2, send_header("Woken", 0),
                                        b"wake")
            if sent.code != codes.SYSTEM_ERROR:
                break
        assert sent.code == codes.SUCCESS, sent.remark
        woken = await held
        assert [bytes(m.body) for m in records(woken.body)] == [b"wake"]
    finally:
        await client.close()
