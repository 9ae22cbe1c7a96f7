"""Fuzz each service with schema-valid requests generated from the OpenAPI document it serves.

A writer, an indexer and a notifier run on one store directory, each on 127.0.0.1 from a
thread of its own (the notifier follows the indexer's notice stream, as in production).
For every operation of each served document, `EXAMPLES_PER_OPERATION` requests are generated
from the document alone (positive mode: every one valid by the schemas) and sent; each
answer must be:

* no server error (5xx);
* no refusal (4xx): a schema-valid request refused means the document and the server
  disagree, except for the few refusals that only the server's state or a sum over fields
  can decide, listed narrowly in `DECIDED_BY_STATE`;
* documented: its status, Content-Type, headers and body as the document says.

The notice stream (`GET /v1/notices`) never ends and is left out; its first line is checked
against the document in test_indexer_openapi.py.  The binary batch (`POST /v1/batch`) has a
layout no JSON Schema states: its bodies come from `batch_bodies`, built from the same
patterns as the JSON messages.  Examples are derandomized: the same requests every run, so
a failure is a mismatch and never a roll of the dice (set `DERANDOMIZE = False` to explore).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage
from mqstore.services.common.links.forward_wire import ForwardAnswer, ForwardRequest
from mqstore.services.common.settings.config_file import IndexerSettings, WriterSettings
from mqstore.services.indexer.app import create_app as create_indexer_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.indexer.openapi import indexer_openapi
from mqstore.services.notifier import create_app as create_notifier_app
from mqstore.services.notifier.openapi import notifier_openapi
from mqstore.services.writer import create_app as create_writer_app
from mqstore.services.writer.openapi import writer_openapi
from mqstore.services.writer.requests import KEY_PATTERN, TEXT_PATTERN
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.format.padding import PADDING_TOPIC
from mqstore.storage.format.properties import decode_properties
from mqstore.storage.reads.store_view import StoreView
from tests.services.notifier_stack import settings as notifier_settings
from tests.services.serving import app_on_thread
from tests.storage.dispatch.split_helpers import (
    indexer_config,
    wait_dispatched,
    writer_config,
)

EXAMPLES_PER_OPERATION = 50
"""29 operations × 50 requests: about 15 s here, under a minute on a busy 2-core machine
(300 per operation, run once by hand with random examples, took 84 s and found nothing more)."""
DERANDOMIZE = True
WRITER_SETTINGS = WriterSettings(topic_queue_count=4, batch_messages_max=8)
NOTIFIER_SETTINGS = notifier_settings(pull_messages_max=16, pull_wait_ms_max=20)
"""Small bounds keep generated batches short and held pulls brief (20 ms at most)."""
EXCLUDED = {("indexer", "GET /v1/notices")}
DECIDED_BY_STATE: dict[tuple[str, str], Callable[[int, str], bool]] = {
    # No record starts at most positions: only the log's contents say which do.
    ("notifier", "GET /v1/messages/{physical_offset}"):
        lambda status, reason: status == 404,
    # Only the log says which queue offsets hold a message; a group name that is valid may
    # make a retry topic name too long (the sum of two lengths).
    ("notifier", "POST /v1/groups/{group}/nacks"):
        lambda status, reason: (status == 404 and "no message at offset" in reason)
        or (status == 400 and ("has no retry topic" in reason or "system topic" in reason)),
    # Only a topic the table holds can be deleted.
    ("notifier", "DELETE /v1/topics/{topic}"):
        lambda status, reason: status == 404 and reason.endswith("does not exist"),
    # Sums in bytes no schema can bound: a text body's UTF-8 size (the schema counts
    # characters) and the encoded size of all properties with tags and keys.
    ("writer", "POST /v1/topics/{topic}/messages"):
        lambda status, reason: (status == 413 and "message_body_size_bytes_max" in reason)
        or (status == 400 and "bytes encoded; the maximum is" in reason),
    ("writer", "POST /v1/topics/{topic}/messages/batch"):
        lambda status, reason: (status == 413 and "_size_bytes_max" in reason)
        or (status == 400 and "bytes encoded; the maximum is" in reason),
    ("writer", "POST /v1/batch"):
        lambda status, reason: status == 400 and "bytes encoded; the maximum is" in reason,
}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


def batch_bodies() -> st.SearchStrategy[bytes]:
    """Valid `application/x-mqstore-batch` bodies: what `BatchCodec` and the writer take."""
    text = st.from_regex(TEXT_PATTERN, fullmatch=True).filter(lambda t: len(t) < 64)
    message = st.builds(
        WireMessage,
        topic=st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True).filter(
            lambda topic: topic != PADDING_TOPIC),
        body=st.binary(min_size=1, max_size=256),
        queue_id=st.none() | st.integers(0, WRITER_SETTINGS.topic_queue_count - 1),
        tags=st.none() | text,
        keys=st.lists(st.from_regex(KEY_PATTERN, fullmatch=True), max_size=3).map(tuple),
        properties=st.none() | st.dictionaries(text.filter(
            lambda name: name not in ("TAGS", "KEYS")), text, max_size=3))
    return st.lists(message, min_size=1, max_size=WRITER_SETTINGS.batch_messages_max).map(
        BatchCodec.encode)


schemathesis.openapi.media_type(BATCH_MEDIA_TYPE, batch_bodies())


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """{"writer": url, "indexer": url, "notifier": url} of the three services on one
    directory, with a few messages already stored and dispatched."""
    store_dir = tmp_path_factory.mktemp("store")
    indexer_loop = asyncio.new_event_loop()
    queues: list[Indexer] = []
    hub = NoticeHub(batch_latency_ms=2, subscriber_lines_max=10_000, snapshot=lambda: [
        (q.topic, q.queue_id, q.min_offset, q.max_offset) for q in queues[0].queues])
    with contextlib.ExitStack() as stack:
        writer = stack.enter_context(MessageStore.open(store_dir, writer_config()))
        indexer = stack.enter_context(Indexer.open(store_dir, indexer_config(),
                                                   listener=hub.threadsafe(indexer_loop)))
        queues.append(indexer)
        for n in range(4):
            assert writer.put(Message("Orders", n, b"m", tags="a", keys=[f"k{n}"])).ok
        wait_dispatched(indexer, writer.committed_position)
        indexer_url = stack.enter_context(app_on_thread(
            create_indexer_app(indexer, hub, IndexerSettings()), loop=indexer_loop))
        view = stack.enter_context(StoreView.open(store_dir, indexer_config()))
        offsets = ConsumerOffsets(store_dir, lock_timeout_ms=1000)
        notifier = create_notifier_app(view, offsets, notifier_settings(
            indexer_url=indexer_url, pull_messages_max=NOTIFIER_SETTINGS.pull_messages_max,
            pull_wait_ms_max=NOTIFIER_SETTINGS.pull_wait_ms_max),
            writer_link=StoringLink(writer))
        yield {"writer": stack.enter_context(app_on_thread(create_writer_app(
                   writer, WRITER_SETTINGS))),
               "indexer": indexer_url,
               "notifier": stack.enter_context(app_on_thread(notifier))}
        hub.close()


class StoringLink:
    """Nacks' copies put straight into the writer's store (the forward listener's routing
    of them is tests/services/test_nacks.py's)."""

    def __init__(self, writer: MessageStore) -> None:
        self._writer = writer

    async def send(self, request: ForwardRequest) -> ForwardAnswer:
        result = self._writer.put(Message(request.topic, request.queue_id, request.body,
                                          properties=decode_properties(request.properties)))
        if not result.ok:  # a refusal (disk full, ...) is answered, as the forward listener does
            return ForwardAnswer(request.request_id, result.status.value, [], result.reason)
        return ForwardAnswer(request.request_id, result.status.value, [
            (result.queue_offset, result.physical_offset, result.store_timestamp_ms)], "")

    async def close(self) -> None:
        pass


def _operations() -> list[tuple[str, str]]:
    documents = {"writer": writer_openapi(writer_config(), WRITER_SETTINGS),
                 "indexer": indexer_openapi(),
                 "notifier": notifier_openapi(indexer_config(), NOTIFIER_SETTINGS)}
    return [(service, f"{method.upper()} {path}")
            for service, document in documents.items()
            for path, item in document["paths"].items() for method in item
            if (service, f"{method.upper()} {path}") not in EXCLUDED]


@pytest.mark.parametrize(("service", "label"), _operations(),
                         ids=[" ".join(each) for each in _operations()])
def test_schema_valid_requests_are_served_as_documented(services: dict[str, str],
                                                        service: str, label: str) -> None:
    url = services[service]
    document = requests.get(f"{url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(document)
    schema.hook(map_path_parameters)
    operation = schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is not in the {service}'s served document"
    decided_by_state = DECIDED_BY_STATE.get((service, label), lambda status, reason: False)
    session = requests.Session()

    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
              derandomize=DERANDOMIZE, phases=[Phase.explicit, Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(GenerationMode.POSITIVE))
    def fuzz(case: Any) -> None:
        response = case.call(base_url=url, session=session, timeout=30)
        case.validate_response(response, checks=CHECKS)
        if response.status_code >= 400:
            reason = _reason(response)
            assert decided_by_state(response.status_code, reason), (
                f"{label}: a schema-valid request was refused {response.status_code}: "
                f"{reason}")

    with session:
        fuzz()


def map_path_parameters(context: Any, path_parameters: dict[str, Any] | None
                        ) -> dict[str, Any] | None:
    """Escape "%" in generated path values: the fuzzer reads "%01" in a value as an escape
    already made (it sends the byte 0x01), but "%" is a legal name character (`%RETRY%`)."""
    if path_parameters is None:
        return None
    return {name: value.replace("%", "%25") if isinstance(value, str) else value
            for name, value in path_parameters.items()}


def _reason(response: Any) -> str:
    try:
        return str(response.json()["error"]["reason"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def test_every_operation_is_fuzzed_but_the_notice_stream(services: dict[str, str]) -> None:
    served = {(service, f"{method.upper()} {path}")
              for service, url in services.items()
              for path, item in requests.get(f"{url}/openapi.json", timeout=10).json()[
                  "paths"].items() for method in item}
    assert served - set(_operations()) == EXCLUDED
    assert set(_operations()) <= served


def test_the_served_writer_document_is_built_from_its_settings(
        services: dict[str, str]) -> None:
    document = requests.get(f"{services['writer']}/openapi.json", timeout=10).json()
    message = document["components"]["schemas"]["Message"]
    assert message["properties"]["queue_id"]["maximum"] == WRITER_SETTINGS.topic_queue_count - 1
    batch = document["paths"]["/v1/topics/{topic}/messages/batch"]["post"]["requestBody"]
    assert batch["content"]["application/json"]["schema"]["properties"]["messages"][
        "maxItems"] == WRITER_SETTINGS.batch_messages_max
