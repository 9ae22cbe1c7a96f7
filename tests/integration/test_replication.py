"""A master and a follower as processes on loopback: catch-up byte for byte and reads on the
follower; kill -9 of the follower under a sync master (no false PUT_OK); kill -9 of the
master (every PUT_OK is on the follower).  The link cut is test_replication_link_cut.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client import Consumer, OutgoingMessage, Producer
from mqstore.client.errors import MqstoreError
from mqstore.storage import BrokerRole, MessageStore, StoreConfig
from tests.integration.replicas import Node, assert_same_log, wait_for
from tests.integration.three_services import SMALL_STORE

TOPIC = "Replicated"


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        node.kill_all()


def produce(url: str, count: int, *, start: int = 0) -> None:
    with Producer(url) as producer:
        for first in range(start, start + count, 50):
            bodies = [f"b{index}".encode() * 200 for index in range(first, first + 50)]
            results = producer.send_batch([OutgoingMessage(TOPIC, body) for body in bodies])
            assert {result.status for result in results} == {"PUT_OK"}


def test_follower_catches_up_byte_for_byte_and_serves_reads(tmp_path: Path,
                                                            nodes: list[Node]) -> None:
    master = Node(tmp_path, "master", role="async_master")
    nodes.append(master)
    master.start()
    produce(master.url(), 2000)  # several 1 MiB segments before the follower exists
    follower = Node(tmp_path, "follower", role="follower", master=master.replication_address)
    nodes.append(follower)
    for service in ("writer", "indexer", "notifier"):
        follower.start(service)
    produce(master.url(), 1000, start=2000)  # and some while it follows

    def caught_up() -> bool:
        end = master.status()["written_position"]
        return bool(follower.status()["written_position"] == end and
                    master.status()["followers"][0]["lag_bytes"] == 0)

    wait_for(caught_up, what="follower caught up")
    status = follower.status()
    assert status["connected"] and status["connections_total"] == 1
    # The follower's own indexer built its consume queues: consume everything from it.
    received: list[bytes] = []
    with Consumer(follower.url("notifier"), "g", TOPIC) as consumer:
        deadline = time.monotonic() + 60
        while len(received) < 3000 and time.monotonic() < deadline:
            received += [bytes(m.body) for m in consumer.poll(max_messages=256, wait_ms=500)]
    assert sorted(received) == sorted(f"b{i}".encode() * 200 for i in range(3000))
    end = master.status()["written_position"]
    assert follower.stop() == {"notifier": 0, "writer": 0, "indexer": 0}
    assert master.stop() == {"writer": 0}
    assert assert_same_log(master.data_dir, follower.data_dir, end_position=end) >= 3


class Producers:
    """Threads sending single messages to a sync master; every answer is kept with its time."""

    def __init__(self, url: str, *, threads: int) -> None:
        self.answers: list[tuple[float, str, int, bytes]] = []
        """(time answered, status, physical offset, body)."""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(url, n))
                         for n in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self, url: str, number: int) -> None:
        with Producer(url, retries_max=0, timeout_s=10) as producer:
            sent = 0
            while not self._stop.is_set():
                body = f"t{number}-{sent}".encode() * 10
                sent += 1
                try:
                    result = producer.send(TOPIC, body)
                except MqstoreError as error:  # no answer: neither acknowledged nor refused
                    self.errors.append(repr(error))
                    time.sleep(0.05)
                    continue
                with self._lock:
                    self.answers.append((time.monotonic(), result.status,
                                         result.physical_offset, body))

    def count(self, status: str) -> int:
        with self._lock:
            return sum(1 for answer in self.answers if answer[1] == status)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def acknowledged(self) -> list[tuple[int, bytes]]:
        return [(offset, body) for _, status, offset, body in self.answers if status == "PUT_OK"]


def assert_on_follower(data_dir: Path, acknowledged: list[tuple[int, bytes]]) -> None:
    """Open the follower's directory (after its writer stopped or died) and find every
    acknowledged message at its position, with its body."""
    config = StoreConfig(**{**SMALL_STORE, "role": BrokerRole.FOLLOWER})  # type: ignore[arg-type]
    with MessageStore.open(data_dir, config) as store:
        for offset, body in acknowledged:
            assert bytes(store.message_at(offset).body) == body, f"position {offset}"


SYNC_STORE = {"replication_sync_timeout_ms": 1000}


def _connected_sync_pair(tmp_path: Path, nodes: list[Node]) -> tuple[Node, Node]:
    """A sync master and its follower, started, the follower connected."""
    master = Node(tmp_path, "master", role="sync_master", store=SYNC_STORE)
    follower = Node(tmp_path, "follower", role="follower", master=master.replication_address)
    nodes += [master, follower]
    master.start()
    follower.start()
    wait_for(lambda: bool(master.status()["followers"]), what="follower connected")
    return master, follower


def test_kill9_of_the_follower_under_sync_master_never_gives_a_false_put_ok(
        tmp_path: Path, nodes: list[Node]) -> None:
    master, follower = _connected_sync_pair(tmp_path, nodes)
    producers = Producers(master.url(), threads=4)
    wait_for(lambda: producers.count("PUT_OK") >= 200, what="200 acknowledged")
    follower.kill()
    killed_at = time.monotonic()
    wait_for(lambda: time.monotonic() > killed_at + 2.5 and
             producers.count("FLUSH_SLAVE_TIMEOUT") + producers.count("SLAVE_NOT_AVAILABLE")
             >= 20, what="refusals after the kill")
    producers.stop()
    late = {status for answered, status, _, _ in producers.answers if answered > killed_at + 1.5}
    assert late and late <= {"FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}, late
    # Every PUT_OK, before or around the kill, was in the follower's log when it died.
    assert_on_follower(follower.data_dir, producers.acknowledged())
    # Restarted, it catches up, and the master acknowledges again.
    follower.start()
    with Producer(master.url()) as producer:
        wait_for(lambda: producer.send(TOPIC, b"again").status == "PUT_OK",
                 what="PUT_OK after the follower's restart")
    assert not producers.errors, producers.errors[:3]


def test_kill9_of_the_sync_master_loses_no_acknowledged_message(tmp_path: Path,
                                                              nodes: list[Node]) -> None:
    master, follower = _connected_sync_pair(tmp_path, nodes)
    producers = Producers(master.url(), threads=4)
    wait_for(lambda: producers.count("PUT_OK") >= 500, what="500 acknowledged")
    master.kill()
    producers.stop()
    acknowledged = producers.acknowledged()
    assert len(acknowledged) >= 500
    assert follower.stop() == {"writer": 0}
    assert_on_follower(follower.data_dir, acknowledged)
