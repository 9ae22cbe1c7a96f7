"""`Front`: what every request handler of the remoting front reaches, built once at start.

Handlers are functions `(front, request, peer) -> answer` (None: no answer, for oneway
requests), grouped by concern: route.py, send.py, pulls.py, offsets.py, clients.py,
admin.py, queries.py.  Everything runs on the notifier's event loop.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Awaitable, Callable

from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.topics.queue_choice import RoundRobinQueues
from mqstore.services.notifier.held import HeldPulls
from mqstore.services.notifier.remoting.access import RemotingAccess
from mqstore.services.notifier.remoting.client_table import ClientTable
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.offset_table import OffsetTable
from mqstore.services.notifier.remoting.retry_counts import RetryCounts
from mqstore.services.notifier.remoting.server_calls import ServerCalls
from mqstore.services.notifier.remoting.stamps import PropertyStamps
from mqstore.services.notifier.remoting.topics import TopicTable
from mqstore.services.notifier.remoting.transaction_counts import TransactionCounts
from mqstore.services.notifier.remoting.writer_link import WriterLink
from mqstore.storage import StoreConfig
from mqstore.storage.filters import Sql92Cache
from mqstore.storage.format.hosts import parse_host
from mqstore.storage.reads.store_view import StoreView


@dataclasses.dataclass(frozen=True)
class Peer:
    """The connection a request came on."""

    address: str
    """"ip:port" of the client: the born host of what it sends."""
    connection_id: int
    external: bool = False
    """It came in on the external listener (`remoting.external_enabled`)."""


@dataclasses.dataclass
class Front:
    view: StoreView
    settings: RemotingSettings
    store_config: StoreConfig
    topics: TopicTable
    offsets: OffsetTable
    clients: ClientTable
    held: HeldPulls
    link: WriterLink
    queues: RoundRobinQueues
    """Queue choice for sends that name none (services/common/topics/queue_choice.py)."""
    access: RemotingAccess | None = None
    """The users' check of every request; None when authentication is off."""
    push: Callable[[int, Command], bool] = lambda connection_id, command: False
    """Write a request of the server's own (oneway) to a connection; False if it is gone.
    The server sets it when it starts."""
    opaques: itertools.count[int] = dataclasses.field(default_factory=itertools.count)
    """Opaques of the requests the server sends to clients."""
    calls: ServerCalls = dataclasses.field(default_factory=lambda: ServerCalls(
        calls_max=RemotingSettings().server_calls_max))
    """The server's requests to clients that wait for an answer (reply pushes)."""
    on_woken: Callable[[str], None] = lambda cause: None
    """Counts why a held pull woke (the notifier's wake-up metrics, shared with its HTTP
    pulls); the notifier sets it when it serves the front."""
    retry_counts: RetryCounts = dataclasses.field(default_factory=RetryCounts)
    """Send-backs and dead letters (retries.py counts; the notifier's metrics read)."""
    transaction_counts: TransactionCounts = dataclasses.field(
        default_factory=TransactionCounts)
    """Ends, checks and the check's last pass (transactions.py and transaction_check.py
    count; the notifier's metrics and `GET /v1/transactions` read)."""

    @property
    def broker_address(self) -> str:
        """What routes and cluster info name as this broker: `remoting.advertised_address`,
        or `store.store_host` when that is empty (services/common/settings/remoting.py)."""
        return self.settings.advertised_address or self.store_config.store_host

    def address_for(self, peer: Peer) -> str:
        """This broker's address as `peer` must be told it: the external advertised address
        to a client on the external listener, else `broker_address`."""
        if peer.external:
            return self.settings.external_address
        return self.broker_address

    @property
    def store_host(self) -> str:
        """The STOREHOST of every record, "ip:port" (offset msg ids embed it)."""
        return self.store_config.store_host

    @functools.cached_property
    def stamps(self) -> PropertyStamps:
        """The properties stamped on what is stored (stamps.py)."""
        return PropertyStamps(self.settings)

    @functools.cached_property
    def sql92(self) -> Sql92Cache:
        """SQL92 expressions compiled for pulls and CHECK_CLIENT_CONFIG (filters.py)."""
        return Sql92Cache(entries_max=self.settings.sql92_cache_entries_max,
                          chars_max=self.settings.sql92_expression_chars_max)

    @functools.cached_property
    def store_host_packed(self) -> bytes:
        """The STOREHOST as offset msg ids embed it (address + int32 port)."""
        address, port = parse_host(self.store_config.store_host, setting="store_host")
        return address + port.to_bytes(4, "big", signed=True)


Handler = Callable[[Front, Command, Peer], Awaitable[Command | None]]
