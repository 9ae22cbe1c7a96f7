"""`ReplicationClient`: a follower writer copies its master's log (RocketMQ `HAClient`).

    connect     to `replication.master`; answer its nonce with the proof of the replication
                secret, check the master's proof of it back (replication_handshake.py),
                then report where this log ends (0: empty)
    frames      append each at exactly its position (`MessageStore.replication.append_raw`:
                a gap, an overlap or a cut record closes the connection, and the next one
                reports where this log really ends); after the frames of one read, report
                the new end once: that confirms them to a sync master
    heartbeat   report the end every `heartbeat_interval_ms` even when nothing arrives
    housekeeping  a master silent for `housekeeping_interval_ms` (it heartbeats every 5 s)
                is disconnected
    reconnect   after `reconnect_interval_ms`, for ever, until the writer stops

The follower's own flush policy syncs what was appended; its indexer builds its consume
queues and index from its own log, as it would a master's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
import time
import typing

from mqstore.services.common.links.mutual_proof import HELLO, LISTENER_PROOF, ProofError
from mqstore.services.common.settings.replication import ReplicationSettings, load_secret
from mqstore.services.writer.replication_handshake import REPLICATION
from mqstore.services.writer.replication_protocol import FrameReader, ProtocolError, encode_report
from mqstore.storage import MessageStore, SegmentCreateError, StoreError

log = logging.getLogger("mqstore.writer.replication")


@dataclasses.dataclass
class FollowerState:
    """What the follower's status and metrics show."""

    master: str
    connected: bool = False
    connected_at_ms: int = 0
    last_frame_at_ms: int = 0
    master_position: int | None = None
    """The master's end as far as this follower knows: its last heartbeat (sent only when
    the master is idle) or the end of the newest frame, whichever is later.  While the master
    streams without a pause it is a lower bound, so the lag below is too."""
    bytes_received_total: int = 0
    connections_total: int = 0
    last_error: str | None = None


class ReplicationClient:
    def __init__(self, store: MessageStore, settings: ReplicationSettings, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        assert not store.config.role.is_master
        self._ssl = ssl_context
        """TLS to the master, verifying its certificate (services/common/settings/tls.py)."""
        self.store = store
        self.settings = settings
        self.state = FollowerState(master=settings.master)
        self._host, self._port = settings.master_address
        self.secret = load_secret(settings, link_host=self._host)
        self._stopping = asyncio.Event()
        self._protocol: MasterConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        settings = self.settings
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            try:
                _, protocol = await asyncio.wait_for(
                    loop.create_connection(lambda: MasterConnection(self), self._host,
                                           self._port, ssl=self._ssl),
                    settings.connect_timeout_ms / 1000)
            except (OSError, TimeoutError) as error:
                self._failed(f"connecting to {self.settings.master}: {error!r}")
            else:
                self._protocol = protocol
                await protocol.closed
                self._protocol = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(),
                                       settings.reconnect_interval_ms / 1000)

    def _failed(self, error: str) -> None:
        if error != self.state.last_error:
            log.warning("replication from the master failed; retrying", extra={
                "master": self.settings.master, "error": error})
        self.state.last_error = error

    async def close(self) -> None:
        self._stopping.set()
        if self._protocol is not None:
            self._protocol.close("follower stopping")
        if self._task is not None:
            self._task.cancel()  # it may be waiting for a connection that never comes
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def not_caught_up(self) -> str | None:
        """Why this follower is not ready (/readyz): not connected, or further behind its
        master than `follower_ready_lag_bytes_max`; None when it is caught up."""
        if not self.state.connected:
            return f"not connected to the master {self.settings.master}"
        lag = self.lag_bytes
        if lag is None:
            return f"connected to the master {self.settings.master}, no position heard yet"
        if lag > self.settings.follower_ready_lag_bytes_max:
            return (f"{lag} bytes behind the master, more than "
                    f"replication.follower_ready_lag_bytes_max="
                    f"{self.settings.follower_ready_lag_bytes_max}")
        return None

    @property
    def lag_bytes(self) -> int | None:
        """The master's known end (`FollowerState.master_position`) minus this log's end;
        None before the first frame."""
        master = self.state.master_position
        if master is None:
            return None
        return max(0, master - self.store.replication.written_position)


