"""A few remoting frames by hand, for what no client library will send: unknown request codes.

RocketMQ's remoting frame (big-endian), JSON header:

| offset | width | field |
|---|---|---|
| 0 | 4 B | length of everything after this field (4 + header + body) |
| 4 | 1 B | header serialization: 0 = JSON, 1 = ROCKETMQ binary |
| 5 | 3 B | header length |
| 8 | header length | header: {"code", "language", "version", "opaque", "flag", "extFields", ...} |
| ... | rest | body |

`flag` bit 0 marks a response, bit 1 a oneway request; a response carries its request's
`opaque`.  REQUEST_CODE_NOT_SUPPORTED (3) is what a name server or broker answers to a code it
has no processor for, with a remark saying so.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

REQUEST_CODE_NOT_SUPPORTED = 3
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
SUCCESS = 0
JSON_SERIALIZATION = 0
RESPONSE_FLAG = 1
TIMEOUT_S = 30.0
FRAME_BYTES_MAX = 16 << 20
VERSION_5_5_0 = 513
"""MQVersion.Version.V5_5_0.ordinal(): the version a 5.5.0 client puts in its headers."""


@dataclass(frozen=True)
class Response:
    header: dict[str, Any]
    body: bytes


def encode_request(code: int, opaque: int, ext_fields: dict[str, str] | None = None) -> bytes:
    header = json.dumps({"code": code, "language": "JAVA", "version": VERSION_5_5_0,
                         "opaque": opaque, "flag": 0, "extFields": ext_fields or {},
                         "serializeTypeCurrentRPC": "JSON"}).encode()
    return struct.pack(">II", 4 + len(header), (JSON_SERIALIZATION << 24) | len(header)) + header


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = connection.recv(size)
        if not chunk:
            raise ConnectionError("the server closed the connection before answering")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _connect(host: str, port: int, ssl_context: ssl.SSLContext | None) -> socket.socket:
    connection = socket.create_connection((host, port), timeout=TIMEOUT_S)
    if ssl_context is None:
        return connection
    return ssl_context.wrap_socket(connection, server_hostname=host)


def request(address: str, code: int, *, opaque: int = 1,
            ext_fields: dict[str, str] | None = None,
            ssl_context: ssl.SSLContext | None = None) -> Response:
    """Sends one request to `address` ("host:port") and returns its response (over TLS
    with `ssl_context`)."""
    host, _, port = address.rpartition(":")
    with _connect(host, int(port), ssl_context) as connection:
        connection.sendall(encode_request(code, opaque, ext_fields))
        length, mark = struct.unpack(">II", _read_exactly(connection, 8))
        if not 4 <= length <= FRAME_BYTES_MAX or mark >> 24 != JSON_SERIALIZATION:
            raise ValueError(f"unexpected frame: length {length}, mark {mark:#x}")
        header_length = mark & 0xFFFFFF
        rest = _read_exactly(connection, length - 4)
        header: dict[str, Any] = json.loads(rest[:header_length])
        return Response(header=header, body=rest[header_length:])


def broker_addresses(namesrv: str, *, ssl_context: ssl.SSLContext | None = None) -> list[str]:
    """Every broker address the name server's cluster info names (GET_BROKER_CLUSTER_INFO).

    The body is fastjson, whose maps may have bare integer keys (`{0:"127.0.0.1:10911"}`),
    so it is searched for addresses rather than parsed."""
    response = request(namesrv, GET_BROKER_CLUSTER_INFO, ssl_context=ssl_context)
    text = response.body.decode("utf-8", errors="replace")
    return sorted(set(re.findall(r'"(\d{1,3}(?:\.\d{1,3}){3}:\d+)"', text)))


def route_of(namesrv: str, topic: str) -> dict[str, Any] | None:
    """The name server's route for `topic` (GET_ROUTEINFO_BY_TOPIC), or None if it has none.
    fastjson (RocketMQ's name server) may write the brokerAddrs keys bare (`{0:"..."}`): they
    are quoted to parse."""
    response = request(namesrv, GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic})
    if response.header.get("code") != SUCCESS:
        return None
    route: dict[str, Any] = json.loads(response.body.decode().replace('{0:"', '{"0":"'))
    return route


def has_route(namesrv: str, topic: str, *, ssl_context: ssl.SSLContext | None = None) -> bool:
    """Whether the name server answers GET_ROUTEINFO_BY_TOPIC for `topic` with SUCCESS."""
    return request(namesrv, GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic},
                   ssl_context=ssl_context).header.get("code") == SUCCESS
