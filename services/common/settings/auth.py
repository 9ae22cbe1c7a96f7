"""The `auth` section of the config file: who may use the services (services/auth).

    auth:
      users_file: /etc/mqstore/auth/plain_acl.yml   # RocketMQ 4.x plain ACL format
      request_clock_skew_ms_max: 300000
      internal_access_key: ""                       # the notifier's key for the notice stream

Empty `users_file` (the default) turns authentication off: every entry point answers anyone,
as before, which is what `mqstore up` on a laptop wants.  Set, every entry point but
`/metrics`, `/healthz`, `/readyz` and `/openapi.json` needs a user's credentials: RocketMQ's
`AclClientRPCHook` signature on the remoting front, a signed request on HTTP
(docs/security.md).  The file is read once at start; a bad file stops the service with one
line naming the problem.
"""

from __future__ import annotations

import dataclasses

from mqstore.storage import ConfigError


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuthSettings:
    """Where the users are and how old a signed HTTP request may be."""

    users_file: str = ""
    """Path of the users file (RocketMQ 4.x `plain_acl.yml`: accounts with accessKey,
    secretKey, admin, default and per-topic/per-group permissions).  Empty: no
    authentication.  In Kubernetes a Secret mounted at /etc/mqstore/auth/plain_acl.yml."""

    request_clock_skew_ms_max: int = 300_000
    """How far a signed HTTP request's timestamp may lie from the server's clock, either
    way.  It bounds how long a captured request can be replayed; 5 minutes tolerates the
    clock drift of machines without tight time sync (the same window object stores use)."""

    internal_access_key: str = ""
    """The account the notifier signs its notice-stream requests to the indexer with; it
    must be an admin (the stream names every topic).  Empty: the first admin account of the
    users file."""

    def __post_init__(self) -> None:
        if self.request_clock_skew_ms_max <= 0:
            raise ConfigError(f"request_clock_skew_ms_max={self.request_clock_skew_ms_max} "
                              f"must be positive")

    @property
    def enabled(self) -> bool:
        return bool(self.users_file)