class MasterConnection(asyncio.Protocol):
    def __init__(self, client: ReplicationClient) -> None:
        self._client = client
        self._state = client.state
        self._settings = client.settings
        self._replication = client.store.replication
        self._frames = FrameReader(frame_bytes_max=client.store.config.segment_size_bytes)
        self._transport: asyncio.Transport | None = None
        self._last_received_s = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._appended = False
        self._handshake = bytearray()
        self._master_nonce = self._follower_nonce = b""
        self.authenticated = False
        """The master proved the secret; until then nothing is reported or appended."""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses; they have its methods)
        self._transport = transport = typing.cast(asyncio.Transport, transport)
        state = self._state
        state.connected, state.connected_at_ms = True, _now_ms()
        state.connections_total += 1
        self._arm_timer()

    def _authenticate(self, data: bytes) -> bytes:
        """Run the follower's half of the handshake; return the bytes after it (none: the
        master streams only after the first report)."""
        transport = self._transport
        assert transport is not None
        expected = HELLO.size if not self._master_nonce else LISTENER_PROOF.size
        needed = expected - len(self._handshake)
        self._handshake += data[:needed]
        rest = data[needed:]
        if len(self._handshake) < expected:
            return b""
        message, self._handshake = bytes(self._handshake), bytearray()
        if not self._master_nonce:
            answer, self._master_nonce, self._follower_nonce = REPLICATION.dialer_proof(
                self._client.secret, message)
            transport.write(answer)
            return self._authenticate(rest) if rest else b""
        REPLICATION.check_listener(self._client.secret, self._master_nonce,
                                   self._follower_nonce, message)
        self.authenticated = True
        position = self._replication.written_position
        transport.write(encode_report(position))
        log.info("connected to the master", extra={"master": self._settings.master,
                                                   "reported": position})
        return rest

    def connection_lost(self, exc: Exception | None) -> None:
        self._state.connected = False
        if self._timer is not None:
            self._timer.cancel()
        if exc is not None:
            self._client._failed(repr(exc))
        log.info("disconnected from the master", extra={"master": self._settings.master})
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self, reason: str) -> None:
        if self._transport is not None and not self._transport.is_closing():
            log.info("closing the master connection", extra={"reason": reason})
            self._transport.abort()  # a cut link would never take what is buffered

    def data_received(self, data: bytes) -> None:
        self._last_received_s = time.monotonic()
        self._appended = False
        try:
            if not self.authenticated:
                data = self._authenticate(data)
            self._frames.feed(data, self._on_frame)
        except (ProtocolError, SegmentCreateError, ProofError) as error:
            self._client._failed(str(error))
            self.close(str(error))
            return
        except StoreError as error:  # ReplicationGapError: a gap, an overlap, a cut record
            self._client._failed(repr(error))
            self.close(repr(error))
            return
        if self._appended and self._transport is not None:
            self._transport.write(encode_report(self._replication.written_position))

    def _on_frame(self, position: int, data: memoryview) -> None:
        state = self._state
        state.last_frame_at_ms = _now_ms()
        if not data:
            state.master_position = position
            return
        self._replication.append_raw(position, data)
        state.bytes_received_total += len(data)
        self._appended = True
        if state.master_position is None or position + len(data) > state.master_position:
            state.master_position = position + len(data)

    def _arm_timer(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._settings.heartbeat_interval_ms / 1000, self._tick)

    def _tick(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        silent_s = time.monotonic() - self._last_received_s
        if silent_s >= self._settings.housekeeping_interval_ms / 1000:
            self._client._failed(f"the master was silent for {silent_s:.1f} s")
            self.close(f"no frame for {self._settings.housekeeping_interval_ms} ms "
                       f"(housekeeping_interval_ms)")
            return
        if self.authenticated:
            transport.write(encode_report(self._replication.written_position))
        self._arm_timer()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
