"""The indexer's OpenAPI document matches its router, and real answers match the document."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.common.settings.config_file import IndexerSettings
from mqstore.services.indexer.app import create_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.indexer.openapi import indexer_openapi
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.schema_check import check
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

PATHS = ("/v1/notices", "/v1/status", "/healthz", "/readyz", "/metrics", "/openapi.json")


def test_routes_and_answers_match_the_document(store_dir: Path) -> None:
    document = indexer_openapi()
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        assert writer.put(Message("T", 0, b"x")).ok
        wait_dispatched(indexer, writer.committed_position)
        hub = NoticeHub(batch_latency_ms=1, subscriber_lines_max=10, snapshot=list)
        app = create_app(indexer, hub, IndexerSettings(notice_heartbeat_interval_ms=20))
        routed = {(route.method.lower(), route.resource.canonical)
                  for route in app.router.routes() if route.resource is not None}
        documented = {(method, path) for path, item in document["paths"].items()
                      for method in item}
        assert routed == documented
        assert {path for _, path in documented} == set(PATHS)
        for path, status, content_type, body in asyncio.run(_answers(app)):
            content = document["paths"][path]["get"]["responses"][str(status)]["content"]
            assert content_type in content, f"{path}: {content_type} is not documented"
            schema = content[content_type]["schema"]
            if content_type == "application/json":
                check(json.loads(body), schema, root=document, where=path)
            else:
                assert schema["type"] == "string"
                assert body


async def _answers(app: object) -> list[tuple[str, int, str, bytes]]:
    answers = []
    async with TestClient(TestServer(app)) as client:  # type: ignore[arg-type]
        for path in PATHS:
            response = await client.get(path)
            if path == "/v1/notices":  # a stream: its first line is the document's example
                body = await asyncio.wait_for(response.content.readline(), 10)
                response.close()
            else:
                body = await response.read()
            answers.append((path, response.status, response.content_type, body))
    return answers
