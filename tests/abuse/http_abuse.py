"""Helpers for the HTTP abuse tests: serve an app as the services do (the guarded runner on
127.0.0.1), and talk to it over raw sockets, from any loopback source address (a "client")."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

GUARD_S = 30.0
"""Bound on any one wait for the server: a hang fails the test instead of stalling the run."""


@contextlib.asynccontextmanager
async def served(app: web.Application, *, header_read_timeout_ms: int = 10_000
                 ) -> AsyncIterator[int]:
    """Serve `app` on 127.0.0.1 as `lifecycle.serve` does; yield its port."""
    from mqstore.services.common.http.server import GuardedRunner  # noqa: PLC0415

    runner = GuardedRunner(app, header_read_timeout_ms=header_read_timeout_ms,
                           access_log=None, shutdown_timeout=1)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        assert self.headers.get("content-type", "").startswith("application/json"), \
            self.headers
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return document

    @property
    def error_status(self) -> object:
        error = self.json()["error"]
        assert isinstance(error, dict) and isinstance(error.get("reason"), str)
        return error["status"]


async def connect(port: int, *, client: str = "127.0.0.1"
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection from loopback address `client` (any of 127.0.0.0/8)."""
    return await asyncio.wait_for(asyncio.open_connection(
        "127.0.0.1", port, local_addr=(client, 0)), GUARD_S)


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """One HTTP/1.1 answer (status line, headers, Content-Length body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await asyncio.wait_for(reader.readexactly(length), GUARD_S)
    return Answer(int(status_line.split(" ")[1]), headers, body)


async def closed(reader: asyncio.StreamReader) -> bool:
    """True once the server closed the connection (EOF after anything left)."""
    with contextlib.suppress(ConnectionResetError):
        while await asyncio.wait_for(reader.read(65536), GUARD_S):
            pass
    return True


async def request(port: int, raw: bytes, *, client: str = "127.0.0.1") -> Answer:
    reader, writer = await connect(port, client=client)
    try:
        writer.write(raw)
        return await read_answer(reader)
    finally:
        writer.close()


def post(path: str, body: bytes, *, content_type: str = "application/json",
         extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: mqstore\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: mqstore\r\n\r\n".encode()


async def wait_until(predicate: object, what: str) -> None:
    """Poll `predicate()` until true (bounded by GUARD_S; no timing is asserted)."""
    assert callable(predicate)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD_S
    while not predicate():
        assert loop.time() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.005)
