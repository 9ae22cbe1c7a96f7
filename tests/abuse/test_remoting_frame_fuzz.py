"""The remoting frame fuzzer (issue 22's deliverable, beside the OpenAPI fuzz): seeded,
bounded in time, over every served code.

Each case is a request of a served code (or a stray one) with header fields drawn from the
names the handlers read and from hostile values (lone surrogates, huge numbers, nesting, long
text), a body drawn from valid and broken JSON bodies and random bytes, written with a JSON
or a binary (ROCKETMQ) header, then possibly mutated byte by byte.  Asserted:

* decoding either gives a command or raises `FrameError` (the connection closes cleanly);
* `answer_to` answers every request (None only for a response or a oneway one) with a code,
  a remark whenever the code is not SUCCESS, and an answer that encodes;
* a live `RemotingServer` on 127.0.0.1 answers or closes the connection for every frame,
  and still answers a good request afterwards;
* nothing is logged at ERROR and nothing with a traceback.

`MQSTORE_FUZZ_SEED` replays another seed; the budget is about 20 s in all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import os
import random
import time
from pathlib import Path

import pytest

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting import codes
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import (
    BINARY_FIXED,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    Command,
    FrameError,
    decode,
    encode,
)
from mqstore.services.notifier.remoting.routing import HANDLERS
from mqstore.services.notifier.remoting.server import answer_to
from mqstore.services.notifier.remoting.service import RemotingFront
from tests.abuse.remoting_live import read_frame, serving, tracebacks_and_errors
from tests.remoting.client import heartbeat

SEED = int(os.environ.get("MQSTORE_FUZZ_SEED", "22"))
HANDLER_BUDGET_S = 8.0
LIVE_BUDGET_S = 8.0
LIVE_ANSWER_TIMEOUT_S = 3.0
"""Longest wait for a frame's answer or close: the fuzz server's idle timeout (below) closes
a connection whose frame claims more bytes than were sent well within it."""
FUZZ_SETTINGS = RemotingSettings(port=0, pull_suspend_ms_max=20, idle_timeout_ms=400,
                                 writer_timeout_ms=500)
CODES = [*sorted(HANDLERS), codes.CONSUMER_SEND_MSG_BACK, 4242, -1]
FIELDS = ("topic", "consumerGroup", "group", "queueId", "queueOffset", "maxMsgNums",
          "sysFlag", "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription",
          "expressionType", "clientID", "timestamp", "isForce", "key", "maxNum",
          "beginTimestamp", "endTimestamp", "offset", "msgId", "readQueueNums",
          "writeQueueNums", "perm", "defaultTopic", "topicFilterType", "producerGroup",
          "bornTimestamp", "flag", "properties", "reconsumeTimes", "batch", "cluster",
          "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m")
VALUES = ("", "0", "1", "-1", "7", "2147483648", "-9223372036854775809", "9" * 40, "abc",
          "\ud800", "a\udfffb", "TBW102", "%RETRY%cg", "%DLQ%cg", "t", "cg", "é", "x" * 300,
          " 5 ", "true", "1e3", "*", "a || b", "SQL92", "TAG", "RMQ_SYS_TRACE_TOPIC",
          "\x00", "127.0.0.1:1", "0A000009000027100000000000000000")
STRUCTURED = (None, 5, -1.5, True, [], {}, [1, [2, [3]]], {"a": {"b": None}}, 10 ** 30)


def _bodies(rng: random.Random) -> bytes:  # noqa: PLR0911 (one return per kind of body)
    choice = rng.randrange(9)
    if choice == 0:
        return b""
    if choice == 1:
        return rng.randbytes(rng.randrange(1, 300))
    if choice == 2:
        return heartbeat(rng.choice(VALUES) or "c@1", rng.choice(VALUES), rng.choice(VALUES))
    if choice == 3:
        depth = rng.choice((50, 990, 5000))
        return ("[" * depth + "]" * depth).encode()
    if choice == 4:
        return json.dumps({"consumerGroup": rng.choice(VALUES), "clientId": "c",
                           "mqSet": [{"topic": rng.choice(VALUES), "brokerName": "mqstore",
                                      "queueId": rng.choice((0, -1, 2 ** 40, "0", None))}]
                          }).encode()
    if choice == 5:
        return json.dumps({"clientID": rng.choice(VALUES), "consumerDataSet": rng.choice(
            ([{"groupName": rng.choice(VALUES), "subscriptionDataSet": [{}]}], {}, [5], None)),
            "producerDataSet": [{"groupName": rng.choice(STRUCTURED)}]}).encode()
    if choice == 6:
        return b'{"clientID":"\\ud800","consumerDataSet":[{"groupName":"\\udfff"}]}'
    if choice == 7:
        return json.dumps(rng.choice(STRUCTURED)).encode()
    return bytes(rng.choice(VALUES), "utf-8", "surrogatepass")


def _ext(rng: random.Random) -> dict[str, object]:
    ext: dict[str, object] = {}
    for _ in range(rng.randrange(12)):
        value: object = rng.choice(VALUES) if rng.random() < 0.9 else rng.choice(STRUCTURED)
        ext[rng.choice(FIELDS) if rng.random() < 0.95 else rng.choice(VALUES)] = value
    return ext


def _json_header(rng: random.Random, code: int, opaque: int, flag: int) -> bytes:
    if rng.random() < 0.05:
        depth = rng.choice((990, 3000, 100_000))
        nested = "[" * depth + "]" * depth
        return f'{{"code":{code},"opaque":{opaque},"extFields":{{"topic":{nested}}}}}'.encode()
    document: dict[str, object] = {"code": code, "opaque": opaque, "flag": flag,
                                   "language": rng.choice(("JAVA", "GO", 7, 99, None)),
                                   "version": rng.choice((401, 0, -1, "x")),
                                   "extFields": _ext(rng)}
    if rng.random() < 0.3:
        document["remark"] = rng.choice(VALUES)
    if rng.random() < 0.05:
        document[rng.choice(("code", "opaque", "flag", "extFields"))] = rng.choice(STRUCTURED)
    return json.dumps(document).encode()


def _binary_header(rng: random.Random, code: int, opaque: int, flag: int) -> bytes:
    ext = b""
    for key, value in _ext(rng).items():
        key_bytes = key.encode("utf-8", "surrogatepass")[:0x7FFF]
        value_bytes = str(value).encode("utf-8", "surrogatepass")
        ext += (len(key_bytes).to_bytes(2, "big") + key_bytes
                + len(value_bytes).to_bytes(4, "big") + value_bytes)
    remark = rng.choice(VALUES).encode("utf-8", "surrogatepass")
    return (BINARY_FIXED.pack(code & 0x7FFF, rng.randrange(20), 401, opaque, flag)
            + len(remark).to_bytes(4, "big") + remark + len(ext).to_bytes(4, "big") + ext)


def _mutate(rng: random.Random, frame: bytearray) -> bytearray:
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(4)
        if kind == 0 and len(frame) > 4:
            frame[rng.randrange(4, len(frame))] = rng.randrange(256)
        elif kind == 1 and len(frame) > 8:
            del frame[rng.randrange(8, len(frame)):]
        elif kind == 2:
            frame[rng.randrange(len(frame)):rng.randrange(len(frame))] = rng.randbytes(8)
        else:
            frame[4:8] = rng.randbytes(4)
    frame[0:4] = (len(frame) - 4).to_bytes(4, "big")  # the length stays right: one frame
    return frame


def fuzz_frame(rng: random.Random, opaque: int) -> bytes:
    """One frame with its length word: a served code's request, maybe mutated."""
    code = rng.choice(CODES)
    flag = rng.choice((0, 0, 0, codes.FLAG_ONEWAY, codes.FLAG_RESPONSE))
    binary = rng.random() < 0.4
    header = (_binary_header if binary else _json_header)(rng, code, opaque, flag)
    word = (SERIALIZE_ROCKETMQ if binary else SERIALIZE_JSON) << 24 | len(header)
    body = _bodies(rng)
    frame = bytearray((4 + len(header) + len(body)).to_bytes(4, "big")
                      + word.to_bytes(4, "big") + header + body)
    return bytes(_mutate(rng, frame) if rng.random() < 0.3 else frame)


