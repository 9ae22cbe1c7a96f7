"""Consumer groups (issue 17, Found 6): the number of groups and the size of one group's
offsets file are bounded; past them a commit is refused with a 4xx and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from mqstore.services.notifier import create_app
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.abuse.http_abuse import post, request, served
from tests.services.notifier_stack import settings, view_config
from tests.services.serving import run


def _commit(group: str, offsets: dict[str, int]) -> bytes:
    return post(f"/v1/groups/{group}/offsets",
                json.dumps({"topic": "T", "offsets": offsets}).encode())


def _app(tmp_path: Path, offsets: ConsumerOffsets) -> tuple[web.Application, StoreView]:
    view = StoreView.open(tmp_path, view_config())
    return create_app(view, offsets, settings()), view


def test_a_commit_past_groups_max_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        offsets = ConsumerOffsets(tmp_path, lock_timeout_ms=1000, groups_max=2)
        app, view = _app(tmp_path, offsets)
        try:
            async with served(app) as port:
                for group in ("g1", "g2"):
                    assert (await request(port, _commit(group, {"0": 1}))).status == 200
                refused = await request(port, _commit("g3", {"0": 1}))
                assert refused.status == 409
                assert refused.error_status == "GROUPS_FULL"
                assert (await request(port, _commit("g1", {"0": 2}))).status == 200
                assert not offsets.path("g3").exists()
        finally:
            view.close()

    run(scenario)


def test_a_commit_past_the_file_size_bound_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        offsets = ConsumerOffsets(tmp_path, lock_timeout_ms=1000, file_size_bytes_max=400)
        app, view = _app(tmp_path, offsets)
        try:
            async with served(app) as port:
                assert (await request(port, _commit("g", {"0": 1}))).status == 200
                many = {str(queue_id): 1 for queue_id in range(100)}
                refused = await request(port, _commit("g", many))
                assert refused.status == 413
                assert refused.error_status == "GROUP_OFFSETS_TOO_LARGE"
                assert offsets.fetch("g", "T") == {0: 1}
        finally:
            view.close()

    run(scenario)
