"""The `tls` section of the config file: one certificate for every listener of a replica.

    tls:
      cert_file: /etc/mqstore/tls/tls.crt   # PEM: the certificate (and its chain)
      key_file: /etc/mqstore/tls/tls.key    # PEM: its private key
      ca_file: /etc/mqstore/tls/ca.crt      # PEM: the CA links to other replicas verify

With `cert_file` and `key_file` set, every network listener speaks only TLS: the writer's,
the indexer's and the notifier's HTTP, the remoting front, the replication listener; a
plaintext client is refused at its first bytes.  The links between them verify the peer
against `ca_file` (empty: the system's CAs): a follower its master, the notifier the
indexer's notice stream.  The writer's forward listener stays plaintext: it is bound to
loopback and only the front in the same pod connects to it.  The file names are a
cert-manager Secret's keys (`tls.crt`, `tls.key`, `ca.crt`).

Host names: a follower checks that the master's certificate names the host of
`replication.master` (a StatefulSet's `*.<broker>-headless.<namespace>.svc`); a link to a
loopback address (the notifier's stream from the indexer in the same pod) checks the chain
only, since nothing but this machine can answer there.
"""

from __future__ import annotations

import dataclasses
import ssl

from mqstore.services.common.settings.replication import is_loopback
from mqstore.storage import ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class TlsSettings:
    """The certificate every listener serves, and the CA the internal links trust."""

    cert_file: str = ""
    """PEM certificate (leaf first, then any intermediates).  Empty: no TLS anywhere."""

    key_file: str = ""
    """PEM private key of `cert_file` (unencrypted: the services start unattended)."""

    ca_file: str = ""
    """PEM CA certificates a follower and the notifier verify their peers with.  Empty: the
    system's CAs.  A self-signed certificate is its own CA: name it here too."""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError(f"cert_file={self.cert_file!r} and key_file={self.key_file!r} "
                              f"must be set together (both: TLS on every listener)")
        if self.ca_file and not self.cert_file:
            raise ConfigError(f"ca_file={self.ca_file!r} without cert_file: TLS is off, so "
                              f"nothing would use it")

    @property
    def enabled(self) -> bool:
        return bool(self.cert_file)


def server_context(settings: TlsSettings) -> ssl.SSLContext | None:
    """What every TLS listener serves (None: TLS off), or a ConfigError naming the file."""
    if not settings.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.cert_file, settings.key_file)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"tls: cannot load cert_file={settings.cert_file!r} with "
                          f"key_file={settings.key_file!r}: {error}") from None
    return context


def client_context(settings: TlsSettings, *, host: str) -> ssl.SSLContext | None:
    """What a link to `host` verifies its peer with (None: TLS off)."""
    if not settings.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.ca_file:
        try:
            context.load_verify_locations(cafile=settings.ca_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(f"tls: cannot load ca_file={settings.ca_file!r}: "
                              f"{error}") from None
    if is_loopback(host):
        context.check_hostname = False  # the chain is still verified
    return context
