"""Forged messages (issue 17, Found 5): a record carried inside another message's body is
never served as a message, by HTTP or by the remoting front; a record not dispatched yet is
"not found yet", not served."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting.codes import RemotingError
from mqstore.services.notifier.remoting.queries import record_at
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.services.notifier_stack import notifier_app, settings, view_config
from tests.services.serving import run
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PHYSICAL_OFFSET_AT = 28
"""TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG (4 B each), QUEUEOFFSET (8 B), then
PHYSICALOFFSET (8 B)."""


def _forged_record(scratch: Path) -> bytes:
    """A whole record of topic "Forged", as a store writes it."""
    with MessageStore.open(scratch, writer_config()) as store:
        assert store.put(Message("Forged", 0, b"nobody produced this")).ok
        segment = sorted((scratch / "commitlog").iterdir())[0].read_bytes()
        size = int.from_bytes(segment[:4], "big")
        return segment[:size]


def _carry(store_dir: Path, record: bytes) -> tuple[int, int]:
    """Put one message whose body is `record`; its position and the record's."""
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        result = writer.put(Message("Orders", 0, record))
        assert result.ok
        wait_dispatched(indexer, writer.committed_position)
    log = sorted((store_dir / "commitlog").iterdir())[0].read_bytes()
    inner = log.find(record, result.physical_offset + 1)
    assert inner > result.physical_offset
    return result.physical_offset, inner


@pytest.fixture
def carried(tmp_path: Path) -> tuple[Path, int, int]:
    """A store whose one message's body is a record of another topic, its PHYSICALOFFSET
    field set to where it lands (learnt from a rehearsal on an identical store), as a
    hostile producer would; returns the store, the message's and the record's positions."""
    record = _forged_record(tmp_path / "scratch")
    _, inner = _carry(tmp_path / "rehearsal", record)
    forged = record[:PHYSICAL_OFFSET_AT] + inner.to_bytes(8, "big") + \
        record[PHYSICAL_OFFSET_AT + 8:]
    outer, landed = _carry(tmp_path / "store", forged)
    assert landed == inner
    return tmp_path / "store", outer, inner


def test_a_record_inside_a_body_is_not_served_over_http(carried: tuple[Path, int, int]
                                                        ) -> None:
    store_dir, outer, inner = carried

    async def scenario() -> None:
        async with notifier_app(store_dir, settings()) as (client, _, _):
            real = await client.get(f"/v1/messages/{outer}")
            assert real.status == 200
            assert (await real.json())["topic"] == "Orders"
            forged = await client.get(f"/v1/messages/{inner}")
            assert forged.status == 404, await forged.text()
            error = (await forged.json())["error"]
            assert error["status"] in ("NOT_FOUND", "NOT_DISPATCHED_YET")
            assert "Forged" in error["reason"]

    run(scenario)


def test_a_record_inside_a_body_is_not_viewed_by_id(carried: tuple[Path, int, int]) -> None:
    store_dir, outer, inner = carried
    with StoreView.open(store_dir, view_config()) as view:
        view.refresh()
        front = RemotingFront(view, ConsumerOffsets(store_dir, lock_timeout_ms=1000),
                              RemotingSettings(), queue_count_max=8)
        assert record_at(front.front, outer)[:4] != b""
        with pytest.raises(RemotingError, match="Forged"):
            record_at(front.front, inner)


def test_a_record_not_dispatched_yet_is_not_found_yet(tmp_path: Path) -> None:
    from mqstore.storage import NotDispatchedError  # noqa: PLC0415

    store_dir = tmp_path / "store"
    with MessageStore.open(store_dir, writer_config()) as writer:  # no indexer runs
        result = writer.put(Message("Orders", 0, b"soon"))
        assert result.ok
    with StoreView.open(store_dir, view_config()) as view, \
            pytest.raises(NotDispatchedError, match="Orders/0"):
        view.message_at(result.physical_offset)



