"""The power-loss verifier: opens the store after a power cut and checks every ack so far.

    python -c <bootstrap> VARIANT STORE_DIR ACKS_DIR CLOSE SCRUB

Prints one JSON line (`VerifierReport` fields): whether the store opened (and the error if it
did not), its recovery report, and every acknowledged message of every cycle so far that is
not (a) readable at its physical offset with its topic, queue, queue offset and body, (b) in
its consume queue at its queue offset, (c) found by its key when it has one.  Then, with
SCRUB=1, the CRC scrub (`verify_store`, what `mqstore verify` runs) of the recovered store.

CLOSE=1 closes the store cleanly afterwards; CLOSE=0 leaves it open and exits at once (the
parent cuts the power next), so the next writer recovers from an unclean state again.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

from mqstore.storage import GetStatus, MessageStore
from mqstore.storage.recovery.scrub import verify_store
from tests.powerloss.report import recovery_fields
from tests.powerloss.workload import VARIANTS_BY_NAME, Ack, body_for, read_acks

DISPATCH_TIMEOUT_MS = 60_000
"""Dispatch rebuilds the consume queues and the index from the recovered log first."""
LOST_SAMPLES_MAX = 20
"""Lost acks described in full in the report (all are counted)."""
GET_BATCH = 32


def check_position(store: MessageStore, ack: Ack) -> str | None:
    try:
        stored = store.message_at(ack.physical_offset)
    except Exception as error:  # every failure is a finding, named
        return f"message_at({ack.physical_offset}) raised {error!r}"
    expected = (ack.topic, ack.queue_id, ack.queue_offset, ack.physical_offset)
    found = (stored.topic, stored.queue_id, stored.queue_offset, stored.physical_offset)
    if found != expected:
        return f"message_at({ack.physical_offset}) is {found}, acknowledged {expected}"
    if bytes(stored.body) != body_for(ack.cycle, ack.sequence):
        return f"message_at({ack.physical_offset}) has another body"
    return None


def queue_listing(store: MessageStore, topic: str, queue_id: int) -> dict[int, int]:
    """queue offset -> physical offset of every entry get() returns, from the queue's start."""
    listing: dict[int, int] = {}
    offset = store.min_offset(topic, queue_id)
    while True:
        with store.get(topic, queue_id, offset, GET_BATCH) as pulled:
            for message in pulled.messages:
                listing[message.queue_offset] = message.physical_offset
            if pulled.status is not GetStatus.FOUND or pulled.next_offset <= offset:
                return listing
            offset = pulled.next_offset


def check_queue_entry(store: MessageStore, ack: Ack) -> str:
    """Why `ack` is not at its queue offset (called only for those the listing missed)."""
    with store.get(ack.topic, ack.queue_id, ack.queue_offset, 1) as pulled:
        found = [(m.queue_offset, m.physical_offset) for m in pulled.messages]
        return (f"get({ack.topic}, {ack.queue_id}, {ack.queue_offset}, 1): {pulled.status.name}, "
                f"messages {found}, queue [{pulled.min_offset}, {pulled.max_offset})")


def check_key(store: MessageStore, ack: Ack) -> str | None:
    assert ack.key is not None
    found = store.query_by_key(ack.topic, ack.key)
    if any(message.physical_offset == ack.physical_offset for message in found):
        return None
    return (f"query_by_key({ack.topic}, {ack.key}) found "
            f"{[message.physical_offset for message in found]}")


def lost_acks(store: MessageStore, acks: list[Ack]) -> list[tuple[Ack, str]]:
    lost: list[tuple[Ack, str]] = []
    by_queue: dict[tuple[str, int], list[Ack]] = defaultdict(list)
    for ack in acks:
        by_queue[(ack.topic, ack.queue_id)].append(ack)
        reason = check_position(store, ack)
        if reason is not None:
            lost.append((ack, reason))
    for (topic, queue_id), queued in by_queue.items():
        listing = queue_listing(store, topic, queue_id)
        lost.extend((ack, "consume queue: " + check_queue_entry(store, ack)) for ack in queued
                    if listing.get(ack.queue_offset) != ack.physical_offset)
    for ack in acks:
        if ack.key is not None:
            reason = check_key(store, ack)
            if reason is not None:
                lost.append((ack, "index: " + reason))
    return lost


def verify(store: MessageStore, store_dir: Path, acks: list[Ack], *,
           scrub: bool) -> dict[str, object]:
    started = time.monotonic()
    dispatched = store.wait_dispatched(timeout_ms=DISPATCH_TIMEOUT_MS)
    dispatched_at = time.monotonic()
    lost = lost_acks(store, acks)
    checked_at = time.monotonic()
    summaries, corruptions = verify_store(store_dir) if scrub else ([], [])
    return {
        "dispatched": dispatched,
        "acks_checked": len(acks),
        "lost_count": len({ack for ack, _ in lost}),
        "lost_samples": [{"ack": ack.line().strip(), "reason": reason}
                         for ack, reason in lost[:LOST_SAMPLES_MAX]],
        "dispatch_wait_s": round(dispatched_at - started, 3),
        "check_s": round(checked_at - dispatched_at, 3),
        "scrub_s": round(time.monotonic() - checked_at, 3),
        "scrubbed": scrub,
        "scrub_segments": len(summaries),
        "scrub_corruptions": [f"{c.physical_offset}: {c.reason}" for c in corruptions],
        "store_failure": store.failure,
        "log_range": [store.min_position, store.committed_position],
    }


def main() -> None:
    variant_name, store_dir_text, acks_dir, close_text, scrub_text = sys.argv[1:6]
    store_dir = Path(store_dir_text)
    acks = read_acks(sorted(Path(acks_dir).glob("acks-*.txt")))
    started = time.monotonic()
    try:
        store = MessageStore.open(store_dir, VARIANTS_BY_NAME[variant_name].store_config())
    except Exception as error:  # not opening is the finding
        print(json.dumps({"opened": False, "open_error": repr(error),
                          "traceback": traceback.format_exc(), "acks_checked": 0}), flush=True)
        return
    report: dict[str, object] = {"opened": True, "open_s": round(time.monotonic() - started, 3),
                                 "recovery": recovery_fields(store.recovery_report)}
    report.update(verify(store, store_dir, acks, scrub=scrub_text == "1"))
    if close_text == "1":
        store.close()
        report["closed"] = True
        print(json.dumps(report), flush=True)
        return
    print(json.dumps(report), flush=True)
    os._exit(0)  # no close: the parent cuts the power on a store still open


if __name__ == "__main__":
    main()
