"""Redis Streams, the peer the HTTP benchmarks measure beside mqstore in the same run.

`RedisServer` starts Debian's `redis-server` (installed by scripts/setup.sh) on a free port
of 127.0.0.1 with its own temporary directory, an append-only file and no RDB snapshots:

    redis-server --bind 127.0.0.1 --port P --dir TMP --appendonly yes --appendfsync MODE
                 --save "" --daemonize no --logfile TMP/redis.log

`appendfsync everysec` (fsync once a second, so up to a second of acknowledged writes can be
lost) is the peer of mqstore's async flush; `appendfsync always` (fsync before the reply,
group-committed across the commands of one event-loop pass) the peer of sync flush.  Every
other setting is Redis's default, including its automatic AOF rewrite (a fork that rewrites
the file when it has doubled since the last one, from 64 MB): that is what a user gets.

`xadd_commands` pre-encodes XADD commands in RESP, and `pipelined_load` sends such a block
over raw sockets and counts the replies with hiredis's parser: the client then costs about
a microsecond per message, as the pre-encoded binary batches do against mqstore.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import hiredis

APPENDFSYNC_OF_FLUSH = {"async": "everysec", "sync": "always"}
"""The Redis durability setting measured beside each mqstore flush mode."""
START_TIMEOUT_S = 30.0
FIELD = b"b"


class RedisServer:
    """One `redis-server` process on a fresh directory; see the module docstring."""

    def __init__(self, *, appendfsync: str) -> None:
        assert appendfsync in APPENDFSYNC_OF_FLUSH.values(), appendfsync
        self.appendfsync = appendfsync
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._directory: Path | None = None

    def start(self) -> None:
        assert self._process is None, "already started"
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run ./scripts/setup.sh")
        self._directory = Path(tempfile.mkdtemp(prefix="redis-bench-"))
        self.port = _free_port()
        self._process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", str(self._directory), "--appendonly", "yes",
             "--appendfsync", self.appendfsync, "--save", "", "--daemonize", "no",
             "--logfile", str(self._directory / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers_ping():
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = (self._directory / "redis.log").read_text()[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start:\n{log}")
            time.sleep(0.02)

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def cpu_seconds(self) -> float:
        """The server's CPU time, with its AOF-rewrite children once they have exited."""
        assert self._process is not None
        path = Path(f"/proc/{self._process.pid}/stat")
        fields = path.read_text().rpartition(")")[2].split()
        return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()  # SIGTERM: Redis fsyncs the AOF and exits
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


@contextlib.contextmanager
def running_redis(*, appendfsync: str) -> Iterator[RedisServer]:
    server = RedisServer(appendfsync=appendfsync)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def resp_command(*arguments: bytes) -> bytes:
    """One command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(arguments)]
    for argument in arguments:
        parts.append(b"$%d\r\n%s\r\n" % (len(argument), argument))
    return b"".join(parts)


def xadd_commands(streams: Sequence[bytes], body: bytes, count: int) -> bytes:
    """`count` XADDs of `body` (field "b", auto ids), to `streams` in turn."""
    return b"".join(resp_command(b"XADD", streams[i % len(streams)], b"*", FIELD, body)
                    for i in range(count))


async def pipelined_load(port: int, block: bytes, replies: int, *, connections: int,
                         seconds: float) -> int:
    """`connections` sockets each sending `block` (`replies` commands) and reading every
    reply before sending it again, until the deadline; returns the commands answered."""
    deadline = time.monotonic() + seconds
    answered = 0

    async def worker() -> None:
        nonlocal answered
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        parser = hiredis.Reader()
        try:
            while time.monotonic() < deadline:
                writer.write(block)
                await read_replies(reader, parser, replies)
                answered += replies
        finally:
            writer.close()
            await writer.wait_closed()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return answered


async def read_replies(reader: asyncio.StreamReader, parser: hiredis.Reader,
                       replies: int) -> None:
    """Read until `replies` replies are parsed; an error reply raises."""
    got = 0
    while got < replies:
        data = await reader.read(1 << 16)
        if not data:
            raise ConnectionError("redis-server closed the connection")
        parser.feed(data)
        while (reply := parser.gets()) is not False:
            if isinstance(reply, hiredis.ReplyError):
                raise RuntimeError(f"redis-server answered an error: {reply}")
            got += 1
