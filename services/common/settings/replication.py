"""The `replication` section of the config file: where the writer serves or follows.

    store:
      role: sync_master                 # async_master (default), sync_master, follower
    replication:
      port: 8084                        # masters listen here for followers (default: any)
      master: broker-0.broker-headless:8084   # followers connect here
      role_by_hostname: true            # one file for every pod (below)
      secret_file: /etc/mqstore/replication/secret   # both sides prove they hold it

The role is the engine's (`store.role`, storage/roles.py); these are the network's settings.
`role_by_hostname` lets one config file serve a StatefulSet: the writer whose host name is
the first DNS label of `master` runs with `store.role` (a master role), every other one
follows `master`.  `mqstore writer --role R --master HOST:PORT` overrides both.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

from mqstore.storage import BrokerRole, ConfigError

KIB = 1 << 10
SECRET_SIZE_BYTES_MIN = 16
"""A shorter secret could be guessed offline from one recorded handshake; 16 bytes is 128
bits (`openssl rand -hex 32` writes 64 characters)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicationSettings:
    """The writer's replication endpoint and bounds (services/writer/replication_*.py)."""

    host: str = "127.0.0.1"
    """Where a master listens for followers.  Loopback unless told otherwise, as every
    listener: followers on other machines need an address set here (`mqstore up --host`
    sets it; the operator's config file sets 0.0.0.0, followers being other pods)."""

    port: int = 0
    """Where a master serves followers.  0 (default): any free port, named in the
    "replication listening" log line: a writer nobody follows needs no fixed port, and
    writers started side by side (tests, `mqstore up`) never collide.  Where followers
    connect, set one: 8084 by convention (RocketMQ's `haListenPort` is the broker's port + 1;
    8081-8083 are the writer's, the indexer's and the notifier's)."""

    master: str = ""
    """A follower's master, "host:port" of its replication port ("" on a master)."""

    role_by_hostname: bool = False
    """Run with `store.role` only where the host name is `master`'s first DNS label, and
    follow `master` everywhere else (pod 0 of a StatefulSet masters, the others follow)."""

    batch_bytes_max: int = 256 * KIB
    """Log bytes per frame (RocketMQ: 32 KiB).  256 KiB is ~250 records of 1 KiB, about 60 µs
    of the master's event loop (measured: 9 µs to copy, 52 µs to find the last whole record)
    and 90 µs of the follower's to check: four frames per MB for catch-up, no long stall of
    either loop.  A record larger than this (up to message_body_size_bytes_max) goes whole."""

    heartbeat_interval_ms: int = 5000
    """`haSendHeartbeatInterval`: an idle master sends an empty frame, and a follower
    repeats its position, this often, so neither side takes a quiet link for a dead one."""

    housekeeping_interval_ms: int = 20_000
    """`haHousekeepingInterval`: either side closes a connection that was silent this long
    (four missed heartbeats); the follower then reconnects."""

    reconnect_interval_ms: int = 1000
    """A follower's wait between connection attempts (RocketMQ's HAClient retries every 5 s;
    1 s bounds how long a restarted master waits to be sync-acknowledged again)."""

    connect_timeout_ms: int = 3000
    """A connection attempt that has not completed by then is given up and retried."""

    follower_ready_lag_bytes_max: int = 4 * 1024 * KIB
    """A follower's writer answers /readyz 503 until it is connected to its master and at
    most this many bytes behind it.  A StatefulSet rolls its pods from the highest ordinal
    down, each once the one before is Ready, so the master (pod 0) is replaced only after
    every follower has caught up, and a new follower is Ready only once it holds the
    master's log.  4 MiB: a few milliseconds of streaming, above what a follower trails by
    under steady load."""

    followers_max: int = 16
    """Connections a master accepts at once (those still in the handshake included); more
    are closed at once.  Each costs a copy of every new byte on the master's event loop."""

    secret_file: str = ""
    """A file holding the secret shared by a master and its followers (at least 16 bytes;
    trailing whitespace is ignored).  Each side proves it holds it before the master sends a
    log byte (services/writer/replication_handshake.py).  Empty: allowed only on loopback,
    where only local processes take part: a master whose `host`, or a follower whose
    `master`, is anything else refuses to start (the writer, when its replication starts)."""

    handshake_timeout_ms: int = 5000
    """A connection that has not proven the secret by then is closed, so an unauthenticated
    socket holds one of `followers_max` for at most this long (with TLS, its handshake gets
    as long again before that).  One round trip and two HMACs take well under a millisecond
    on a LAN; 5 s leaves room for a loaded node."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} must be in 0..65535")
        for name in ("batch_bytes_max", "heartbeat_interval_ms", "housekeeping_interval_ms",
                     "reconnect_interval_ms", "connect_timeout_ms", "followers_max",
                     "handshake_timeout_ms", "follower_ready_lag_bytes_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name}={value!r} must be a positive integer")
        if self.housekeeping_interval_ms <= self.heartbeat_interval_ms:
            raise ConfigError(f"housekeeping_interval_ms={self.housekeeping_interval_ms} must "
                              f"exceed heartbeat_interval_ms={self.heartbeat_interval_ms}: a "
                              f"quiet but live link would be closed")
        if self.master:
            parse_master(self.master)
        elif self.role_by_hostname:
            raise ConfigError("role_by_hostname needs master (the master's host:port)")

    @property
    def master_address(self) -> tuple[str, int]:
        return parse_master(self.master)


def is_loopback(host: str) -> bool:
    """Only this machine can connect to `host` (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_secret(settings: ReplicationSettings, *, link_host: str) -> bytes:
    """The secret of `settings.secret_file`, or a ConfigError.  Without one: b"" if
    `link_host` (a master's listen address, a follower's master) is loopback, where only
    this machine takes part; a ConfigError otherwise.  Read when the writer starts its
    replication side, so the indexer and notifier, which share the file, do not care."""
    if not settings.secret_file:
        if is_loopback(link_host):
            return b""
        raise ConfigError(f"replication.secret_file is empty and the replication link "
                          f"{link_host!r} is not loopback: anyone who reaches it could "
                          f"follow or serve a log; set secret_file (e.g. `openssl rand -hex "
                          f"32 > FILE`, the same file on every replica), or use 127.0.0.1")
    try:
        secret = Path(settings.secret_file).read_bytes().rstrip()
    except OSError as error:
        raise ConfigError(f"replication.secret_file={settings.secret_file!r}: cannot read it: "
                          f"{error.strerror}") from None
    if len(secret) < SECRET_SIZE_BYTES_MIN:
        raise ConfigError(f"replication.secret_file={settings.secret_file!r} holds "
                          f"{len(secret)} bytes; at least {SECRET_SIZE_BYTES_MIN} are needed "
                          f"(e.g. `openssl rand -hex 32 > FILE`)")
    return secret


def parse_master(text: str) -> tuple[str, int]:
    """ "host:port" or "[ipv6]:port" → (host, port), or a ConfigError naming `master`."""
    host, separator, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"master={text!r} must be host:port (the master's replication port)")
    return host, int(port)


def check_role(role: BrokerRole, replication: ReplicationSettings, *, source: str) -> None:
    """The file's role and replication settings agree (ServiceConfig checks at load)."""
    if role is BrokerRole.FOLLOWER and not replication.master:
        raise ConfigError(f"{source}: store.role=follower needs replication.master "
                          f"(host:port of the master's replication port)")
    if role is BrokerRole.FOLLOWER and replication.role_by_hostname:
        raise ConfigError(f"{source}: replication.role_by_hostname gives the master's host "
                          f"the role in store.role, so that must be a master role")
    if role.is_master and replication.master and not replication.role_by_hostname:
        raise ConfigError(f"{source}: replication.master is a follower's setting; set "
                          f"store.role=follower, or replication.role_by_hostname=true")
