"""Model-based test: random puts, batches, gets, key queries, reopens and simulated kill -9s
against a plain in-memory model of what the store must hold.

The model is the list of every acknowledged record in physical order (topic, queue id, queue
offset, physical offset, size, body, tags, keys); a queue is the sub-list of its records.
Physical offsets are predicted too: a record (or a whole batch) goes where the previous one
ended unless it does not fit beside the 8-byte BLANK reserve, and then it starts the next
64 KiB segment.  `get` is predicted from the status table in `storage/reads/get.py`, including
the scan window (at least 800 entries, never past the consume queue file holding `offset`).

Crash simulation, without killing the test process: a kill -9 leaves exactly the page cache,
which reading the files shows.  The files are copied to a fresh directory while the store is
still open (the `lock` file left out, the `abort` marker kept), the original store is then
closed and thrown away, and the copy is opened.  The copy must be of one instant, as a kill
is.  A plain file-by-file copy is not: dispatch writes consume queue and index entries
through mappings meanwhile, so the copy could hold one queue from before a record and another
from after it, or a 20-byte entry (which may straddle a page) with its second half written
and its first not, neither of which a kill leaves.  So, with the interpreter's switch
interval raised to 1 s (`threads_frozen`: no other Python thread runs unless this one
blocks), every file is mapped, the rule's last puts are made, and every mapping is sliced (a
memcpy under the GIL) without blocking in between: the services are frozen wherever they
were, typically behind with those last puts (dispatch not done, pool bytes not committed).
No store internals are touched.  What still runs during the copy is code outside the GIL:
`pwrite`s of the pool's commit and of the checkpoint, and `fdatasync`s.  A commit `pwrite`
may be seen half done (even its later pages without its earlier ones, which a kill cannot
leave); that only cuts the log inside bytes that the copy does not promise to keep.

What must survive: with the pool off, every acknowledged record (puts go through the
mapping into the page cache); under sync flush, every acknowledged record (it was synced);
with the pool on under async flush, at least every record committed when the copy was taken
(read in the same frozen stretch) and, beyond that, any prefix of the rest.  The store may
be reopened with another flush mode or pool setting, cleanly or after a crash.

Runs EXAMPLES state machines of up to STEPS steps (environment: MQSTORE_MODEL_EXAMPLES,
MQSTORE_MODEL_STEPS, for a longer hunt; pass `-o timeout=0` then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from mqstore.storage import (
    FlushMode,
    GetStatus,
    Message,
    MessageStore,
    NoRecordError,
    PutResult,
    PutStatus,
    RecoveryMode,
    StoreConfig,
    StoredMessage,
)
from tests.conftest import SMALL_SEGMENT_BYTES, small_config

TOPICS = ("A", "B", "Topic_c")
QUEUE_IDS = (0, 1, 2)
TAGS = ("TagA", "TagB", "Aa", "BB")
"""'Aa' and 'BB' have the same Java hash: a tag filter must check the exact tag too."""
KEYS = ("k1", "k2", "order-7")
BODY_BYTES_MAX = 3000
QUEUE_ENTRIES_PER_FILE = 64
"""Small consume queue files so that they roll and `get`'s scan window meets their ends."""
RECORD_FIXED_BYTES = 91
"""v1 record with IPv4 hosts: every field but body, topic and properties
(storage/format/record.py)."""
BLANK_RESERVE_BYTES = 8
SCAN_ENTRIES_MIN = 800
"""`get` scans at least 16,000 bytes of consume queue (get.SCAN_BYTES_MIN / 20)."""
SETTLE_TIMEOUT_S = 10.0
FREEZE_SWITCH_INTERVAL_S = 1.0

EXAMPLES = int(os.environ.get("MQSTORE_MODEL_EXAMPLES", "25"))
STEPS = int(os.environ.get("MQSTORE_MODEL_STEPS", "50"))

T = TypeVar("T")


def store_config(flush: FlushMode, pool: bool) -> StoreConfig:
    """64 KiB segments; every background service fast, so crashes land mid-work."""
    return small_config(flush_mode=flush, pool_enabled=pool,
                        consume_queue_file_size_bytes=20 * QUEUE_ENTRIES_PER_FILE,
                        index_hash_slot_count=8, index_count_max=128,
                        commit_interval_ms=5, commit_thorough_interval_ms=10,
                        flush_interval_ms=10, checkpoint_interval_ms=10,
                        queue_flush_interval_ms=10, queue_flush_thorough_interval_ms=50)


