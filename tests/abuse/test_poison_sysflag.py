"""No message, whatever its SYSFLAG, stops dispatch (issue 22, Found 6).

A message with sysflag 0x4 (transaction prepared) sent to the writer's forward port got a
queue offset, dispatch put no entry for it, and the hole crash-looped the indexer
(ConsumeQueueGapError): no later message of any topic was served.  Now the writer, recovery
and dispatch ask one rule which records take a queue offset (record.takes_queue_offset, as
RocketMQ's CommitLog: prepared and rolled-back records are stored with offset 0 and take no
entry), a batch with a transaction flag is refused as RocketMQ refuses it, and a queue hole
no damage explains is filled with entries that answer MESSAGE_CORRUPT instead of stopping
dispatch."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.links.forward_wire import KIND_SINGLE, ForwardRequest
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer.app import PRODUCE, create_app
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.storage import GetStatus, Message, MessageStore, PutStatus
from mqstore.storage.dispatch.indexer import Indexer
from tests.conftest import small_config
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PREPARED, COMMIT, ROLLBACK = 0x4, 0x8, 0xC


def _bodies(store: MessageStore, topic: str) -> list[bytes]:
    with store.get(topic, 0, 0, 32) as pulled:
        return [bytes(m.body) for m in pulled.messages]


def test_transaction_types_take_queue_offsets_as_rocketmq(store_dir: Path) -> None:
    sysflags = [0, PREPARED, COMMIT, ROLLBACK, 0]
    with MessageStore.open(store_dir, small_config()) as store:
        results = [store.put(Message("Tx", 0, b"%d" % flag, sysflag=flag)) for flag in sysflags]
        assert all(result.ok for result in results)
        assert [r.queue_offset for r in results] == [0, 0, 1, 0, 2]
        assert store.wait_dispatched(timeout_ms=5000)
        assert _bodies(store, "Tx") == [b"0", b"8", b"0"]
        assert store.next_queue_offset("Tx", 0) == 3
    with MessageStore.open(store_dir, small_config()) as reopened:  # recovery agrees
        assert reopened.next_queue_offset("Tx", 0) == 3
        assert reopened.put(Message("Tx", 0, b"after")).queue_offset == 3
        assert reopened.wait_dispatched(timeout_ms=5000)
        assert _bodies(reopened, "Tx") == [b"0", b"8", b"0", b"after"]


@pytest.mark.parametrize("sysflag", [PREPARED, COMMIT, ROLLBACK])
def test_a_batch_with_a_transaction_flag_is_refused(store: MessageStore, sysflag: int) -> None:
    results = store.put_batch([Message("Tx", 0, b"a"), Message("Tx", 0, b"b", sysflag=sysflag)])
    assert {r.status for r in results} == {PutStatus.MESSAGE_ILLEGAL}
    assert "transaction" in results[0].reason
    assert store.committed_position == 0


def test_a_prepared_message_through_the_forward_port_stops_no_dispatch(tmp_path: Path) -> None:
    """The finding itself: the forward server stores a prepared message, then an ordinary one
    of another topic; a separate indexer dispatches both and serves the second."""
    directory = tmp_path / "store"
    settings = WriterSettings(forward_port=0)
    with MessageStore.open(directory, writer_config()) as writer, \
            Indexer.open(directory, indexer_config()) as indexer:
        server = ForwardServer(create_app(writer, settings)[PRODUCE], settings)
        for topic, sysflag in (("Orders", PREPARED), ("Orders", 0), ("Other", 0)):
            request = ForwardRequest(0, KIND_SINGLE, 0, sysflag, 0, 1_700_000_000_000, 0,
                                     "10.0.0.1:5000", topic, b"", b"body-" + topic.encode())
            answer = run(lambda request=request: server.store(request))
            assert answer.status == "PUT_OK", answer.reason
        wait_dispatched(indexer, writer.committed_position)
        assert indexer.failure is None
        assert [(q.topic, q.max_offset) for q in sorted(indexer.queues, key=lambda q: q.topic)] \
            == [("Orders", 1), ("Other", 1)]


def test_a_hole_no_damage_explains_answers_corrupt_and_dispatch_goes_on(store_dir: Path) -> None:
    """A writer that gives out offsets with no record (simulated by moving its counter): the
    missing offsets answer MESSAGE_CORRUPT, the message after them is served, and every
    other queue goes on."""
    with MessageStore.open(store_dir, small_config()) as store:
        assert store.put(Message("Holed", 0, b"first")).ok
        assert store.wait_dispatched(timeout_ms=5000)
        store._commitlog.queue_offsets["Holed", 0] += 2  # the writer's bug, simulated
        assert store.put(Message("Holed", 0, b"after-hole")).queue_offset == 3
        assert store.put(Message("Other", 0, b"other")).ok
        assert store.wait_dispatched(timeout_ms=5000)
        assert store.failure is None
        assert _bodies(store, "Other") == [b"other"]
        with store.get("Holed", 0, 1, 32) as pulled:
            assert pulled.status is GetStatus.MESSAGE_CORRUPT
        with store.get("Holed", 0, 3, 32) as pulled:
            assert [bytes(m.body) for m in pulled.messages] == [b"after-hole"]
