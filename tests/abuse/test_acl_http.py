"""Found item 2 on HTTP: without credentials, or without the permission, nobody writes a
topic (system topics included), reads another group's offsets or rewinds them, reads
messages or the indexer's notice stream.  Each refusal is 401/403 with the uniform error
body and changes nothing; metrics and health stay open.

On the code before users existed every request here was served (200)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mqstore.services.auth import load_users
from mqstore.services.auth.http_rules import INDEXER_RULES, NOTIFIER_RULES, WRITER_RULES
from mqstore.services.auth.http_signature import sign_headers
from mqstore.services.auth.users import Users
from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import (
    IndexerSettings,
    NotifierSettings,
    WriterSettings,
)
from mqstore.services.indexer.app import create_app as create_indexer_app
from mqstore.services.notifier import create_app as create_notifier_app
from mqstore.services.writer import create_app as create_writer_app
from mqstore.storage import MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.services.notifier_stack import wait_connected, writer_and_indexer
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched

USERS_FILE = """\
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    topicPerms: [Orders=PUB]
  - accessKey: consumer1
    secretKey: consumer-secret
    topicPerms: [Orders=SUB, Audit=SUB]
    groupPerms: [billing=SUB]
  - accessKey: admin-01
    secretKey: admin-secret
    admin: true
"""
KEYS = {"producer1": "producer-secret", "consumer1": "consumer-secret",
        "admin-01": "admin-secret"}
Client = TestClient[Any, Any]


class Party:
    """One HTTP client signing as one user (or not at all)."""

    def __init__(self, client: Client, user: str | None, *, secret: str | None = None,
                 skew_ms: int = 0) -> None:
        self.client, self.user, self.skew_ms = client, user, skew_ms
        self.secret = secret or (KEYS[user] if user else "")

    async def call(self, method: str, target: str, body: bytes = b"",
                   content_type: str = "application/json",
                   signed_body: bytes | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": content_type}
        if self.user is not None:
            headers.update(sign_headers(
                access_key=self.user, secret_key=self.secret, method=method, target=target,
                body=body if signed_body is None else signed_body,
                now_ms=int(time.time() * 1000) + self.skew_ms))
        response = await self.client.request(method, target, data=body, headers=headers)
        text = await response.read()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


@contextlib.asynccontextmanager
async def services(store_dir: Path) -> AsyncIterator[tuple[Client, Client, Client, MessageStore,
                                                           Indexer]]:
    """Writer, indexer and notifier apps on one directory, all with the same users; the
    notifier follows the indexer's notice stream (signed as the admin)."""
    (store_dir.parent / "plain_acl.yml").write_text(USERS_FILE)
    users: Users = load_users(store_dir.parent / "plain_acl.yml")
    auth = AuthSettings(users_file=str(store_dir.parent / "plain_acl.yml"))
    hub, writer, indexer = writer_and_indexer(store_dir)
    view = StoreView.open(store_dir, indexer_config())
    try:
        indexer_client: Client = TestClient(TestServer(create_indexer_app(
            indexer, hub, IndexerSettings(), users=users, auth=auth)))
        async with indexer_client:
            notifier = create_notifier_app(
                view, ConsumerOffsets(store_dir, lock_timeout_ms=1000),
                NotifierSettings(indexer_url=str(indexer_client.make_url("")),
                                 refresh_interval_ms=20, notice_reconnect_initial_ms=10,
                                 notice_reconnect_max_ms=100), users=users, auth=auth)
            async with TestClient(TestServer(create_writer_app(
                    writer, WriterSettings(), users=users, auth=auth))) as writer_client, \
                    TestClient(TestServer(notifier)) as notifier_client:
                await wait_connected(notifier)
                yield writer_client, notifier_client, indexer_client, writer, indexer
                hub.close()
    finally:
        view.close()
        indexer.close()
        writer.close()


def run(store_dir: Path, scenario: Callable[..., Awaitable[None]]) -> None:
    async def main() -> None:
        async with services(store_dir) as parts:
            await scenario(*parts)

    asyncio.run(main())


def message(text: str = "x") -> bytes:
    return json.dumps({"body": text}).encode()


def refused(answer: tuple[int, Any], http_status: int) -> str:
    status, body = answer
    assert status == http_status, answer
    assert body["error"]["status"] == ("UNAUTHORIZED" if http_status == 401 else "FORBIDDEN")
    return str(body["error"]["reason"])