# -- messages and the model ----------------------------------------------------------------

@st.composite
def messages(draw: st.DrawFn) -> Message:
    size = draw(st.integers(0, BODY_BYTES_MAX))
    body = random.Random(draw(st.integers(0, 2**32 - 1))).randbytes(size)
    return Message(draw(st.sampled_from(TOPICS)), draw(st.sampled_from(QUEUE_IDS)), body,
                   tags=draw(st.none() | st.sampled_from(TAGS)),
                   keys=tuple(draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))))


def random_message(rng: random.Random) -> Message:
    """What `messages()` draws, from a seeded generator: many messages for one draw."""
    body = rng.randbytes(rng.randint(0, BODY_BYTES_MAX))
    return Message(rng.choice(TOPICS), rng.choice(QUEUE_IDS), body,
                   tags=rng.choice((None, *TAGS)), keys=tuple(rng.sample(KEYS, rng.randint(0, 2))))


def record_size(message: Message) -> int:
    properties = ""
    if message.tags is not None:
        properties += f"TAGS\x01{message.tags}\x02"
    if message.keys:
        properties += f"KEYS\x01{' '.join(message.keys)}\x02"
    return (RECORD_FIXED_BYTES + len(message.body) + len(message.topic.encode())
            + len(properties.encode()))


@dataclasses.dataclass(frozen=True)
class Record:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    body: bytes
    tags: str | None
    keys: tuple[str, ...]

    @property
    def end(self) -> int:
        return self.physical_offset + self.size


def observed(message: StoredMessage) -> Record:
    return Record(message.topic, message.queue_id, message.queue_offset,
                  message.physical_offset, message.total_size, bytes(message.body),
                  message.tags, message.keys)


def next_segment_start(position: int) -> int:
    return position - position % SMALL_SEGMENT_BYTES + SMALL_SEGMENT_BYTES


class Model:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.queues: dict[tuple[str, int], list[Record]] = {}
        self.cursor = 0
        """Where the next record goes if it fits: the end of the last one."""

    def queue(self, topic: str, queue_id: int) -> list[Record]:
        return self.queues.get((topic, queue_id), [])

    def append(self, batch: Sequence[Message], sizes: Sequence[int]) -> list[Record]:
        """One contiguous write: in the current segment if it fits beside the BLANK
        reserve, else at the start of the next one."""
        position = self.cursor
        room = SMALL_SEGMENT_BYTES - position % SMALL_SEGMENT_BYTES
        if room < sum(sizes) + BLANK_RESERVE_BYTES:
            position = next_segment_start(position)
        appended = []
        for message, size in zip(batch, sizes, strict=True):
            queue = self.queues.setdefault((message.topic, message.queue_id), [])
            record = Record(message.topic, message.queue_id, len(queue), position, size,
                            bytes(message.body), message.tags, tuple(message.keys))
            queue.append(record)
            self.records.append(record)
            appended.append(record)
            position += size
        self.cursor = position
        return appended

    def keep(self, count: int) -> None:
        """Only the first `count` records survived a crash."""
        self.records = self.records[:count]
        self.queues = {}
        for record in self.records:
            self.queues.setdefault((record.topic, record.queue_id), []).append(record)
        self.cursor = self.records[-1].end if self.records else 0


@dataclasses.dataclass
class ExpectedGet:
    status: GetStatus
    next_offset: int
    min_offset: int
    max_offset: int
    records: list[Record]


