"""kill -9 of a writer delivering delay-level messages, between two saves of its progress:
after the restart every message is delivered exactly once (services/writer/delay_copies.py
recognises the copies delivered after the last save)."""

from __future__ import annotations

from pathlib import Path

from tests.services.killed_delivery import kill_mid_delivery

COUNT = 200
CHILD = "tests.services.delay_child"
KILL_AFTER = COUNT // 2 + 7
"""Past half, and not on a save: one delivery per pass, a save every 150 ms."""


def test_a_writer_killed_mid_delivery_delivers_each_delayed_message_once(
        tmp_path: Path) -> None:
    run = kill_mid_delivery(CHILD, tmp_path, count=COUNT, kill_after=KILL_AFTER)
    run.assert_each_delivered_once(COUNT, recognised_key="recognised")
