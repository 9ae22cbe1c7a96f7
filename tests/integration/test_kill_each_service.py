"""The three services as processes on one directory under a produce/consume workload, each
killed with SIGKILL in turn and restarted: no acknowledged message is lost, the consumer
resumes from its committed offsets, and duplicates are only at-least-once redelivery."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mqstore.client import Consumer, OutgoingMessage, Producer
from mqstore.client.errors import MqstoreError
from tests.integration.three_services import SERVICES, ThreeServices

TOPIC = "Orders"


class Workload:
    def __init__(self, services: ThreeServices) -> None:
        self.services = services
        self.acked: set[bytes] = set()
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.errors: list[str] = []

    def produce(self) -> None:
        producer = Producer(self.services.url("writer"), retries_max=50, backoff_max_ms=200)
        n = 0
        while not self.stop.is_set():
            bodies = [f"m{n + i}".encode() for i in range(20)]
            # Fresh bodies for every attempt: a batch that failed may still have been stored,
            # and sending the same bodies again would count the producer's resend as the
            # consumer's redelivery.
            n += 20
            try:
                results = producer.send_batch([OutgoingMessage(TOPIC, body) for body in bodies])
            except MqstoreError as error:  # not acknowledged: may or may not be stored
                self.errors.append(repr(error))
                time.sleep(0.05)
                continue
            for body, result in zip(bodies, results, strict=True):
                if result.status == "PUT_OK":
                    self.acked.add(body)
            time.sleep(0.005)
        producer.close()

    def consume(self, until: threading.Event) -> None:
        consumer = Consumer(self.services.url("notifier"), "g1", TOPIC, retries_max=50,
                            backoff_max_ms=200)
        while not until.is_set():
            try:
                messages = consumer.poll(max_messages=64, wait_ms=200)
                self.received.extend(bytes(message.body) for message in messages)
                consumer.commit()
            except MqstoreError as error:
                self.errors.append(repr(error))
                time.sleep(0.05)
        consumer.close()


def test_sigkill_each_service_in_turn(tmp_path: Path) -> None:
    services = ThreeServices(tmp_path, tmp_path / "data")
    for name in ("indexer", "writer", "notifier"):
        services.start(name)
    workload = Workload(services)
    consumer_done = threading.Event()
    threads = [threading.Thread(target=workload.produce),
               threading.Thread(target=workload.consume, args=(consumer_done,))]
    for thread in threads:
        thread.start()
    try:
        for name in SERVICES:
            time.sleep(1.0)
            before = len(workload.acked)
            services.kill(name)
            time.sleep(0.3)
            services.start(name)
            assert before > 0
        time.sleep(1.0)
    finally:
        workload.stop.set()
        threads[0].join(60)
    deadline = time.monotonic() + 60
    while not workload.acked <= set(workload.received) and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer_done.set()
    threads[1].join(60)
    codes = services.stop_all()
    missing = workload.acked - set(workload.received)
    assert not missing, f"{len(missing)} acknowledged messages never consumed, e.g. " \
                        f"{sorted(missing)[:5]}; errors {workload.errors[:5]}"
    assert len(workload.acked) > 500
    duplicates = len(workload.received) - len(set(workload.received))
    # Redelivery only after the notifier's kill (offsets committed up to one poll before):
    # bounded by a poll or two, never a replay from the start.  (The producer's retry of a
    # request the killed writer had stored is one more copy of up to 20 bodies.)
    assert duplicates <= 4 * 64, (duplicates, _duplicate_runs(workload.received),
                                  workload.errors[:5])
    assert codes == {"notifier": 0, "writer": 0, "indexer": 0}, codes


def _duplicate_runs(received: list[bytes]) -> list[tuple[int, int, int]]:
    """(first body number, count, index of the second copy) per run of consecutive
    duplicated bodies: a producer resend is a run of up to 20, a redelivery longer runs."""
    seen: set[bytes] = set()
    runs: list[tuple[int, int, int]] = []
    for index, body in enumerate(received):
        if body in seen:
            number = int(body[1:])
            if runs and runs[-1][0] + runs[-1][1] == number:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2])
            else:
                runs.append((number, 1, index))
        seen.add(body)
    return runs[:10]


def test_a_new_consumer_resumes_from_committed_offsets(tmp_path: Path) -> None:
    services = ThreeServices(tmp_path, tmp_path / "data")
    for name in ("indexer", "writer", "notifier"):
        services.start(name)
    try:
        with Producer(services.url("writer")) as producer:
            producer.send_batch([OutgoingMessage(TOPIC, f"a{n}".encode(), queue_id=0)
                                 for n in range(30)])
        with Consumer(services.url("notifier"), "g2", TOPIC) as first:
            got = _poll_until(first, 30)
            first.commit()
        assert got == [f"a{n}".encode() for n in range(30)]
        services.kill("notifier")
        services.start("notifier")
        with Producer(services.url("writer")) as producer:
            producer.send(TOPIC, b"after", queue_id=0)
        with Consumer(services.url("notifier"), "g2", TOPIC) as second:
            assert _poll_until(second, 1) == [b"after"]
    finally:
        services.stop_all()


def _poll_until(consumer: Consumer, count: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got.extend(bytes(m.body) for m in consumer.poll(max_messages=64, wait_ms=500))
    return got
