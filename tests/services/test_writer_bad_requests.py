"""Bad requests get 4xx with a reason, and nothing reaches the disk."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import pytest

from mqstore.services.common.http.batch_wire import BATCH_MEDIA_TYPE, BatchCodec, WireMessage
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.storage import MessageStore
from tests.services.serving import run, writer_client

JSON = {"Content-Type": "application/json"}
BATCH = {"Content-Type": BATCH_MEDIA_TYPE}
ONE = "/v1/topics/T/messages"
MANY = "/v1/topics/T/messages/batch"
SETTINGS = WriterSettings(topic_queue_count=4, batch_messages_max=50,
                          request_body_size_bytes_max=40_000)
"""small_config: bodies up to 16 KiB, bodies of one put up to 32 KiB."""


@dataclass(frozen=True)
class Case:
    path: str
    body: bytes
    status: int
    error: str
    reason: str
    headers: tuple[tuple[str, str], ...] = tuple(JSON.items())


def _json(document: object) -> bytes:
    return json.dumps(document).encode()


def _batch(*messages: WireMessage) -> bytes:
    return BatchCodec.encode(messages)


GOOD = _batch(WireMessage("T", b"a"), WireMessage("T", b"b"))
CASES = {
    "topic character": Case("/v1/topics/bad%20topic/messages", _json({"body": "x"}), 400,
                            "MESSAGE_ILLEGAL", "illegal character ' '"),
    "topic too long": Case(f"/v1/topics/{'t' * 200}/messages", _json({"body": "x"}), 400,
                           "MESSAGE_ILLEGAL", "the maximum is 127"),
    "junk json": Case(ONE, b'{"body": "x",', 400, "BAD_REQUEST", "not valid JSON"),
    "not utf-8": Case(ONE, b'{"body": "\xff"}', 400, "BAD_REQUEST", "not UTF-8"),
    "json array": Case(ONE, _json(["x"]), 400, "BAD_REQUEST", "must be a JSON object"),
    "unknown field": Case(ONE, _json({"body": "x", "queue": 1}), 400, "BAD_REQUEST",
                          "unknown field(s) ['queue']"),
    "two bodies": Case(ONE, _json({"body": "x", "body_base64": "eA=="}), 400, "BAD_REQUEST",
                       "exactly one of body"),
    "body a number": Case(ONE, _json({"body": 5}), 400, "BAD_REQUEST", "must be a string"),
    "bad base64": Case(ONE, _json({"body_base64": "!!"}), 400, "BAD_REQUEST", "base64"),
    "empty body": Case(ONE, _json({"body": ""}), 400, "MESSAGE_ILLEGAL", "is empty"),
    "negative queue id": Case(ONE, _json({"body": "x", "queue_id": -1}), 400,
                              "MESSAGE_ILLEGAL", "queue_id=-1 must be in 0..3"),
    "queue id past the count": Case(ONE, _json({"body": "x", "queue_id": 4}), 400,
                                    "MESSAGE_ILLEGAL", "topic_queue_count=4"),
    "queue id a string": Case(ONE, _json({"body": "x", "queue_id": "1"}), 400,
                              "MESSAGE_ILLEGAL", "integer or null"),
    "keys a string": Case(ONE, _json({"body": "x", "keys": "k"}), 400, "MESSAGE_ILLEGAL",
                          "list of strings"),
    "key with a space": Case(ONE, _json({"body": "x", "keys": ["a b"]}), 400,
                             "MESSAGE_ILLEGAL", "without spaces"),
    "reserved property": Case(ONE, _json({"body": "x", "properties": {"KEYS": "k"}}), 400,
                              "MESSAGE_ILLEGAL", "use the tags and keys fields"),
    "lone surrogate": Case(ONE, b'{"body": "x", "tags": "\\ud800"}', 400, "MESSAGE_ILLEGAL",
                           "lone surrogate"),
    "oversize body": Case(ONE, _json({"body": "x" * 20_000}), 413, "MESSAGE_ILLEGAL",
                          "message_body_size_bytes_max"),
    "oversize request": Case(ONE, _json({"body": "x" * 50_000}), 413,
                             "REQUEST_ENTITY_TOO_LARGE", "40000"),
    "wrong content type": Case(ONE, _json({"body": "x"}), 415, "UNSUPPORTED_MEDIA_TYPE",
                               "application/json", (("Content-Type", "text/plain"),)),
    "batch not a list": Case(MANY, _json({"messages": {}}), 400, "BAD_REQUEST",
                             "array of 1..50"),
    "batch empty": Case(MANY, _json({"messages": []}), 400, "BAD_REQUEST", "array of 1..50"),
    "batch too many": Case(MANY, _json({"messages": [{"body": "x"}] * 51}), 400,
                           "BAD_REQUEST", "array of 1..50"),
    "batch extra field": Case(MANY, _json({"messages": [{"body": "x"}], "x": 1}), 400,
                              "BAD_REQUEST", 'one field, "messages"'),
    "batch illegal third": Case(MANY, _json({"messages": [
        {"body": "x"}, {"body": "y"}, {"body": "z", "queue_id": 9}]}), 400, "MESSAGE_ILLEGAL",
        "messages[2].queue_id=9"),
    "batch store refuses third": Case(MANY, _json({"messages": [
        {"body": "x"}, {"body": "y"}, {"body": "z", "properties": {"a\u0001": "b"}}]}), 400,
        "MESSAGE_ILLEGAL", "message 2 of the batch"),
    "batch bodies too big": Case(MANY, _json({"messages": [{"body": "x" * 12_000}] * 3}),
                                 413, "MESSAGE_ILLEGAL", "put_batch_size_bytes_max"),
    "binary wrong content type": Case("/v1/batch", GOOD, 415, "UNSUPPORTED_MEDIA_TYPE",
                                      BATCH_MEDIA_TYPE),
    "binary truncated": Case("/v1/batch", GOOD[:-1], 400, "BAD_REQUEST",
                             "message 1 at byte", tuple(BATCH.items())),
    "binary trailing bytes": Case("/v1/batch", GOOD + b"\0", 400, "BAD_REQUEST",
                                  "1 trailing bytes", tuple(BATCH.items())),
    "binary bad magic": Case("/v1/batch", b"MQSX" + GOOD[4:], 400, "BAD_REQUEST",
                             "magic", tuple(BATCH.items())),
    "binary count too big": Case("/v1/batch", GOOD[:6] + struct.pack(">I", 51) + GOOD[10:],
                                 400, "BAD_REQUEST", "1..50", tuple(BATCH.items())),
    "binary topic character": Case("/v1/batch", _batch(
        WireMessage("T", b"a"), WireMessage("T.x", b"b")), 400, "MESSAGE_ILLEGAL",
        "message[1].topic", tuple(BATCH.items())),
    "binary negative queue id": Case("/v1/batch", GOOD[:10] + struct.pack(">i", -5) + GOOD[14:],
                                     400, "MESSAGE_ILLEGAL", "message[0].queue_id=-5",
                                     tuple(BATCH.items())),
    "unknown route": Case("/v1/topics/T/nothing", b"", 404, "NOT_FOUND", "/v1/topics/T/nothing"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_request_is_refused_with_a_reason_and_writes_nothing(store: MessageStore,
                                                                 case: Case) -> None:
    before = (store.written_position, store.next_queue_offset("T", 0))

    async def scenario() -> tuple[int, dict[str, dict[str, str]]]:
        async with writer_client(store, SETTINGS) as client:
            response = await client.post(case.path, data=case.body, headers=dict(case.headers))
            return response.status, await response.json()

    status, answer = run(scenario)
    assert (status, answer["error"]["status"]) == (case.status, case.error), answer
    assert case.reason in answer["error"]["reason"]
    assert (store.written_position, store.next_queue_offset("T", 0)) == before


def test_method_not_allowed_names_the_allowed_one(store: MessageStore) -> None:
    async def scenario() -> tuple[int, str, dict[str, dict[str, str]]]:
        async with writer_client(store) as client:
            response = await client.get(ONE)
            return response.status, response.headers["Allow"], await response.json()

    status, allow, answer = run(scenario)
    assert (status, allow, answer["error"]["status"]) == (405, "POST", "METHOD_NOT_ALLOWED")
    assert "GET" in answer["error"]["reason"]
