"""What each service really exposes on /metrics, gathered from apps served in-process.

Every series family a service can expose is made to appear: the writer as a sync master with
the pool, in-process dispatch and its delay schedule (pool, replication master, dispatch and
delay series) and as a follower (its replication client's series), the indexer and the
notifier on the same directory (split mode), a notifier serving the remoting front (its
send-back, dead letter and transaction series), and the operator's registry.  A labelled
family with no child yet still shows its HELP and TYPE lines, so the families are complete
even when idle.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.operator import metrics as operator_metrics
from mqstore.services.common.settings.config_file import IndexerSettings, WriterSettings
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.indexer.app import create_app as create_indexer_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.notifier import create_app as create_notifier_app
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.services.writer import create_app as create_writer_app
from mqstore.services.writer.run import start_delay_schedule
from mqstore.storage import BrokerRole, Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.conftest import small_config
from tests.services.notifier_stack import notifier_app, settings, wait_connected
from tests.services.test_replication_loopback import following, open_master, serving, until
from tests.storage.dispatch.split_helpers import indexer_config, writer_config

SAMPLE_SUFFIXES = {"histogram": ("_bucket", "_count", "_sum", "_created"),
                   "counter": ("_total", "_created")}


@dataclasses.dataclass
class Family:
    name: str
    """As exposed: counters with `_total`, histograms by their base name."""
    type: str
    labels: set[str]
    services: set[str]


def parse(text: str, service: str) -> dict[str, Family]:
    found: dict[str, Family] = {}
    for family in text_string_to_metric_families(text):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {label for sample in family.samples for label in sample.labels
                  if label not in ("le", "quantile")}
        found[name] = Family(name, family.type, labels, {service})
    return found


def merge(into: dict[str, Family], more: dict[str, Family]) -> None:
    for name, family in more.items():
        if name in into:
            assert into[name].type == family.type, (name, into[name].type, family.type)
            into[name].labels |= family.labels
            into[name].services |= family.services
        else:
            into[name] = family


async def _get(app_or_client: TestClient, path: str = "/metrics") -> str:  # type: ignore[type-arg]
    response = await app_or_client.get(path)
    assert response.status == 200
    return await response.text()


async def writer_families(directory: Path) -> dict[str, Family]:
    """A sync master with the pool and in-process dispatch, and a follower connected to it
    (heartbeats on: the follower's lag is known)."""
    found: dict[str, Family] = {}
    master, server = open_master(directory / "master", small_config(
        role=BrokerRole.SYNC_MASTER, pool_enabled=True))
    follower = MessageStore.open(directory / "follower", small_config(role=BrokerRole.FOLLOWER))
    try:
        async with serving(master, server), following(follower, server.port) as client:
            await until(lambda: client.state.connected and client.lag_bytes is not None)
            app = create_writer_app(master, WriterSettings())
            # The master's delay schedule, wired as services/writer/run.py wires it.
            schedule = start_delay_schedule(app, master, WriterSettings())
            try:
                async with TestClient(TestServer(app)) as http:
                    response = await http.post("/v1/topics/T/messages", json={"body": "x"})
                    assert response.status == 200, await response.text()
                    merge(found, parse(await _get(http), "writer"))
            finally:
                await schedule.stop()
                schedule.persist_after_close(clean=False)
            app = create_writer_app(follower, WriterSettings(), follower=client)
            async with TestClient(TestServer(app)) as http:
                merge(found, parse(await _get(http), "writer"))
    finally:
        follower.close()
        master.close()
    return found


async def split_families(directory: Path) -> dict[str, Family]:
    """The indexer and the notifier (following the indexer's notice stream), on a directory
    a writer store fills."""
    found: dict[str, Family] = {}
    loop = asyncio.get_running_loop()
    queues: list[Indexer] = []
    hub = NoticeHub(batch_latency_ms=2, subscriber_lines_max=1000, snapshot=lambda: [
        (q.topic, q.queue_id, q.min_offset, q.max_offset) for q in queues[0].queues])
    writer = MessageStore.open(directory, writer_config())
    indexer = Indexer.open(directory, indexer_config(), listener=hub.threadsafe(loop))
    queues.append(indexer)
    try:
        assert writer.put(Message("T", 0, b"x")).ok
        async with TestClient(TestServer(create_indexer_app(indexer, hub,
                                                            IndexerSettings()))) as index:
            url = f"http://127.0.0.1:{index.port}"
            async with notifier_app(directory, settings(indexer_url=url)) as (client, app, _):
                await wait_connected(app)
                answer = await client.get("/v1/topics/T/queues/0/messages",
                                          params={"offset": "0", "wait_ms": "0"})
                assert answer.status == 200
                merge(found, parse(await _get(client), "notifier"))
            merge(found, parse(await _get(index), "indexer"))
            hub.close()
    finally:
        indexer.close()
        writer.close()
    return found


async def remoting_families(directory: Path) -> dict[str, Family]:
    """A notifier serving the remoting front (not listening for clients' traffic here),
    after one transaction check pass (its last pass's gauges are absent before)."""
    directory.mkdir(parents=True, exist_ok=True)
    view = StoreView.open(directory, indexer_config())
    try:
        offsets = ConsumerOffsets(directory, lock_timeout_ms=1000)
        front = RemotingFront(view, offsets, RemotingSettings(port=0), queue_count_max=8)
        app = create_notifier_app(view, offsets, settings(), remoting=front)
        # one registration counted, as a front with remoting.namesrv_addresses counts it
        front.registrar.counts[("127.0.0.1:9876", "success")] += 1
        async with TestClient(TestServer(app)) as client:
            await front.transaction_check.check_pass()
            return parse(await _get(client), "notifier")
    finally:
        view.close()


def operator_families() -> dict[str, Family]:
    return parse(generate_latest(operator_metrics.REGISTRY).decode(), "operator")
