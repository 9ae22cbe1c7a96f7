"""`ProduceCore`: the writer's one path for a produce, whichever front it came by.

The HTTP views (handlers.py, after parsing JSON or a binary batch in requests.py) and the
forward listener (forward_server.py, sends the remoting front passes on) call the same three
steps, so a rule holds on every door or on none:

    check    the topic's name and length (`topic_size_bytes_max`), the queue id
             (0..`topic_queue_count` - 1), each body (1..`message_body_size_bytes_max`
             bytes), the request's bodies together (`put_batch_size_bytes_max`) and its
             message count (`batch_messages_max`); a message that names no queue gets one
             (round robin per topic over the queues it was created with, one choice per
             topic per request: services/common/topics/queue_choice.py)
    admit    the topic rules (topic_gate.py): system, `%RETRY%` and `%DLQ%` topics, deleted
             topics, `topics.auto_create` and `topics.topics_max`
    delayed  a message asking for a delay level is stored in the schedule topic instead
             (delayed_puts.py; delivered back by delay_schedule.py)
             and one asking for a delivery time in the timer topic (timer_puts.py;
             delivered back by timer_schedule.py)
    put      one put or one batch put; under sync flush or a sync master the put awaits its
             acknowledgement without blocking the loop (completions.py); counted in the
             writer's metrics

A check or the gate refuses with `ProduceRefusal` (nothing stored): its `status` is the name
both protocols answer with (MESSAGE_ILLEGAL, NO_PERMISSION, TOPIC_NOT_EXIST, and
SERVICE_NOT_AVAILABLE on a follower), the reason names the message (`messages[3].queue_id`)
and the setting.  The store's own refusals (busy, disk full) come back as results, as the
store gives them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Protocol

from mqstore.services.common.http.answers import ServiceError
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.common.topics.queue_choice import RoundRobinQueues
from mqstore.services.writer.completions import LoopCompletions
from mqstore.services.writer.delayed_puts import DelayedBatchError, scheduled
from mqstore.services.writer.metrics import WriterMetrics
from mqstore.services.writer.timer_puts import TimerIllegal, TimerRules
from mqstore.services.writer.topic_gate import TopicGate
from mqstore.storage import (
    BrokerRole,
    Message,
    MessageStore,
    PutResult,
    PutStatus,
    TopicNameError,
    validate_topic,
)
from mqstore.storage.format.delay_levels import SCHEDULE_TOPIC, DelayLevels
from mqstore.storage.log.publisher import PositionsPublisher

MESSAGE_ILLEGAL = PutStatus.MESSAGE_ILLEGAL.value
FOLLOWER_HTTP_STATUS = 403


class ProduceRefusal(ServiceError):
    """A produce refused before anything was stored.  An HTTP view raises it as it is (the
    error middleware answers `http_status`); the forward listener answers `status` and
    `reason` to the front, which maps them to RocketMQ's codes."""


def illegal(reason: str, *, http_status: int = 400) -> ProduceRefusal:
    return ProduceRefusal(http_status, MESSAGE_ILLEGAL, reason)


class Produced(Protocol):
    """What the checks read of a message, before it is a `Message` (HTTP) or after
    (forwarded): a queue id of None asks the writer to choose."""

    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int | None: ...
    @property
    def body(self) -> bytes: ...


