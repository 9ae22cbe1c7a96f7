"""`NamesrvSettings`: where the name server listens and every bound it keeps.

Each is a command-line option of `mqstore namesrv` (`--broker-expiry-ms 120000`; the
option names are the field names with dashes), checked here at startup.
"""

from __future__ import annotations

import dataclasses

MIB = 1 << 20


class NamesrvConfigError(ValueError):
    """A setting out of its range; the message names it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NamesrvSettings:
    host: str = "127.0.0.1"
    """Listen address: loopback unless told otherwise (0.0.0.0 in a pod)."""

    port: int = 9876
    """RocketMQ's name-server port (`namesrvAddr=host:9876`).  0: any free port."""

    external_port: int = 0
    """A second listener for clients outside the cluster network (a NodePort in front of
    it); 0: none.  The routes and cluster info answered on it name each broker by the
    external address the broker registered (`remoting.external_advertised_address`), or by
    its own address if it registered none."""

    broker_expiry_ms: int = 120_000
    """A broker not heard from (REGISTER_BROKER, BROKER_HEARTBEAT, QUERY_DATA_VERSION) this
    long is dropped from routes: RocketMQ's `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, four
    missed 30 s registrations."""

    expiry_scan_interval_ms: int = 5_000
    """How often expired brokers are looked for (RocketMQ's `scanNotActiveBrokerInterval`):
    a broker is dropped at most this long after its expiry."""

    connections_max: int = 1_000
    """Connections at once.  A broker keeps one, a client instance one; at the bound the
    connection whose open frame is oldest is closed to admit a new one, else it is refused.
    1,000 stays under the common 1,024 open-files soft limit."""

    frame_size_bytes_max: int = 16 * MIB
    """Largest frame read (RocketMQ's `frameMaxLength`).  A registration of 50,000 topics is
    about 8 MiB of JSON; a longer frame closes the connection (the next cannot be found)."""

    frame_read_timeout_ms: int = 10_000
    """From a frame's first byte the whole frame must arrive within this, or the connection
    closes: 16 MiB at 13 Mbit/s; a sender of a byte a second holds a connection 10 s."""

    idle_timeout_ms: int = 120_000
    """A connection silent this long closes (RocketMQ's `serverChannelMaxIdleTimeSeconds`).
    Brokers register every 30 s and clients ask for routes every 30 s."""

    write_buffer_bytes_max: int = 4 * MIB
    """Answer bytes waiting for a peer to read them; above it the peer's requests are not
    read.  A route is a few KiB; a topic list of 50,000 names about 2 MiB."""

    write_drain_timeout_ms: int = 30_000
    """Answers above `write_buffer_bytes_max` this long close the connection."""

    brokers_max: int = 1_000
    """Broker addresses registered at once; a registration of one more answers SYSTEM_ERROR
    (a broker already registered always re-registers)."""

    topics_per_broker_max: int = 50_000
    """Topics one registration may carry; more answers SYSTEM_ERROR and nothing is
    recorded.  RocketMQ sets none; 50,000 is past the largest clusters reported and keeps
    the table at `brokers_max` x this entries at worst."""

    kv_entries_max: int = 10_000
    """KV config entries (PUT_KV_CONFIG) over all namespaces; one more answers SYSTEM_ERROR.
    ORDER_TOPIC_CONFIG holds one per ordered topic."""

    delete_topics_on_registration: bool = False
    """RocketMQ's `deleteTopicWithBrokerRegistration`: a master's full registration drops
    the broker's topics it no longer lists.  Off by default, as RocketMQ: a broker's
    registration after creating one topic may list only that topic."""

    tls_cert_file: str = ""
    """PEM certificate (leaf first, then any intermediates) both listeners serve: with it
    (and `tls_key_file`), `port` and `external_port` speak only TLS and a plaintext client
    is closed at its first bytes.  Empty: plain TCP, as RocketMQ's name server."""

    tls_key_file: str = ""
    """PEM private key of `tls_cert_file` (unencrypted: the name server starts unattended);
    set with it or not at all."""

    def __post_init__(self) -> None:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise NamesrvConfigError(
                f"tls_cert_file={self.tls_cert_file!r} and tls_key_file="
                f"{self.tls_key_file!r} must be set together (both: TLS on every listener)")
        if not 0 <= self.port <= 65535:
            raise NamesrvConfigError(f"port={self.port} must be in 0..65535")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type == "int" and field.name not in ("port", "external_port") and \
                    value <= 0:
                raise NamesrvConfigError(f"{field.name}={value} must be positive")
        if not 0 <= self.external_port <= 65535 or \
                (self.external_port and self.external_port == self.port):
            raise NamesrvConfigError(f"external_port={self.external_port} must be in 0..65535 "
                                     f"(0: none) and differ from port={self.port}")
        if self.frame_size_bytes_max < 64 * 1024:
            raise NamesrvConfigError(f"frame_size_bytes_max={self.frame_size_bytes_max} must "
                                     f"be at least 65536 (a registration of a few topics)")
        if self.expiry_scan_interval_ms > self.broker_expiry_ms:
            raise NamesrvConfigError(
                f"expiry_scan_interval_ms={self.expiry_scan_interval_ms} must be at most "
                f"broker_expiry_ms={self.broker_expiry_ms}")
