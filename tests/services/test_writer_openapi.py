"""The writer's OpenAPI document matches its router, and real answers match the document."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from mqstore.services.common.http.batch_wire import (
    BATCH_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    BatchCodec,
    WireMessage,
)
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.services.writer.openapi import writer_openapi
from mqstore.storage import MessageStore
from tests.services.schema_check import check
from tests.services.serving import run, writer_client

Request = Callable[[TestClient[Any, Any]], Awaitable[ClientResponse]]
BATCH = BatchCodec.encode([WireMessage("T", b"a"), WireMessage("U", b"b", queue_id=1)])

# Real requests per documented route: the happy path and the documented refusals.
REQUESTS: dict[tuple[str, str], list[Request]] = {
    ("post", "/v1/topics/{topic}/messages"): [
        lambda c: c.post("/v1/topics/T/messages", json={"body": "x", "keys": ["k"]}),
        lambda c: c.post("/v1/topics/T/messages", json={"body": "x", "queue_id": -1}),
        lambda c: c.post("/v1/topics/T/messages", json={"body": "x" * 20_000}),
        lambda c: c.post("/v1/topics/T/messages", data="x"),
    ],
    ("post", "/v1/topics/{topic}/messages/batch"): [
        lambda c: c.post("/v1/topics/T/messages/batch", json={"messages": [{"body": "a"}]}),
        lambda c: c.post("/v1/topics/T/messages/batch", json={"messages": []}),
    ],
    ("post", "/v1/batch"): [
        lambda c: c.post("/v1/batch", data=BATCH, headers={"Content-Type": BATCH_MEDIA_TYPE}),
        lambda c: c.post("/v1/batch", data=BATCH, headers={"Content-Type": BATCH_MEDIA_TYPE,
                                                           "Accept": RESULT_MEDIA_TYPE}),
        lambda c: c.post("/v1/batch", data=BATCH[:-1],
                         headers={"Content-Type": BATCH_MEDIA_TYPE}),
    ],
    ("get", "/v1/replication"): [lambda c: c.get("/v1/replication")],
    ("get", "/healthz"): [lambda c: c.get("/healthz")],
    ("get", "/readyz"): [lambda c: c.get("/readyz")],
    ("get", "/metrics"): [lambda c: c.get("/metrics")],
    ("get", "/openapi.json"): [lambda c: c.get("/openapi.json")],
}


def test_every_route_is_documented_and_every_documented_path_is_routed(
        store: MessageStore) -> None:
    app = create_app(store, WriterSettings())
    routed = {(route.method.lower(), route.resource.canonical)
              for route in app.router.routes() if route.resource is not None}
    document = writer_openapi(store.config, WriterSettings())
    documented = {(method, path) for path, item in document["paths"].items() for method in item}
    assert routed == documented
    assert set(REQUESTS) == documented  # and the test below exercises each one


@pytest.mark.parametrize(("route", "requests"), REQUESTS.items(),
                         ids=[" ".join(key) for key in REQUESTS])
def test_real_answers_match_the_documented_schema(store: MessageStore, route: tuple[str, str],
                                                  requests: list[Request]) -> None:
    method, path = route
    document = writer_openapi(store.config, WriterSettings())
    responses = document["paths"][path][method]["responses"]

    async def scenario() -> list[tuple[int, str, bytes]]:
        answers = []
        async with writer_client(store) as client:
            for request in requests:
                response = await request(client)
                answers.append((response.status, response.content_type, await response.read()))
        return answers

    for status, content_type, body in run(scenario):
        assert str(status) in responses, f"{method} {path}: {status} is not documented"
        content = responses[str(status)]["content"]
        assert content_type in content, f"{method} {path} {status}: {content_type} undocumented"
        schema = content[content_type]["schema"]
        if content_type == "application/json":
            check(json.loads(body), schema, root=document, where=f"{method} {path} {status}")
        else:
            assert schema["type"] == "string"
            assert body