def check_answer(request: Command, answer: Command | None) -> None:
    if answer is None:
        assert request.is_response or request.oneway, f"no answer to code {request.code}"
        return
    assert isinstance(answer.code, int)
    if answer.code != codes.SUCCESS:
        assert answer.remark, f"code {request.code} answered {answer.code} with no remark"
    encoded = b"".join(encode(answer))
    assert decode(encoded[4:]).code == answer.code


def test_handlers_answer_every_fuzzed_frame(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    rng = random.Random(SEED)

    async def run() -> int:
        async with serving(tmp_path, FUZZ_SETTINGS) as front:
            return await _handler_cases(front.front, rng)

    count = asyncio.run(run())
    gc.collect()  # "Future exception was never retrieved" is logged when one is collected
    assert count > 100
    assert tracebacks_and_errors(caplog) == []


async def _handler_cases(front: Front, rng: random.Random) -> int:
    count = 0
    deadline = time.monotonic() + HANDLER_BUDGET_S
    while time.monotonic() < deadline and count < 3000:
        frame = fuzz_frame(rng, count)
        count += 1
        try:
            request = decode(frame[4:])
        except FrameError:
            continue
        peer = Peer(f"127.0.0.1:{count}", count)
        check_answer(request, await answer_to(front, request, peer))
    return count


async def _one_live_case(port: int, frame: bytes, opaque: int) -> None:
    """Write the frame and a good request behind it; read until the good one is answered
    (the fuzzed one was read and handled) or the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sentinel = Command(codes.GET_BROKER_CLUSTER_INFO, opaque=-opaque - 1)
    try:
        writer.write(frame)
        writer.writelines(encode(sentinel))
        async with asyncio.timeout(LIVE_ANSWER_TIMEOUT_S):
            while True:
                try:
                    answer = decode(await read_frame(reader))
                except asyncio.IncompleteReadError:
                    return  # a clean close
                if answer.opaque == sentinel.opaque:
                    assert answer.code == codes.SUCCESS
                    return
                if answer.is_response and answer.code != codes.SUCCESS:
                    assert answer.remark, f"answer {answer.code} with no remark"
    finally:
        writer.close()


def test_a_live_server_answers_or_closes_for_every_fuzzed_frame(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    rng = random.Random(SEED + 1)

    async def run() -> int:
        async with serving(tmp_path, FUZZ_SETTINGS) as front:
            count = await _live_cases(front, rng)
            good = Command(codes.GET_BROKER_CLUSTER_INFO, opaque=1)
            reader, writer = await asyncio.open_connection("127.0.0.1", front.server.port)
            writer.writelines(encode(good))
            assert decode(await read_frame(reader)).code == codes.SUCCESS
            writer.close()
        return count

    count = asyncio.run(run())
    gc.collect()
    assert count > 50
    assert tracebacks_and_errors(caplog) == []


async def _live_cases(front: RemotingFront, rng: random.Random) -> int:
    count = 0
    deadline = time.monotonic() + LIVE_BUDGET_S
    while time.monotonic() < deadline and count < 600:
        count += 1
        await _one_live_case(front.server.port, fuzz_frame(rng, count), count)
    return count


def test_the_fuzz_settings_are_the_defaults_but_for_short_waits() -> None:
    """The fuzz serves the default bounds, only its waits shortened to fit the budget."""
    shortened = {"pull_suspend_ms_max", "idle_timeout_ms", "writer_timeout_ms"}
    default = RemotingSettings(port=0)
    for field in dataclasses.fields(RemotingSettings):
        if field.name not in shortened:
            assert getattr(FUZZ_SETTINGS, field.name) == getattr(default, field.name)
