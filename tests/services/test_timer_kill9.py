"""kill -9 of a writer delivering timer messages, mid-slot and between checkpoints: after
the restart every message is delivered exactly once (services/writer/timer_recovery.py)."""

from __future__ import annotations

from pathlib import Path

from tests.services.killed_delivery import kill_mid_delivery

COUNT = 300
CHILD = "tests.services.timer_child"
KILL_AFTER = COUNT // 2 + 10
"""Ten copies into the third of four slots of 75: the kill lands mid-slot."""


def test_a_writer_killed_mid_delivery_delivers_each_timer_message_once(tmp_path: Path) -> None:
    run = kill_mid_delivery(CHILD, tmp_path, count=COUNT, kill_after=KILL_AFTER)
    run.assert_each_delivered_once(COUNT, recognised_key="skipped")