def test_writes_need_credentials_and_pub(store_dir: Path) -> None:
    async def scenario(writer_client: Client, notifier: Client, indexer: Client,
                       store: MessageStore, _: Indexer) -> None:
        anonymous = Party(writer_client, None)
        reason = refused(await anonymous.call("POST", "/v1/topics/Orders/messages", message()),
                         401)
        assert "credentials required" in reason
        wrong = Party(writer_client, "producer1", secret="not-the-secret")
        assert "signature does not match" in refused(
            await wrong.call("POST", "/v1/topics/Orders/messages", message()), 401)
        stale = Party(writer_client, "producer1", skew_ms=-600_000)
        assert "from the server's clock" in refused(
            await stale.call("POST", "/v1/topics/Orders/messages", message()), 401)
        producer = Party(writer_client, "producer1")
        assert "does not match X-Mqstore-Content-Sha256" in refused(await producer.call(
            "POST", "/v1/topics/Orders/messages", message("tampered"),
            signed_body=message("signed")), 401)
        consumer = Party(writer_client, "consumer1")
        assert refused(await consumer.call("POST", "/v1/topics/Orders/messages", message()),
                       403) == "AccessKey consumer1 lacks PUB on topic Orders"
        for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "%RETRY%billing", "%DLQ%billing",
                      "Audit"):
            path = f"/v1/topics/{urllib.parse.quote(topic, safe='')}/messages"
            refused(await producer.call("POST", path, message()), 403)
            refused(await producer.call("POST", path + "/batch",
                                        json.dumps({"messages": [{"body": "x"}]}).encode()),
                    403)
        batch = BatchCodec.encode([WireMessage("Orders", b"a"), WireMessage("TBW102", b"b")])
        assert "PUB on topic TBW102" in refused(await producer.call(
            "POST", "/v1/batch", batch, content_type=BATCH_MEDIA_TYPE), 403)
        assert store.committed_position == 0  # nothing refused was written
        status, answer = await producer.call("POST", "/v1/topics/Orders/messages", message())
        assert (status, answer["queue_offset"]) == (200, 0)  # the first and only message
        status, _ = await producer.call("POST", "/v1/batch", BatchCodec.encode(
            [WireMessage("Orders", b"a")]), content_type=BATCH_MEDIA_TYPE)
        assert status == 200
        refused(await anonymous.call("GET", "/v1/replication"), 401)

    run(store_dir, scenario)


def test_reads_offsets_and_rewinds_need_sub_on_topic_and_group(store_dir: Path) -> None:
    async def scenario(writer_client: Client, notifier: Client, indexer_client: Client,
                       store: MessageStore, indexer: Indexer) -> None:
        result = await Party(writer_client, "producer1").call(
            "POST", "/v1/topics/Orders/messages", message("secret order"))
        assert result[0] == 200
        wait_dispatched(indexer, store.committed_position)
        pull = "/v1/topics/Orders/queues/0/messages?offset=0&max_messages=1"
        offsets = "/v1/groups/billing/offsets?topic=Orders"
        anonymous, producer = Party(notifier, None), Party(notifier, "producer1")
        consumer, admin = Party(notifier, "consumer1"), Party(notifier, "admin-01")
        for target in (pull, offsets, "/v1/topics/Orders/messages?key=k",
                       "/v1/topics/Orders/queues", "/v1/messages/0", "/v1/topics"):
            refused(await anonymous.call("GET", target), 401)
        refused(await producer.call("GET", pull), 403)
        refused(await producer.call("GET", offsets), 403)
        assert "SUB on group other" in refused(await consumer.call(
            "GET", "/v1/groups/other/offsets?topic=Orders"), 403)
        rewind = json.dumps({"topic": "Orders", "offsets": {"0": 0}, "reset": True}).encode()
        refused(await producer.call("POST", "/v1/groups/billing/offsets", rewind), 403)
        refused(await consumer.call("POST", "/v1/groups/other/offsets", rewind), 403)
        other_topic = json.dumps({"topic": "Secret", "offsets": {"0": 0}}).encode()
        assert "SUB on topic Secret" in refused(await consumer.call(
            "POST", "/v1/groups/billing/offsets", other_topic), 403)
        refused(await consumer.call("POST", "/v1/groups/billing/topics/Secret/poll",
                                    b"{}"), 403)
        refused(await consumer.call("GET", "/v1/messages/0"), 403)  # a position: admins only
        status, pulled = await consumer.call("GET", pull)
        assert status == 200 and len(pulled["messages"]) == 1
        assert (await consumer.call("POST", "/v1/groups/billing/offsets", rewind))[0] == 200
        assert (await admin.call("GET", "/v1/messages/0"))[0] == 200

    run(store_dir, scenario)


def test_the_notice_stream_is_for_admins_and_probes_stay_open(store_dir: Path) -> None:
    async def scenario(writer_client: Client, notifier: Client, indexer_client: Client,
                       store: MessageStore, indexer: Indexer) -> None:
        refused(await Party(indexer_client, None).call("GET", "/v1/notices"), 401)
        assert "an admin account" in refused(
            await Party(indexer_client, "consumer1").call("GET", "/v1/notices"), 403)
        refused(await Party(indexer_client, None).call("GET", "/v1/status"), 401)
        for client in (writer_client, notifier, indexer_client):
            for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
                assert (await client.get(path)).status == 200, path
            refused(await Party(client, None).call("GET", "/v1/nowhere"), 401)

    run(store_dir, scenario)


@pytest.mark.parametrize("header", ["X-Mqstore-Timestamp-Ms", "X-Mqstore-Content-Sha256",
                                    "X-Mqstore-Signature"])
def test_a_missing_signed_header_is_refused(store_dir: Path, header: str) -> None:
    async def scenario(writer_client: Client, *_: Any) -> None:
        headers = sign_headers(access_key="producer1", secret_key="producer-secret",
                               method="POST", target="/v1/topics/Orders/messages",
                               body=message())
        del headers[header]
        response = await writer_client.post("/v1/topics/Orders/messages", data=message(),
                                            headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"] == "MQSTORE-HMAC-SHA256"

    run(store_dir, scenario)


def test_every_route_has_its_row(store_dir: Path) -> None:
    """A route added without a row would need an admin: say what it needs instead."""
    async def scenario(*parts: Any) -> None:
        for client, rules in zip(parts[:3], (WRITER_RULES, NOTIFIER_RULES, INDEXER_RULES),
                                 strict=True):
            routes = {(route.method, route.resource.canonical)
                      for route in client.server.app.router.routes()
                      if route.resource is not None and route.method != "HEAD"}
            assert routes == set(rules), routes ^ set(rules)

    run(store_dir, scenario)
