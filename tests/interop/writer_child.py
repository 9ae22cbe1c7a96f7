"""An mqstore writer for the whole-store tests to kill -9 while it prepares a segment.

    writer_child.py DIRECTORY LAYOUT_JSON COUNT GAP_AFTER GAP_SECONDS

Puts the first COUNT messages of `outgoing_corpus`, pausing GAP_SECONDS after the first
GAP_AFTER of them (so that the checkpoint's times, less RocketMQ's 3 s margin, fall after the
first segments: a recovery that trusts the checkpoint need not start at the first one).  Then
it holds the preparation of the segment after next (the allocator's thread waits in
`creating/` before the rename) and keeps putting until the log rolls into the next segment,
which asks for that one.  Once dispatch caught up and the checkpoint covers the last put, it
prints {"ready": ...} and sleeps: the test kills it there.

Every acknowledged put is printed as {"put": view} (the view `corpus.expected_record` makes)
before the next one starts: the page cache keeps all of them through a kill -9.

The checkpoint's queue time is persisted by the queues' thorough sync; its interval is
lowered to 500 ms here (the default, 60 s, like RocketMQ's, would leave it at 0 in a run
this short, and any recovery after a crash would then have to start at the first segment),
and the log is flushed every interval whatever is dirty (`flush_pages_min=0`), so that the
checkpoint's log time reaches the last put without waiting for the 10 s thorough flush.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mqstore import storage as mq
from mqstore.storage.files import mapped_file
from tests.interop.corpus import View, outgoing_corpus, put_one, store_config
from tests.interop.rocketmq_jvm import Layout
from tests.interop.store_files import read_checkpoint

EXTRA_MESSAGES = 2000
"""Corpus kept beyond COUNT for the puts that roll into the next segment."""
WAIT_S = 20.0


class SegmentHold:
    """Wraps the hook that renames a prepared file from `creating/` into place: a commit log
    segment at or after `from_position` is never renamed (the thread waits forever)."""

    def __init__(self) -> None:
        self.from_position: int | None = None
        self.held = threading.Event()
        self.held_path: str | None = None
        original = getattr(mapped_file, "publish_prepared", None)
        assert original is not None, "mapped_file.publish_prepared is gone: update SegmentHold"
        self._original = original
        mapped_file.publish_prepared = self._publish  # type: ignore[assignment]

    def _publish(self, *, creating: Path, path: Path) -> None:
        if (self.from_position is not None and creating.name.startswith("commitlog.")
                and int(path.name) >= self.from_position):
            self.held_path = str(creating)
            self.held.set()
            threading.Event().wait()
        self._original(creating=creating, path=path)


def emit(kind: str, value: Any) -> None:
    print(json.dumps({kind: value}), flush=True)


def wait_for(what: str, done: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"writer_child: {what} not within {WAIT_S} s")
        time.sleep(0.01)


def main(directory: Path, layout: Layout, count: int, gap_after: int, gap_s: float) -> None:
    hold = SegmentHold()
    corpus = outgoing_corpus(count + EXTRA_MESSAGES)
    config = store_config(layout, queue_flush_thorough_interval_ms=500, flush_pages_min=0)
    store = mq.MessageStore.open(directory, config)
    offsets: Counter[tuple[str, int]] = Counter()
    last: View | None = None
    for index, sent in enumerate(corpus[:count]):
        if index == gap_after:
            time.sleep(gap_s)
        last = put_one(store, sent, offsets)
        emit("put", last)
    segment = layout.segment_bytes
    next_segment = (store.written_position // segment + 1) * segment
    hold.from_position = next_segment + segment
    for sent in corpus[count:]:
        if store.written_position > next_segment:
            break
        last = put_one(store, sent, offsets)
        emit("put", last)
    assert last is not None
    if not hold.held.wait(WAIT_S):
        raise SystemExit(f"writer_child: the segment at {hold.from_position} was never prepared")
    assert store.wait_dispatched(timeout_ms=int(WAIT_S * 1000)), "dispatch did not catch up"
    stored_ms = last["store_timestamp_ms"]
    wait_for("a checkpoint covering the last put", lambda: min(
        (values := read_checkpoint(directory))["physic_msg_timestamp"],
        values["logics_msg_timestamp"]) >= stored_ms)
    emit("ready", {"held": hold.held_path, "written_position": store.written_position})
    threading.Event().wait()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    main(Path(arguments[0]), Layout(**json.loads(arguments[1])), int(arguments[2]),
         int(arguments[3]), float(arguments[4]))
