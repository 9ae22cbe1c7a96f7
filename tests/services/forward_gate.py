"""`ForwardGate`: a TCP relay between the notifier and the writer's forward port that can hold
back the transaction op messages, for tests/services/test_transaction_kill9.py.

The notifier's `remoting.writer_address` points at the gate, which relays every frame of the
forward link (services/common/links/forward_wire.py) unchanged, the secret handshake of
services/common/links/forward_secret.py included (the first frame each way past the writer's
hello).  It decodes the requests and answers it relays, and:

- records every put it passed (topic, body) and every op message the writer answered, once
  that answer is relayed to the notifier (`ops_answered`);
- with `hold_ops` set, keeps a put to `RMQ_SYS_TRANS_OP_HALF_TOPIC` instead of relaying it
  (`ops_held`): the notifier waits for an answer that never comes, so it is killed after the
  step before the op and before the op, whatever the timing.  `drop_held` forgets them: a
  held op never reaches the writer.

It runs its own event loop in a thread, so a test may block (start, kill and wait for
processes) while it relays.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from mqstore.services.common.links.forward_wire import decode_answer, decode_request
from mqstore.services.common.topics.rules import TRANSACTION_OP_TOPIC

T = TypeVar("T")
NOTIFIER_HANDSHAKE_FRAMES = 1
"""The front's proof (forward_secret.prove_front); every later frame is a request."""
WRITER_HANDSHAKE_FRAMES = 2
"""The writer's hello and proof (forward_secret.check_front); then answers."""
WAIT_TIMEOUT_S = 30.0


class ForwardGate:
    def __init__(self, writer_port: int) -> None:
        self._writer_port = writer_port
        self.hold_ops = False
        self.ops_held: list[bytes] = []
        """Bodies of the op messages held back (`"<half queue offset>,"`)."""
        self.ops_answered: list[bytes] = []
        self.passed: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="forward-gate", daemon=True)
        self.port = 0

    def __enter__(self) -> ForwardGate:
        self._thread.start()
        assert self._started.wait(WAIT_TIMEOUT_S), "the gate did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(WAIT_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT_TIMEOUT_S)

    def drop_held(self) -> None:
        """Stop holding ops and forget the held ones: they never reach the writer."""
        with self._lock:
            self.hold_ops = False
            self.ops_held.clear()

    def wait_for(self, what: str, found: Callable[[ForwardGate], T | None]) -> T:
        """Until `found(self)` is not None (under the gate's lock); its value."""
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while True:
            with self._lock:
                value = found(self)
            if value is not None:
                return value
            assert time.monotonic() < deadline, f"the gate never saw {what}"
            time.sleep(0.01)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._started.set()
        self._loop.run_forever()

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, front_reader: asyncio.StreamReader,
                     front_writer: asyncio.StreamWriter) -> None:
        try:
            writer_reader, writer_writer = await asyncio.open_connection(
                "127.0.0.1", self._writer_port)
        except OSError:
            front_writer.close()
            return
        topics: dict[int, tuple[str, bytes]] = {}
        pumps = [asyncio.create_task(self._requests(front_reader, writer_writer, topics)),
                 asyncio.create_task(self._answers(writer_reader, front_writer, topics))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
                self._tasks.discard(pump)
            await asyncio.gather(*pumps, return_exceptions=True)
            for stream in (front_writer, writer_writer):
                stream.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        topics: dict[int, tuple[str, bytes]]) -> None:
        """Notifier to writer: every frame, but the ops held."""
        for index in range(1 << 62):
            frame = await _frame(reader)
            if frame is None:
                return
            if index >= NOTIFIER_HANDSHAKE_FRAMES:
                request = decode_request(frame[4:])
                with self._lock:
                    if request.topic == TRANSACTION_OP_TOPIC and self.hold_ops:
                        self.ops_held.append(request.body)
                        continue
                    topics[request.request_id] = (request.topic, request.body)
            writer.write(frame)
            await writer.drain()

    async def _answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       topics: dict[int, tuple[str, bytes]]) -> None:
        """Writer to notifier: every frame; a put counts once its answer is relayed."""
        for index in range(1 << 62):
            frame = await _frame(reader)
            if frame is None:
                return
            writer.write(frame)
            await writer.drain()
            if index < WRITER_HANDSHAKE_FRAMES:
                continue
            answer = decode_answer(frame[4:])
            with self._lock:
                topic, body = topics.pop(answer.request_id, ("", b""))
                if answer.results:
                    self.passed.append((topic, body))
                    if topic == TRANSACTION_OP_TOPIC:
                        self.ops_answered.append(body)


async def _frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame with its length field; None at the end of the stream."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        head = await reader.readexactly(4)
        return head + await reader.readexactly(int.from_bytes(head, "big"))
    return None
