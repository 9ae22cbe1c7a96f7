"""Nacks through `mqstore up` with the Python client: what RocketMQ's push consumers get from
CONSUMER_SEND_MSG_BACK (tests/remoting_clients/test_java_retries.py shows the same timings
on RocketMQ 5.5.0 and mqstore), on the HTTP door (services/notifier/nacks.py,
client/retries.py).

`mqstore up` runs the test delay table (level n waits n seconds), so a first retry waits
level 3 (3 s) and a second level 4 (4 s).
"""

from __future__ import annotations

import itertools
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.client import BadRequestError, Consumer, Producer, ReceivedMessage
from tests.remoting.up_process import mqstore_up
from tests.remoting_clients.delay_levels import MQSTORE_ENV, TEST_DELAY_LEVELS, delay_ms

RETRY_POLL_INTERVAL_MS = 200
"""Other members' retries are looked for this often; this consumer's own at their due time."""
LATE_MS_MAX = 1_500
"""A retry arrives within this of its due time: the schedule's 100 ms passes, the indexer's
dispatch and the consumer's next look, with room for a loaded CI machine."""


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    with mqstore_up(tmp_path_factory.mktemp("nacks"),
                    settings={MQSTORE_ENV: TEST_DELAY_LEVELS}) as ports:
        yield f"http://127.0.0.1:{ports['writer']}", f"http://127.0.0.1:{ports['notifier']}"


def _consumer(notifier: str, group: str, topic: str) -> Consumer:
    return Consumer(notifier, group, topic, retry_poll_interval_ms=RETRY_POLL_INTERVAL_MS)


def _deliveries(consumer: Consumer, *, until_s: float, fail: bool,
                max_reconsume_times: int | None = None) -> list[tuple[float, ReceivedMessage]]:
    """Every message polled until `until_s` (monotonic), with when; each nacked if `fail`."""
    seen: list[tuple[float, ReceivedMessage]] = []
    while (left_ms := int((until_s - time.monotonic()) * 1000)) > 0:
        for message in consumer.poll(max_messages=8, wait_ms=min(left_ms, 1000)):
            seen.append((time.monotonic(), message))
            if fail:
                consumer.nack(message, max_reconsume_times=max_reconsume_times)
        consumer.commit()
    return seen


def test_a_nacked_message_comes_again_from_the_retry_topic_after_level_3(
        urls: tuple[str, str]) -> None:
    writer, notifier = urls
    with Producer(writer) as producer:
        producer.send("NackOnce", b"once", keys=("k-once",))
    with _consumer(notifier, "nack-once", "NackOnce") as consumer:
        first = _deliveries(consumer, until_s=time.monotonic() + 5, fail=False)
        assert [message.body for _, message in first] == [b"once"]
        nacked_s = time.monotonic()
        result = consumer.nack(first[0][1])
        consumer.commit()
        assert (result.stored_in, result.dead_letter, result.reconsume_times,
                result.delay_level, result.delay_ms) == (
            "%RETRY%nack-once", False, 1, 3, delay_ms(3))
        again = _deliveries(consumer, until_s=nacked_s + 3 + LATE_MS_MAX / 1000 + 2,
                            fail=False)
    assert len(again) == 1, again
    arrived_s, message = again[0]
    waited_ms = (arrived_s - nacked_s) * 1000
    print(f"nack → redelivered after {waited_ms:.0f} ms (due {delay_ms(3)} ms)")
    assert delay_ms(3) <= waited_ms <= delay_ms(3) + LATE_MS_MAX
    assert (message.topic, message.origin_topic, message.reconsume_times, message.body,
            message.keys) == ("%RETRY%nack-once", "NackOnce", 1, b"once", ("k-once",))


