"""The writer's and the notifier's OpenAPI documents are exactly as strict as the servers.

Each `REFUSED` request breaks one rule the server checks: the document must refuse it too
(before issue 17 the documents let all of these through: nine operations accepted in the
schema what the server refuses), and the server must refuse it (so the rule is real).  Each
`TAKEN` request sits on a bound: the document takes it and so does the server (the document
is not stricter than the server).  The fuzz test (test_openapi_fuzz.py) then tries many
more schema-valid requests against each service.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.common.settings.config_file import NotifierSettings, WriterSettings
from mqstore.services.notifier.openapi import notifier_openapi
from mqstore.services.writer.openapi import writer_openapi
from mqstore.storage import Message, MessageStore, StoreConfig
from mqstore.storage.dispatch.indexer import Indexer
from tests.services.notifier_stack import notifier_app, settings
from tests.services.schema_check import check
from tests.services.serving import run, writer_client
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

WRITER_SETTINGS = WriterSettings(topic_queue_count=4, batch_messages_max=3)
NOTIFIER_SETTINGS = settings(pull_messages_max=50, pull_wait_ms_max=20)
SMALL_PULLS = settings(pull_messages_max=16)
"""Below the default max_messages (32)."""
TOPIC_MAX = "T" * writer_config().topic_size_bytes_max
JSON = {"Content-Type": "application/json"}


@dataclasses.dataclass(frozen=True)
class Call:
    """One request, with its parameters as the document types them."""

    method: str
    template: str
    path: dict[str, Any] = dataclasses.field(default_factory=dict)
    query: dict[str, Any] = dataclasses.field(default_factory=dict)
    body: Any = None

    def url(self) -> str:
        return self.template.format(**{name: str(value) for name, value in self.path.items()})


def _put(body: Any, topic: str = "T") -> Call:
    return Call("post", "/v1/topics/{topic}/messages", {"topic": topic}, body=body)


def _batch(*messages: Any) -> Call:
    return Call("post", "/v1/topics/{topic}/messages/batch", {"topic": "T"},
                body={"messages": list(messages)})


PULL = "/v1/topics/{topic}/queues/{queue_id}/messages"
POLL = "/v1/groups/{group}/topics/{topic}/poll"
OFFSETS = "/v1/groups/{group}/offsets"
BY_KEY = "/v1/topics/{topic}/messages"
BY_TIME = "/v1/topics/{topic}/queues/{queue_id}/offset-by-time"


def _pull(**query: Any) -> Call:
    return Call("get", PULL, {"topic": "Orders", "queue_id": 0}, {"offset": 0, **query})


def _poll(body: Any) -> Call:
    return Call("post", POLL, {"group": "g", "topic": "Orders"}, body=body)


def _commit(body: Any) -> Call:
    return Call("post", OFFSETS, {"group": "g"}, body=body)


WRITER_REFUSED = {
    "body and body_base64": _put({"body": "a", "body_base64": "YQ=="}),
    "neither body": _put({"tags": "t"}),
    "empty body": _put({"body": ""}),
    "empty body_base64": _put({"body_base64": ""}),
    "body_base64 not base64": _put({"body_base64": "YQ"}),
    "queue_id over topic_queue_count": _put({"body": "a", "queue_id": 4}),
    "empty tags": _put({"body": "a", "tags": ""}),
    "separator in tags": _put({"body": "a", "tags": "a\x01b"}),
    "space in a key": _put({"body": "a", "keys": ["a b"]}),
    "empty key": _put({"body": "a", "keys": [""]}),
    "reserved property": _put({"body": "a", "properties": {"TAGS": "x"}}),
    "empty property name": _put({"body": "a", "properties": {"": "x"}}),
    "empty property value": _put({"body": "a", "properties": {"p": ""}}),
    "topic over topic_size_bytes_max": _put({"body": "a"}, TOPIC_MAX + "T"),
    "padding topic": _put({"body": "a"}, "rmq_sys_mqstore_padding"),
    "batch over batch_messages_max": _batch(*[{"body": "a"}] * 4),
    "batch message with both bodies": _batch({"body": "a", "body_base64": "YQ=="}),
}
WRITER_TAKEN = {
    "longest topic, last queue": _put({"body": "a", "queue_id": 3}, TOPIC_MAX),
    "base64 body, tags, keys, properties": _put({
        "body_base64": "AAE=", "tags": "t", "keys": ["k1", "k2"], "properties": {"p": "v"}}),
    "batch at batch_messages_max": _batch(*[{"body": "a"}] * 3),
    "queue_id written 3.0 (an integer to JSON Schema)": _put({"body": "a", "queue_id": 3.0}),
}
NOTIFIER_REFUSED = {
    "pull: topic over topic_size_bytes_max": Call("get", PULL, {
        "topic": TOPIC_MAX + "T", "queue_id": 0}, {"offset": 0}),
    "pull: queue_id over 2^31-1": Call("get", PULL, {"topic": "Orders", "queue_id": 1 << 31},
                                       {"offset": 0}),
    "pull: offset over 2^63-1": _pull(offset=1 << 63),
    "pull: max_messages over pull_messages_max": _pull(max_messages=51),
    "pull: wait_ms over pull_wait_ms_max": _pull(wait_ms=21),
    "pull: empty tag": _pull(tags="a||"),
    "pull: '|' in a tag": _pull(tags="a|||b"),
    "poll: max_messages over pull_messages_max": _poll({"max_messages": 51}),
    "poll: wait_ms over pull_wait_ms_max": _poll({"wait_ms": 21}),
    "poll: blank tag": _poll({"tags": [" "]}),
    "poll: 33 tags": _poll({"tags": [f"t{n}" for n in range(33)]}),
    "poll: offsets key not a queue id": _poll({"offsets": {"x": 0}}),
    "poll: offsets key over 2^31-1": _poll({"offsets": {str(1 << 31): 0}}),
    "poll: offset over 2^63-1": _poll({"offsets": {"0": 1 << 63}}),
    "commit: topic with a space": _commit({"topic": "a b", "offsets": {"0": 1}}),
    "commit: offsets key with a leading zero": _commit({"topic": "O", "offsets": {"01": 1}}),
    "fetch: topic with a space": Call("get", OFFSETS, {"group": "g"}, {"topic": "a b"}),
    "by key: key with a space": Call("get", BY_KEY, {"topic": "Orders"}, {"key": "a b"}),
    "by key: begin_ms over 2^62": Call("get", BY_KEY, {"topic": "Orders"}, {
        "key": "k", "begin_ms": (1 << 62) + 1}),
    "by key: max_messages over index_query_results_max": Call(
        "get", BY_KEY, {"topic": "Orders"}, {"key": "k", "max_messages": 65}),
    "by time: timestamp_ms over 2^62": Call("get", BY_TIME, {"topic": "Orders", "queue_id": 0},
                                            {"timestamp_ms": (1 << 62) + 1}),
    "message at: physical_offset over 2^63-1": Call("get", "/v1/messages/{physical_offset}",
                                                    {"physical_offset": 1 << 63}),
    "queues: topic over topic_size_bytes_max": Call("get", "/v1/topics/{topic}/queues",
                                                    {"topic": TOPIC_MAX + "T"}),
}
NOTIFIER_TAKEN = {
    "pull at every bound": _pull(offset=(1 << 63) - 1, max_messages=50, wait_ms=0,
                                 tags=" a || * "),
    "poll at every bound": _poll({"max_messages": 50, "wait_ms": 0, "tags": ["a", "b"],
                                  "offsets": {str((1 << 31) - 1): (1 << 63) - 1}}),
    "commit, longest topic": _commit({"topic": TOPIC_MAX, "offsets": {"0": 1}}),
    "poll with integers written 5.0": _poll({"max_messages": 5.0, "offsets": {"0": 1.0}}),
    "by key at every bound": Call("get", BY_KEY, {"topic": "Orders"}, {
        "key": "k0", "begin_ms": 1 << 62, "end_ms": 1 << 62, "max_messages": 64}),
    "by time at every bound": Call("get", BY_TIME, {"topic": "Orders",
                                                    "queue_id": (1 << 31) - 1},
                                   {"timestamp_ms": 1 << 62}),
}


def document_refusal(document: dict[str, Any], call: Call) -> str | None:
    """Why `document` refuses `call`, or None if it takes it."""
    operation = document["paths"][call.template][call.method]
    given = {"path": call.path, "query": call.query}
    try:
        for parameter in operation.get("parameters", []):
            value = given[parameter["in"]].get(parameter["name"])
            if value is None:
                assert not parameter["required"], f"{parameter['name']} is required"
                continue
            check(value, parameter["schema"], root=document, where=parameter["name"])
        if "requestBody" in operation:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            check(call.body, schema, root=document, where="body")
    except AssertionError as error:
        return str(error)
    return None


@pytest.mark.parametrize("call", WRITER_REFUSED.values(), ids=WRITER_REFUSED.keys())
def test_writer_document_refuses_what_the_writer_refuses(store: MessageStore,
                                                          call: Call) -> None:
    assert document_refusal(writer_openapi(store.config, WRITER_SETTINGS), call) is not None
    # 403: the reserved padding topic is a system topic (services/writer/topic_gate.py).
    assert _writer_status(store, call) in (400, 403, 413)


@pytest.mark.parametrize("call", WRITER_TAKEN.values(), ids=WRITER_TAKEN.keys())
def test_writer_document_takes_what_the_writer_takes(store: MessageStore, call: Call) -> None:
    assert document_refusal(writer_openapi(store.config, WRITER_SETTINGS), call) is None
    assert _writer_status(store, call) == 200


@pytest.fixture(scope="module")
def quiet_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store_dir = tmp_path_factory.mktemp("store")
    with MessageStore.open(store_dir, writer_config()) as writer, \
            Indexer.open(store_dir, indexer_config()) as indexer:
        assert writer.put(Message("Orders", 0, b"m", tags="a", keys=["k0"])).ok
        wait_dispatched(indexer, writer.committed_position)
    return store_dir


@pytest.mark.parametrize("call", NOTIFIER_REFUSED.values(), ids=NOTIFIER_REFUSED.keys())
def test_notifier_document_refuses_what_the_notifier_refuses(quiet_store: Path,
                                                              call: Call) -> None:
    document = notifier_openapi(indexer_config(), NOTIFIER_SETTINGS)
    assert document_refusal(document, call) is not None
    assert _notifier_status(quiet_store, NOTIFIER_SETTINGS, call) == 400


@pytest.mark.parametrize("call", NOTIFIER_TAKEN.values(), ids=NOTIFIER_TAKEN.keys())
def test_notifier_document_takes_what_the_notifier_takes(quiet_store: Path,
                                                          call: Call) -> None:
    document = notifier_openapi(indexer_config(), NOTIFIER_SETTINGS)
    assert document_refusal(document, call) is None
    assert _notifier_status(quiet_store, NOTIFIER_SETTINGS, call) == 200


def test_each_service_serves_the_document_of_its_own_settings(store: MessageStore) -> None:
    async def scenario() -> dict[str, Any]:
        async with writer_client(store, WRITER_SETTINGS) as client:
            return await (await client.get("/openapi.json")).json()  # type: ignore[no-any-return]

    served = run(scenario)
    assert served == json.loads(json.dumps(writer_openapi(store.config, WRITER_SETTINGS)))
    assert served != json.loads(json.dumps(writer_openapi(StoreConfig(), WriterSettings())))


@pytest.mark.parametrize("call", [_pull(), _poll({})], ids=["pull", "poll"])
def test_without_max_messages_the_default_never_exceeds_pull_messages_max(
        quiet_store: Path, call: Call) -> None:
    document = notifier_openapi(indexer_config(), SMALL_PULLS)
    assert document_refusal(document, call) is None
    assert _notifier_status(quiet_store, SMALL_PULLS, call) == 200


def test_a_number_too_long_to_read_is_a_bad_request_not_a_server_error(
        store: MessageStore, quiet_store: Path) -> None:
    """Python reads at most 4,300 digits into an int; past that json.loads raises a plain
    ValueError, which the services answered with 500."""
    huge = b'{"body": "a", "queue_id": ' + b"1" * 5000 + b"}"

    async def writer() -> int:
        async with writer_client(store, WRITER_SETTINGS) as client:
            return (await client.post("/v1/topics/T/messages", data=huge, headers=JSON)).status

    async def notifier() -> int:
        async with notifier_app(quiet_store, NOTIFIER_SETTINGS) as (client, _, _):
            return (await client.post("/v1/groups/g/topics/Orders/poll", headers=JSON,
                                      data=b'{"wait_ms": ' + b"1" * 5000 + b"}")).status

    assert run(writer) == 400
    assert run(notifier) == 400


def _writer_status(store: MessageStore, call: Call) -> int:
    async def scenario() -> int:
        async with writer_client(store, WRITER_SETTINGS) as client:
            response = await client.request(call.method, call.url(), json=call.body)
            return response.status

    return run(scenario)


def _notifier_status(store_dir: Path, notifier_settings: NotifierSettings, call: Call) -> int:
    async def scenario() -> int:
        async with notifier_app(store_dir, notifier_settings) as (client, _, _):
            query = {name: str(value) for name, value in call.query.items()}
            response = await client.request(call.method, call.url(), params=query,
                                            json=call.body)
            return response.status

    return run(scenario)