class ProduceCore:
    def __init__(self, store: MessageStore, settings: WriterSettings,
                 metrics: WriterMetrics, *, gate: TopicGate, master: str = "") -> None:
        config = store.config
        self._store = store
        self._metrics = metrics
        self.gate = gate
        self._topic_size_bytes_max = config.topic_size_bytes_max
        self._body_size_bytes_max = config.message_body_size_bytes_max
        self._batch_size_bytes_max = config.put_batch_size_bytes_max
        self._batch_messages_max = settings.batch_messages_max
        self._queue_count = settings.topic_queue_count
        self.delay_levels = DelayLevels.parse(config.message_delay_levels)
        self.timer_rules = TimerRules(
            precision_ms=settings.timer_precision_ms,
            max_delay_s=settings.timer_max_delay_s) if settings.timer_enabled else None
        self.queues = RoundRobinQueues(queue_count=settings.topic_queue_count)
        self.master = master if config.role is BrokerRole.FOLLOWER else None
        """A follower's master (its writer refuses every produce), else None."""
        self._sync = store.put_waits
        """Sync flush or sync master: await the acknowledgement (the loop never blocks)."""
        self._completions: LoopCompletions | None = None
        """Made on the first waiting put, on the serving loop."""
        self._publisher = store.positions_publisher
        self._publish_scheduled = False
        self._ring_timer: asyncio.TimerHandle | None = None

    def refuse_on_follower(self) -> None:
        """Before a request is read: a follower's log is only ever its master's."""
        if self.master is not None:
            raise ProduceRefusal(
                FOLLOWER_HTTP_STATUS, PutStatus.SERVICE_NOT_AVAILABLE.value,
                f"this writer is a follower of {self.master} (store.role=follower): it only "
                f"copies the master's log; produce to the master")

    def check_topic(self, topic: str, *, where: str) -> None:
        try:
            validate_topic(topic, size_bytes_max=self._topic_size_bytes_max)
        except TopicNameError as error:
            raise illegal(f"{where}: {error}") from None

    def check(self, messages: Sequence[Produced], *, where: str, batch: bool) -> list[int]:
        """Check every message of one request; the queue id of each (chosen where it names
        none).  The first problem raises, naming `where` (with `[index]` for a batch)."""
        if not 0 < len(messages) <= self._batch_messages_max:
            raise illegal(f"a request holds 1..{self._batch_messages_max} messages, not "
                          f"{len(messages)} (batch_messages_max)")
        chosen: dict[str, int] = {}
        body_max, queue_count = self._body_size_bytes_max, self._queue_count
        total_bytes = 0
        queue_ids = []
        for index, message in enumerate(messages):
            topic, queue_id, size = message.topic, message.queue_id, len(message.body)
            if topic not in chosen:
                self.check_topic(topic, where=_at(where, index, batch) + ".topic")
                chosen[topic] = -1
            if queue_id is None:
                queue_id = chosen[topic]
                if queue_id < 0:
                    queue_id = chosen[topic] = self.queues.choose(
                        topic, queue_count=self.gate.write_queue_count(topic))
            elif not 0 <= queue_id < queue_count:
                raise illegal(f"{_at(where, index, batch)}.queue_id={queue_id} must be in "
                              f"0..{queue_count - 1} (topic_queue_count={queue_count})")
            if not 0 < size <= body_max:
                raise self._body_size_error(size, where=_at(where, index, batch) + ".body")
            total_bytes += size
            queue_ids.append(queue_id)
        if total_bytes > self._batch_size_bytes_max:
            raise illegal(f"the request's bodies total {total_bytes} bytes; one put holds at "
                          f"most {self._batch_size_bytes_max} (put_batch_size_bytes_max)",
                          http_status=413)
        return queue_ids

    def admit(self, topics: Iterable[str], *, send_back: bool = False,
              routed: bool = False) -> None:
        """The topic rules (topic_gate.py) for the distinct `topics` of one request."""
        refused = self.gate.admit(topics, send_back=send_back, routed=routed)
        if refused is not None:
            raise ProduceRefusal(refused.http_status, refused.status, refused.reason)

    def delayed(self, messages: list[Message], *, batch: bool) -> list[Message]:
        """Checked and admitted `messages` as they are stored: one asking for a delay level
        goes to the schedule topic to wait (delayed_puts.py); a batch asking refused."""
        try:
            stored = scheduled(messages, self.delay_levels, batch=batch)
        except DelayedBatchError as error:
            raise illegal(str(error)) from None
        if self.timer_rules is not None:
            try:
                stored = self.timer_rules.timed(stored, batch=batch)
            except TimerIllegal as error:
                raise illegal(str(error)) from None
        if stored is not messages:  # one or more moved: rare, so counted only here
            self._metrics.delay_scheduled.inc(
                sum(message.topic == SCHEDULE_TOPIC for message in stored))
        return stored

    @property
    def puts_now(self) -> bool:
        """A put returns when the record is in the log (async flush, no sync master): the
        forward listener then answers inline, without a task (`put_now`)."""
        return not self._sync

    def put_now(self, messages: list[Message]) -> list[PutResult]:
        """`put` where it never waits (`puts_now`)."""
        assert not self._sync
        results = self._stored(messages)
        self._metrics.count_messages(results[0].status, len(results))
        return results

    def _stored(self, messages: list[Message]) -> list[PutResult]:
        """One put or one batch put that never waits.  Its positions are published on the
        loop, once at the end of the loop turn for every put in it, rather than by waking
        the publisher's thread per put (storage/log/publisher.py)."""
        store = self._store
        publisher = self._publisher
        if publisher is not None:
            publisher.caller_publishes = True
        try:
            return [store.put(messages[0])] if len(messages) == 1 else \
                store.put_batch(messages)
        finally:
            if publisher is not None:
                publisher.caller_publishes = False
                if not self._publish_scheduled:
                    self._publish_scheduled = True
                    asyncio.get_running_loop().call_soon(self._publish, publisher)

    def _publish(self, publisher: PositionsPublisher) -> None:
        self._publish_scheduled = False
        ring_in_s = publisher.publish_now()
        if ring_in_s is not None and self._ring_timer is None:
            self._ring_timer = asyncio.get_running_loop().call_later(
                ring_in_s, self._ring_unrung, publisher)

    def _ring_unrung(self, publisher: PositionsPublisher) -> None:
        self._ring_timer = None
        publisher.ring_unrung()

    async def put(self, messages: list[Message]) -> list[PutResult]:
        """Store checked and admitted `messages` (one put or one batch put) and count them;
        the results share one status (the store is all or nothing)."""
        store = self._store
        if self._sync:
            if self._completions is None:
                self._completions = LoopCompletions(asyncio.get_running_loop())
            one: asyncio.Future[PutResult]
            batch: asyncio.Future[list[PutResult]]
            if len(messages) == 1:
                one, deliver_one = self._completions.future()
                store.put_callback(messages[0], deliver_one)
                results = [await one]
            else:
                batch, deliver_batch = self._completions.future()
                store.put_batch_callback(messages, deliver_batch)
                results = await batch
        else:
            results = self._stored(messages)
        status = results[0].status
        assert results[-1].status is status, "a batch's results share one status"
        self._metrics.count_messages(status, len(results))
        return results

    def _body_size_error(self, size: int, *, where: str) -> ProduceRefusal:
        if size == 0:
            return illegal(f"{where} is empty (RocketMQ refuses empty bodies too)")
        return illegal(f"{where} is {size} bytes; the maximum is {self._body_size_bytes_max} "
                       f"(message_body_size_bytes_max)", http_status=413)


def _at(where: str, index: int, batch: bool) -> str:
    return f"{where}[{index}]" if batch else where