def test_a_message_nacked_past_max_reconsume_times_goes_to_the_dead_letter_queue(
        urls: tuple[str, str]) -> None:
    writer, notifier = urls
    with Producer(writer) as producer:
        sent_s = time.monotonic()
        producer.send("NackAlways", b"poison")
    # Attempts 0, 1, 2 (3 s and 4 s apart), then the third nack dead-letters it.
    until_s = sent_s + (delay_ms(3) + delay_ms(4)) / 1000 + 6
    with _consumer(notifier, "nack-always", "NackAlways") as consumer:
        seen = _deliveries(consumer, until_s=until_s, fail=True, max_reconsume_times=2)
    times = [message.reconsume_times for _, message in seen]
    gaps_ms = [(later - earlier) * 1000
               for (earlier, _), (later, _) in itertools.pairwise(seen)]
    print(f"nack always → deliveries {times}, gaps {[round(gap) for gap in gaps_ms]} ms")
    assert times == [0, 1, 2]
    assert delay_ms(3) <= gaps_ms[0] <= delay_ms(3) + LATE_MS_MAX
    assert delay_ms(4) <= gaps_ms[1] <= delay_ms(4) + LATE_MS_MAX
    with Consumer(notifier, "dlq-reader", "%DLQ%nack-always", poll_retries=False) as reader:
        dead = reader.poll(wait_ms=2000)
    assert [(m.body, m.origin_topic, m.reconsume_times) for m in dead] == [
        (b"poison", "NackAlways", 3)]
    assert _metric(notifier, 'mqstore_nacks_total{outcome="dead_letter"}') >= 1
    assert _metric(notifier, 'mqstore_remoting_dead_letters_total{path="nack"}') >= 1


def test_delay_level_minus_1_dead_letters_at_once(urls: tuple[str, str]) -> None:
    writer, notifier = urls
    with Producer(writer) as producer:
        producer.send("NackDead", b"at once")
    with _consumer(notifier, "nack-dead", "NackDead") as consumer:
        [message] = consumer.poll(wait_ms=5000)
        result = consumer.nack(message, delay_level=-1)
    assert (result.stored_in, result.dead_letter, result.delay_ms) == (
        "%DLQ%nack-dead", True, 0)


def test_a_nack_of_an_offset_with_no_message_is_refused_and_stores_nothing(
        urls: tuple[str, str]) -> None:
    writer, notifier = urls
    with Producer(writer) as producer:
        producer.send("NackNothing", b"one")
    with _consumer(notifier, "nack-nothing", "NackNothing") as consumer:
        [message] = consumer.poll(wait_ms=5000)
        ghost = ReceivedMessage(**{**_fields(message), "queue_offset": 99})
        with pytest.raises(BadRequestError) as refused:
            consumer.nack(ghost)
    assert (refused.value.http_status, refused.value.status) == (404, "NO_MESSAGE")
    assert "NackNothing queue" in str(refused.value)


def _fields(message: ReceivedMessage) -> dict[str, object]:
    return {name: getattr(message, name) for name in ReceivedMessage.__dataclass_fields__}


def _metric(notifier: str, series: str) -> float:
    with urllib.request.urlopen(f"{notifier}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
    raise AssertionError(f"{series} is not among the notifier's metrics")


def test_nacks_need_no_remoting_front(tmp_path: Path) -> None:
    """With `remoting.enabled` off, the notifier sends copies on a writer link of its own."""
    with mqstore_up(tmp_path, settings={MQSTORE_ENV: TEST_DELAY_LEVELS,
                                        "MQSTORE_REMOTING__ENABLED": "false"}) as ports:
        with Producer(f"http://127.0.0.1:{ports['writer']}") as producer:
            producer.send("NoFront", b"x")
        with Consumer(f"http://127.0.0.1:{ports['notifier']}", "no-front",
                      "NoFront") as consumer:
            [message] = consumer.poll(wait_ms=5000)
            result = consumer.nack(message, delay_level=1)
            assert (result.stored_in, result.delay_ms) == ("%RETRY%no-front", delay_ms(1))
            nacked_s = time.monotonic()
            again = consumer.poll(wait_ms=5000)
    assert [(m.body, m.reconsume_times) for m in again] == [(b"x", 1)]
    assert time.monotonic() - nacked_s >= delay_ms(1) / 1000
