"""`mqstore inspect DIR`: what a store directory holds, read-only, as text or JSON.

Segments (records, data end, blank tail, store times, problems), the log's positions, the
checkpoint, the consume queues' offsets, the index, the abort marker and the lock's holder.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from pathlib import Path

from mqstore.storage.files.checkpoint import read_checkpoint
from mqstore.storage.recovery.scrub import scan_consume_queues, scan_index, scan_store


def inspect_report(directory: Path) -> dict[str, object]:
    """The report of the store in `directory` (a checked store directory)."""
    summaries = list(scan_store(directory, verify_crc=False))
    values, state = read_checkpoint(directory / "checkpoint")
    lock = directory / "lock"
    return {
        "directory": str(directory),
        "segment_size_bytes": summaries[0].size_bytes if summaries else None,
        "segments": [{"name": s.name, "records": s.record_count,
                      "written_position": s.written_position,
                      "ends_with_blank": s.ends_with_blank,
                      "first_store_time": _time(s.first_store_timestamp_ms),
                      "last_store_time": _time(s.last_store_timestamp_ms),
                      "problems": [f"{c.physical_offset}: {c.reason}" for c in s.corruptions]}
                     for s in summaries],
        "min_position": summaries[0].start_position if summaries else 0,
        "written_position": max((s.written_position for s in summaries if s.record_count),
                            default=0),
        "record_count": sum(s.record_count for s in summaries),
        "checkpoint": {"state": state.value, **dataclasses.asdict(values)},
        "consume_queues": [dataclasses.asdict(q) for q in scan_consume_queues(directory)],
        "index": dataclasses.asdict(scan_index(directory)),
        "abort_marker": (directory / "abort").exists(),
        "lock": lock.read_text().strip() if lock.exists() else None,
    }


def _time(timestamp_ms: int) -> str | None:
    if not timestamp_ms:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


def print_report(report: Mapping[str, object]) -> None:
    print(f"store {report['directory']}  segment size {report['segment_size_bytes']} bytes")
    print(f"log [{report['min_position']}, {report['written_position']})  "
          f"records {report['record_count']}  abort marker "
          f"{'PRESENT (unclean shutdown)' if report['abort_marker'] else 'absent'}")
    print(f"checkpoint {report['checkpoint']}")
    print(f"{'segment':<22}{'records':>9}{'data end':>14}  blank  last store time")
    segments = report["segments"]
    assert isinstance(segments, list)
    for segment in segments:
        print(f"{segment['name']:<22}{segment['records']:>9}{segment['written_position']:>14}"
              f"  {'yes' if segment['ends_with_blank'] else 'no ':<5}  "
              f"{segment['last_store_time'] or '-'}")
        for problem in segment["problems"]:
            print(f"    problem at {problem}")
    queues = report["consume_queues"]
    assert isinstance(queues, list)
    print(f"consume queues: {len(queues)}")
    for queue in queues:
        print(f"  {queue['topic']}/{queue['queue_id']}: offsets [{queue['min_offset']}, "
              f"{queue['max_offset']}) in {queue['file_count']} file(s)")
    print(f"index: {report['index']}")
