"""What checking each body's CRC costs the read path, measured beside not checking it.

    .venv/bin/python bench/read_crc.py [--messages 200000] [--runs 5] [--dir DIR]

`read_verify_crc` (storage/config.py) makes `get`, `message_at` and `iter_messages` check
every record's body CRC, so a flipped byte answers MESSAGE_CORRUPT instead of being served.
This measures its price on one store: N messages of 1 KiB (the size of the engine's other
read figures, bench/consume.py) over 72 queues, dispatched; then, timed, a consumer reads
them all with `get(topic, queue, offset, 32)` round-robin over the queues, once with the
check and once without, alternating within each run so VM drift hits both alike.  The
figure is the reading thread's CPU time per message (`time.thread_time`, stable where wall
time on this shared 2-core VM is not), median of `--runs` (run 0 is a warm-up and dropped).
The difference is the cost of the check; `zlib.crc32` of 1 KiB alone is measured beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
import time
import zlib
from pathlib import Path

from mqstore.storage import Message, MessageStore, StoreConfig

BODY = bytes(range(256)) * 4
TOPIC = "Bench"
QUEUES = 72
BATCH = 32


def produce(directory: Path, count: int) -> None:
    config = StoreConfig.for_small_segments(256 << 20)
    with MessageStore.open(directory, config) as store:
        for start in range(0, count, BATCH):
            results = store.put_batch([Message(TOPIC, (start + i) % QUEUES, BODY)
                                       for i in range(min(BATCH, count - start))])
            assert all(result.ok for result in results)
        assert store.wait_dispatched(timeout_ms=600_000)


def read_all(directory: Path, *, verify_crc: bool) -> tuple[float, int]:
    """(thread CPU seconds, messages) to read every message once."""
    config = StoreConfig.for_small_segments(256 << 20, read_verify_crc=verify_crc)
    with MessageStore.open(directory, config) as store:
        offsets = dict.fromkeys(range(QUEUES), 0)
        read = 0
        started = time.thread_time()
        while offsets:
            for queue_id in list(offsets):
                with store.get(TOPIC, queue_id, offsets[queue_id], BATCH) as result:
                    for message in result.messages:
                        read += len(message.body) > 0
                    if not result.messages:
                        del offsets[queue_id]
                        continue
                    offsets[queue_id] = result.next_offset
        return time.thread_time() - started, read


@dataclasses.dataclass
class Figures:
    on_us: list[float] = dataclasses.field(default_factory=list)
    off_us: list[float] = dataclasses.field(default_factory=list)


def crc_alone_us(repeats: int = 200_000) -> float:
    started = time.thread_time()
    for _ in range(repeats):
        zlib.crc32(BODY)
    return (time.thread_time() - started) / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    arguments = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="read-crc-", dir=arguments.dir))
    try:
        produce(root / "store", arguments.messages)
        figures = Figures()
        for run in range(arguments.runs + 1):
            for verify in ((True, False) if run % 2 else (False, True)):
                seconds, read = read_all(root / "store", verify_crc=verify)
                assert read == arguments.messages, (read, arguments.messages)
                if run:
                    (figures.on_us if verify else figures.off_us).append(seconds / read * 1e6)
        on, off = statistics.median(figures.on_us), statistics.median(figures.off_us)
        print(f"{arguments.messages} messages of {len(BODY)} B over {QUEUES} queues, "
              f"get({BATCH}), reading thread's CPU per message, median of {arguments.runs}:")
        for label, median, runs in (("off", off, figures.off_us), ("on ", on, figures.on_us)):
            listed = ", ".join(f"{v:.2f}" for v in runs)
            print(f"  verify {label}  {median:6.2f} µs  (runs {listed})")
        print(f"  the check   {on - off:6.2f} µs a message ({(on - off) / off:+.0%}); "
              f"zlib.crc32 of {len(BODY)} B alone: {crc_alone_us():.2f} µs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