def expected_get(queue: list[Record], offset: int, max_messages: int,
                 tags: Sequence[str] | None, config: StoreConfig) -> ExpectedGet:
    """The status table of storage/reads/get.py, for a queue whose offsets are [0, len(queue))."""
    size = len(queue)
    if size == 0:
        return ExpectedGet(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0, [])
    if offset < 0:
        return ExpectedGet(GetStatus.OFFSET_TOO_SMALL, 0, 0, size, [])
    if offset == size:
        return ExpectedGet(GetStatus.OFFSET_OVERFLOW_ONE, offset, 0, size, [])
    if offset > size:
        return ExpectedGet(GetStatus.OFFSET_OVERFLOW_BADLY, size, 0, size, [])
    file_end = (offset // QUEUE_ENTRIES_PER_FILE + 1) * QUEUE_ENTRIES_PER_FILE
    window_end = min(size, file_end, offset + max(SCAN_ENTRIES_MIN, max_messages))
    count_max = min(max_messages, config.get_transfer_count_max)
    found: list[Record] = []
    next_offset = window_end
    for record in queue[offset:window_end]:
        if len(found) >= count_max or (
                found and sum(r.size for r in found) + record.size > config.get_transfer_bytes_max):
            next_offset = record.queue_offset
            break
        if not tags or record.tags in tags:
            found.append(record)
    status = GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE
    return ExpectedGet(status, next_offset, 0, size, found)


def assert_same_records(actual: list[Record], expected: list[Record], what: str) -> None:
    for index, (got, want) in enumerate(zip(actual, expected, strict=False)):
        assert got == want, f"{what}: record {index} differs:\n got  {got}\nwant {want}"
    assert len(actual) == len(expected), \
        f"{what}: {len(actual)} records, the model has {len(expected)}"


def assert_acknowledged(result: PutResult, record: Record) -> None:
    assert result.status is PutStatus.PUT_OK, result
    assert (result.physical_offset, result.queue_offset, result.size_bytes) == \
        (record.physical_offset, record.queue_offset, record.size), (result, record)


# -- the simulated kill -9 -----------------------------------------------------------------

def _listing(directory: Path) -> tuple[list[Path], list[Path]]:
    """Every directory and file below `directory` (relative), without the `lock` file."""
    directories, files = [], []
    for root, names, file_names in os.walk(directory):
        relative = Path(root).relative_to(directory)
        directories += [relative / name for name in names]
        files += [relative / name for name in file_names if relative / name != Path("lock")]
    return sorted(directories), sorted(files)


def _map_all(directory: Path, files: list[Path]) -> dict[Path, mmap.mmap | None] | None:
    """Read-only mappings of every file (None for an empty one); None if one vanished."""
    mapped: dict[Path, mmap.mmap | None] = {}
    for relative in files:
        try:
            fd = os.open(directory / relative, os.O_RDONLY)
        except FileNotFoundError:  # renamed into place meanwhile (a new segment)
            _unmap(mapped)
            return None
        try:
            size = os.fstat(fd).st_size
            mapped[relative] = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
        finally:
            os.close(fd)
    return mapped


def _unmap(mapped: dict[Path, mmap.mmap | None]) -> None:
    for mapping in mapped.values():
        if mapping is not None:
            mapping.close()


@contextlib.contextmanager
def threads_frozen() -> Iterator[None]:
    """While inside, no other Python thread runs unless this one blocks (a syscall, a lock,
    a sleep): the switch interval is 1 s, so nothing preempts this thread."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(FREEZE_SWITCH_INTERVAL_S)
    try:
        # A thread already waiting for the GIL asks for it after the old interval: let it
        # run now.  Once this thread has the GIL back, nobody asks for it for 1 s.
        time.sleep(max(0.01, 2 * previous))
        yield
    finally:
        sys.setswitchinterval(previous)


def _nothing() -> None:
    pass


def _snapshot(mapped: dict[Path, mmap.mmap | None],
              probe: Callable[[], T]) -> tuple[T, dict[Path, bytes]]:
    """Slicing a mapping copies it without releasing the GIL."""
    return probe(), {relative: mapping[:] if mapping is not None else b""
                     for relative, mapping in mapped.items()}


def copy_as_killed(source: Path, target: Path, probe: Callable[[], T],
                   last_acts: Callable[[], object]) -> T:
    """Copy `source` to `target` as a kill -9 at one instant would leave it; return what
    `probe` read at that instant.  Call it inside `threads_frozen()`.

    `last_acts` runs once, after the files are mapped and right before the copy, so that
    the services (which do not run unless it blocks) are still behind with its work."""
    assert sys.getswitchinterval() == FREEZE_SWITCH_INTERVAL_S, "call in threads_frozen()"
    pending = last_acts
    for _ in range(50):
        directories, files = _listing(source)
        mapped = _map_all(source, files)
        if mapped is None:
            continue
        try:
            pending()
            pending = _nothing
            value, contents = _snapshot(mapped, probe)  # does not block: no thread runs
        finally:
            _unmap(mapped)
        if _listing(source) == (directories, files):  # no file appeared meanwhile
            break
    else:
        raise AssertionError(f"{source} kept changing; no consistent copy in 50 attempts")
    target.mkdir()
    for directory in directories:
        (target / directory).mkdir(parents=True, exist_ok=True)
    for relative, content in contents.items():
        (target / relative).write_bytes(content)
    return value


# -- the state machine ---------------------------------------------------------------------

class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="mqstore-model-"))
        self.generation = 0
        self.directory = self.base
        self.config = store_config(FlushMode.ASYNC, False)
        self.store: MessageStore | None = None
        self.model = Model()

    def _open(self, directory: Path, flush: FlushMode, pool: bool) -> MessageStore:
        self.config = store_config(flush, pool)
        self.directory = directory
        self.store = MessageStore.open(directory, self.config)
        return self.store

    def _new_directory(self) -> Path:
        self.generation += 1
        return self.base / f"store-{self.generation}"

    @property
    def opened(self) -> MessageStore:
        assert self.store is not None
        return self.store

    def _settle(self) -> None:
        """Wait until everything put is committed (pool) and dispatched."""
        store = self.opened
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            assert store.failure is None, store.failure
            if (store.committed_position == store.written_position
                    and store.dispatch_behind_bytes == 0):
                return
            assert time.monotonic() < deadline, (
                f"not settled in {SETTLE_TIMEOUT_S} s: wrote {store.written_position}, "
                f"committed {store.committed_position}, "
                f"dispatch behind {store.dispatch_behind_bytes} bytes")
            time.sleep(0.001)

    @initialize(flush=st.sampled_from(FlushMode), pool=st.booleans())
    def open_store(self, flush: FlushMode, pool: bool) -> None:
        self._open(self._new_directory(), flush, pool)

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    # -- writes ----------------------------------------------------------------------------
    @rule(message=messages(), via_future=st.booleans())
    def put(self, message: Message, via_future: bool = False) -> None:
        """`put`, or `submit` (a future, completed once acknowledged) and its result."""
        result = (self.opened.submit(message).result(timeout=SETTLE_TIMEOUT_S) if via_future
                  else self.opened.put(message))
        [record] = self.model.append([message], [record_size(message)])
        assert_acknowledged(result, record)

    @rule(count=st.integers(1, 150), seed=st.integers(0, 2**32 - 1))
    def put_many(self, count: int, seed: int) -> None:
        """Enough single puts to roll segments, consume queue files and index files."""
        rng = random.Random(seed)
        for _ in range(count):
            self.put(random_message(rng))

    @rule(batch=st.lists(messages(), min_size=1, max_size=20),
          poison=st.sampled_from((False,) * 7 + (True,)), via_future=st.booleans())
    def put_batch(self, batch: list[Message], poison: bool, via_future: bool) -> None:
        if poison:  # one illegal message refuses the whole batch
            too_big = b"\0" * (self.config.message_body_size_bytes_max + 1)
            batch = [*batch[:len(batch) // 2], Message("A", 0, too_big), *batch[len(batch) // 2:]]
        results = (self.opened.submit_batch(batch).result(timeout=SETTLE_TIMEOUT_S)
                   if via_future else self.opened.put_batch(batch))
        assert len(results) == len(batch)
        sizes = [record_size(message) for message in batch]
        if poison or sum(sizes) > self.config.put_batch_size_bytes_max:
            event("put_batch: refused as a whole")
            assert all(r.status is PutStatus.MESSAGE_ILLEGAL for r in results), results
            return
        for result, record in zip(results, self.model.append(batch, sizes), strict=True):
            assert_acknowledged(result, record)

    # -- reads -----------------------------------------------------------------------------
    # Draws never depend on the model's state: after a crash under the pool with async flush,
    # how much survived depends on timing, and Hypothesis needs the same draws to replay.
    @rule(topic=st.sampled_from(TOPICS), queue_id=st.sampled_from(QUEUE_IDS),
          percent=st.integers(0, 100), delta=st.integers(-2, 3), max_messages=st.integers(1, 40),
          tags=st.none() | st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True))
    def get(self, topic: str, queue_id: int, percent: int, delta: int, max_messages: int,
            tags: list[str] | None) -> None:
        """From `offset` in [-2, max + 3]: `percent` of the way into the queue, plus `delta`."""
        queue = self.model.queue(topic, queue_id)
        offset = len(queue) * percent // 100 + delta
        self._settle()
        expected = expected_get(queue, offset, max_messages, tags, self.config)
        with self.opened.get(topic, queue_id, offset, max_messages, tags=tags) as result:
            found = [observed(message) for message in result.messages]
            assert [len(view) for view in result.records] == [r.size for r in found]
        event(f"get: {result.status.name}{' (tag filter)' if tags else ''}")
        actual = ExpectedGet(result.status, result.next_offset, result.min_offset,
                             result.max_offset, found)
        assert actual == expected, f"get({topic!r}, {queue_id}, {offset}, {max_messages}, " \
                                   f"tags={tags}):\n got  {actual}\nwant {expected}"

    @rule(topic=st.sampled_from(TOPICS), key=st.sampled_from(KEYS),
          max_messages=st.integers(1, 70))
    def query_by_key(self, topic: str, key: str, max_messages: int) -> None:
        self._settle()
        matching = [r for r in self.model.records if r.topic == topic and key in r.keys]
        limit = min(max_messages, self.config.index_query_results_max)
        found = self.opened.query_by_key(topic, key, max_messages=max_messages)
        assert_same_records([observed(m) for m in found], matching[-limit:],
                            f"query_by_key({topic!r}, {key!r}, max_messages={max_messages})")

    @rule(index=st.integers(0, 2**16))
    def message_at(self, index: int) -> None:
        if self.model.records:
            record = self.model.records[index % len(self.model.records)]
            assert observed(self.opened.message_at(record.physical_offset)) == record
        with pytest.raises(NoRecordError):  # nothing starts at the end of the log
            self.opened.message_at(self.model.cursor)

    # -- restarts --------------------------------------------------------------------------
    @rule(flush=st.sampled_from(FlushMode), pool=st.booleans())
    def reopen(self, flush: FlushMode, pool: bool) -> None:
        self.opened.close()
        assert not (self.directory / "abort").exists(), "a clean close left the abort marker"
        report = self._open(self.directory, flush, pool).recovery_report
        modes = (RecoveryMode.NORMAL, RecoveryMode.EMPTY) if not self.model.records \
            else (RecoveryMode.NORMAL,)
        assert report.mode in modes, report
        assert report.truncated_bytes == 0, report
        assert self.opened.written_position == self.model.cursor

    @rule(tail=st.lists(messages(), max_size=5), flush=st.sampled_from(FlushMode),
          pool=st.booleans())
    def crash_and_reopen(self, tail: list[Message], flush: FlushMode, pool: bool) -> None:
        lossy = self.config.pool_enabled and not self.config.flush_sync
        crashed = self.opened
        with threads_frozen():  # the services get to run only while this thread blocks
            committed, behind = copy_as_killed(
                self.directory, target := self._new_directory(),
                lambda: (crashed.committed_position, crashed.dispatch_behind_bytes),
                last_acts=lambda: [self.put(message) for message in tail])
        if committed < crashed.written_position:
            event("crash: pool bytes not committed at the kill")
        if behind:
            event("crash: dispatch behind at the kill")
        crashed.close()  # the copy is what the kill left; the original just goes away
        shutil.rmtree(self.directory)
        store = self._open(target, flush, pool)
        report = store.recovery_report
        assert report.mode in (RecoveryMode.ABNORMAL, RecoveryMode.FULL, RecoveryMode.EMPTY), \
            report
        survivors = [observed(m) for m in store.iter_messages()]
        assert_same_records(survivors, self.model.records[:len(survivors)],
                            "the log after the crash")
        must_survive = sum(1 for r in self.model.records if not lossy or r.end <= committed)
        assert len(survivors) >= must_survive, (
            f"{len(self.model.records) - len(survivors)} acknowledged records lost "
            f"({'pool, async' if lossy else 'nothing may be lost'}; committed {committed}); "
            f"recovery: {report}")
        event(f"crash: recovery {report.mode.value}")
        allowed = {self.model.cursor}  # nothing lost: the log ends where it did
        if len(survivors) < len(self.model.records):
            event("crash: uncommitted records lost (pool on, async flush)")
            self.model.keep(len(survivors))
            allowed = {self.model.cursor}
            if self.model.records:  # the BLANK of the roll before a lost record may be there
                allowed.add(next_segment_start(self.model.cursor))
        assert store.written_position in allowed, (store.written_position, allowed, report)
        self.model.cursor = store.written_position

    # -- after every step ------------------------------------------------------------------
    @invariant()
    def store_matches_model(self) -> None:
        if self.store is None:
            return
        self._settle()
        store = self.store
        assert store.written_position == self.model.cursor
        if store.segment_count > 3:
            event("more than 3 segments")
        assert_same_records([observed(m) for m in store.iter_messages()], self.model.records,
                            "iter_messages()")
        for topic in TOPICS:
            for queue_id in QUEUE_IDS:
                count = len(self.model.queue(topic, queue_id))
                assert (store.min_offset(topic, queue_id), store.max_offset(topic, queue_id),
                        store.next_queue_offset(topic, queue_id)) == (0, count, count), \
                    (topic, queue_id)


StoreModel.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestStoreModel = StoreModel.TestCase
