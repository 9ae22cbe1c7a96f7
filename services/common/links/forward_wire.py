"""The forward link: sends from the remoting front to the writer, over one TCP connection.

The front does not decode a RocketMQ message beyond its header fields: the body (or a
SEND_BATCH_MESSAGE's concatenated entries) and the properties travel as the client encoded
them, and the writer stores them (`Message.properties_encoded`).  Requests are pipelined:
each carries a request id, and answers come back in any order.  Big-endian throughout.

Request, a 42-byte head then its variable parts in head order:

    offset  size  field
    0       4     length             u32, bytes after this field
    4       4     request id         u32, echoed by the answer
    8       1     kind               0 = one message, 1 = a RocketMQ batch body, 2 = one
                                     message the front routed to a `%RETRY%` or `%DLQ%`
                                     topic itself (a consumer's send-back)
    9       4     queue id           i32
    13      4     sysflag            i32, the client's (compression, transaction bits)
    17      4     flag               i32, the user flag (a batch: each entry has its own)
    21      8     born timestamp     i64, ms
    29      4     reconsume times    i32
    33      1     born host length   u8, then "ip:port" ASCII (0: the store host)
    34      2     topic length       u16, then the topic (UTF-8)
    36      4     properties length  u32, then the properties as encoded (a batch: the
                                     outer properties, appended to each entry's)
    40      2     reserved           0
    42      ...   born host, topic, properties, then the body to the end

Answer, a 17-byte head then `count` results of 24 bytes and the reason:

    0   4  length   4  4  request id   8  1  status (batch_wire.STATUS_NAMES index)
    9   4  count    13 4  reason length (UTF-8 after the results)
    per result: queue offset i64, physical offset i64, store timestamp ms i64
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from mqstore.services.common.http.batch_wire import STATUS_CODES, STATUS_NAMES, WireFormatError

REQUEST_HEAD = struct.Struct(">IIBiiiqiBHIH")
ANSWER_HEAD = struct.Struct(">IIBII")
RESULT = struct.Struct(">qqq")
assert REQUEST_HEAD.size == 42
assert ANSWER_HEAD.size == 17
assert RESULT.size == 24
LENGTH_SIZE = 4
KIND_SINGLE = 0
KIND_BATCH = 1
KIND_ROUTED = 2


class ForwardRequest(NamedTuple):
    request_id: int
    kind: int
    queue_id: int
    sysflag: int
    flag: int
    born_timestamp_ms: int
    reconsume_times: int
    born_host: str
    topic: str
    properties: bytes
    body: bytes


class ForwardAnswer(NamedTuple):
    request_id: int
    status: str
    results: list[tuple[int, int, int]]
    """(queue offset, physical offset, store timestamp ms) per stored message."""
    reason: str


def encode_request(request: ForwardRequest) -> list[bytes]:
    host = request.born_host.encode("ascii")
    topic = request.topic.encode("utf-8")
    length = (REQUEST_HEAD.size - LENGTH_SIZE + len(host) + len(topic)
              + len(request.properties) + len(request.body))
    head = REQUEST_HEAD.pack(length, request.request_id, request.kind, request.queue_id,
                             request.sysflag, request.flag, request.born_timestamp_ms,
                             request.reconsume_times, len(host), len(topic),
                             len(request.properties), 0)
    return [head + host + topic + request.properties, request.body]


def decode_request(frame: bytes) -> ForwardRequest:
    """A request without its length field."""
    fixed = REQUEST_HEAD.size - LENGTH_SIZE
    if len(frame) < fixed:
        raise WireFormatError(f"forward request of {len(frame)} bytes is shorter than its "
                              f"{fixed}-byte head")
    (_, request_id, kind, queue_id, sysflag, flag, born_ms, reconsume, host_length,
     topic_length, properties_length, _) = REQUEST_HEAD.unpack(b"\0\0\0\0" + frame[:fixed])
    if kind not in (KIND_SINGLE, KIND_BATCH, KIND_ROUTED):
        raise WireFormatError(f"forward request {request_id}: kind {kind} is not 0, 1 or 2")
    position = fixed
    parts = []
    for size in (host_length, topic_length, properties_length):
        if position + size > len(frame):
            raise WireFormatError(f"forward request {request_id}: a part of {size} bytes "
                                  f"runs past the frame at byte {position}")
        parts.append(frame[position:position + size])
        position += size
    try:
        host, topic = parts[0].decode("ascii"), parts[1].decode("utf-8")
    except UnicodeDecodeError as error:
        raise WireFormatError(f"forward request {request_id}: {error}") from None
    return ForwardRequest(request_id, kind, queue_id, sysflag, flag, born_ms, reconsume, host,
                          topic, parts[2], frame[position:])


def encode_answer(answer: ForwardAnswer) -> bytes:
    reason = answer.reason.encode("utf-8")
    rows = b"".join(RESULT.pack(*row) for row in answer.results)
    length = ANSWER_HEAD.size - LENGTH_SIZE + len(rows) + len(reason)
    return ANSWER_HEAD.pack(length, answer.request_id, STATUS_CODES[answer.status],
                            len(answer.results), len(reason)) + rows + reason


def decode_answer(frame: bytes) -> ForwardAnswer:
    """An answer without its length field."""
    fixed = ANSWER_HEAD.size - LENGTH_SIZE
    if len(frame) < fixed:
        raise WireFormatError(f"forward answer of {len(frame)} bytes is too short")
    _, request_id, status, count, reason_length = ANSWER_HEAD.unpack(b"\0\0\0\0" +
                                                                      frame[:fixed])
    end = fixed + count * RESULT.size
    if status >= len(STATUS_NAMES) or end + reason_length != len(frame):
        raise WireFormatError(f"forward answer {request_id}: status {status}, {count} "
                              f"results and a {reason_length}-byte reason do not fill "
                              f"{len(frame)} bytes")
    results = [RESULT.unpack_from(frame, fixed + index * RESULT.size) for index in range(count)]
    return ForwardAnswer(request_id, STATUS_NAMES[status], results,
                         frame[end:].decode("utf-8", "replace"))
