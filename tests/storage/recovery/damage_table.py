"""The damage matrix as a table: what recovery, reads and `verify` did in every case.

    .venv/bin/python -m tests.storage.recovery.damage_table [--kind KIND] > table.md

Runs each case of test_damage_matrix.py the same way (a child writes the corpus under sync
flush and closes or crashes, the damage is made, the store reopens with the default policy)
and prints one Markdown row per case: the recovery mode, the bytes recovery cut, the damaged
ranges recovery reported, the places `verify` named, and of the acknowledged messages how
many read back whole, how many answered MESSAGE_CORRUPT (the damage touched them) and how
many were lost (neither: must be 0).  The test asserts the outcomes; this shows them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from mqstore.storage import GetStatus
from mqstore.storage.recovery.scrub import verify_store
from tests.storage.recovery.damage_corpus import MESSAGES, body_for
from tests.storage.recovery.test_damage_matrix import KINDS, Reader, _write_corpus

HEADER = ("| damage | ending | deployment | recovery | cut bytes | recovery reported | "
          "verify named | read back | MESSAGE_CORRUPT | lost |\n"
          "|---|---|---|---|---:|---:|---:|---:|---:|---:|")


def run_case(scratch: Path, kind: str, ending: str, mode: str) -> str:
    directory = scratch / f"{kind}-{ending}-{mode}" / "store"
    acked = _write_corpus(directory, mode, ending)
    assert len(acked) == MESSAGES
    make_damage, segment, _ = KINDS[kind]
    make_damage(directory, acked, segment)
    _, corruptions = verify_store(directory)
    reader = Reader(directory, mode)
    try:
        report = reader.store.recovery_report
        whole = corrupt = lost = 0
        for message in acked:
            topic, queue_id = message.key
            with reader.get(topic, queue_id, message.queue_offset) as pulled:
                if pulled.status is GetStatus.MESSAGE_CORRUPT:
                    corrupt += 1
                elif (pulled.status is GetStatus.FOUND
                      and bytes(pulled.messages[0].body) == body_for(message.number)):
                    whole += 1
                else:
                    lost += 1
    finally:
        reader.close()
    return (f"| {kind} | {ending} | {mode} | {report.mode.value} | {report.truncated_bytes} | "
            f"{len(report.damage)} | {len(corruptions)} | {whole} | {corrupt} | {lost} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=list(KINDS), action="append")
    arguments = parser.parse_args()
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="mqstore-damage-") as scratch:
        for kind in arguments.kind or list(KINDS):
            for ending in ("clean", "crash"):
                for mode in ("embedded", "split"):
                    print(run_case(Path(scratch), kind, ending, mode), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
