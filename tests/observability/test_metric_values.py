"""The series added for the dashboards and alerts carry the values they are documented with."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import BrokerRole, MessageStore
from tests.conftest import small_config
from tests.services.notifier_stack import stack
from tests.services.serving import run


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_writer_role_volume_and_recovery_series(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path / "m", small_config(role=BrokerRole.SYNC_MASTER))

    async def scrape() -> str:
        from aiohttp.test_utils import TestClient, TestServer  # noqa: PLC0415

        async with TestClient(TestServer(create_app(store, WriterSettings()))) as http:
            return await (await http.get("/metrics")).text()

    deadline = time.monotonic() + 10
    while store.stats.segments_preallocated_total < 1:  # open asks the allocator thread
        assert time.monotonic() < deadline, "the first segment was never created"
        time.sleep(0.005)
    try:
        samples = _samples(run(scrape))
    finally:
        store.close()
    roles = {labels[0][1]: value for (name, labels), value in samples.items()
             if name == "mqstore_replication_role"}
    assert roles == {"async_master": 0.0, "sync_master": 1.0, "follower": 0.0}
    modes = {labels[0][1]: value for (name, labels), value in samples.items()
             if name == "mqstore_recoveries_total"}
    assert modes == {"empty": 1.0, "normal": 0.0, "abnormal": 0.0, "full": 0.0}
    used = samples["mqstore_volume_used_bytes", ()]
    capacity = samples["mqstore_volume_capacity_bytes", ()]
    assert 0 < used <= capacity
    assert samples["mqstore_disk_used_ratio", ()] >= used / capacity - 1e-9
    assert samples["mqstore_segments_preallocated_total", ()] >= 1
    assert samples["mqstore_replication_followers", ()] == 0


def test_pull_latency_tells_pulls_that_waited_apart(store_dir: Path) -> None:
    async def scenario() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        async with stack(store_dir) as parts:
            for wait_ms in ("0", "0", "50"):
                answer = await parts.client.get("/v1/topics/Empty/queues/0/messages",
                                                params={"offset": "0", "wait_ms": wait_ms})
                assert answer.status == 200
            return _samples(await (await parts.client.get("/metrics")).text())

    samples = run(scenario)
    counts = {dict(labels)["held"]: value for (name, labels), value in samples.items()
              if name == "mqstore_pull_latency_seconds_count"}
    assert counts == {"false": 2.0, "true": 1.0}
    waited = [value for (name, labels), value in samples.items()
              if name == "mqstore_pull_latency_seconds_sum" and ("held", "true") in labels]
    assert waited[0] >= 0.05
