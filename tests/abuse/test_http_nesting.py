"""Deeply nested JSON (issue 17, Found 6): 400 with the uniform error body on every endpoint
that takes JSON, never a 500 from the parser's recursion."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore
from tests.abuse.http_abuse import post, request, served
from tests.conftest import small_config
from tests.services.notifier_stack import notifier_app, settings
from tests.services.serving import run

DEEP = b"[" * 100_000 + b"]" * 100_000
"""Far past Python's recursion limit (1,000)."""
FIVE_DEEP = b'{"messages": [{"body": "x", "properties": {"a": [[]]}}]}'
"""Five levels: legal JSON, one level past a `json_depth_max` of 4."""


@pytest.mark.parametrize("path", ["/v1/topics/T/messages", "/v1/topics/T/messages/batch"])
@pytest.mark.parametrize(("body", "depth_max"), [(DEEP, 32), (FIVE_DEEP, 4)])
def test_the_writer_refuses_deep_json(tmp_path: Path, path: str, body: bytes,
                                      depth_max: int) -> None:
    async def scenario() -> None:
        with MessageStore.open(tmp_path / "store", small_config()) as store:
            app = create_app(store, WriterSettings(json_depth_max=depth_max))
            async with served(app) as port:
                answer = await request(port, post(path, body))
                assert answer.status == 400, answer.body[:200]
                assert answer.error_status == "BAD_REQUEST"
                assert "json_depth_max" in answer.body.decode()
                assert store.committed_position == 0

    run(scenario)


@pytest.mark.parametrize("path", ["/v1/groups/G/topics/T/poll", "/v1/groups/G/offsets"])
def test_the_notifier_refuses_deep_json(tmp_path: Path, path: str) -> None:
    async def scenario() -> None:
        async with notifier_app(tmp_path, settings()) as (_, app, _), served(app) as port:
            answer = await request(port, post(path, DEEP))
            assert answer.status == 400, answer.body[:200]
            assert answer.error_status == "BAD_REQUEST"
            assert "json_depth_max" in answer.body.decode()

    run(scenario)
