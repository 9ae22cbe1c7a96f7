"""`RemotingFront`: the remoting front's parts, built and started in the notifier's process.

    build: the topic table, the offset table over the group files, the client table, a
           table of held pulls the notifier's notice feed also wakes, the writer link
    start: listen on `remoting.port`; flush offsets every `offsets_flush_interval_ms`;
           check transactions every `transaction_check_interval_ms` (transaction_check.py);
           register with `namesrv_addresses` every `register_interval_ms` (registrar.py)
    close: unregister from the name servers, stop the transaction checks, stop listening
           and drop connections, answer held pulls, write the offsets, close the writer
           link

Why here and not in a process of its own (RocketMQ 5's proxy): this process already has
the read-only store view, the held pulls and the indexer's notice stream, so a pull is
served with no hop; only sends cross to the writer, as they would from a proxy.  Figures:
docs/remoting.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from mqstore.services.auth.users import Users
from mqstore.services.common.links.forward_secret import secret_path
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.tls import TlsSettings
from mqstore.services.common.topics.queue_choice import RoundRobinQueues
from mqstore.services.notifier.held import HeldPulls
from mqstore.services.notifier.remoting.access import RemotingAccess
from mqstore.services.notifier.remoting.client_table import ClientTable
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.offset_table import OffsetTable
from mqstore.services.notifier.remoting.registrar import BrokerRegistrar
from mqstore.services.notifier.remoting.routing import HANDLERS
from mqstore.services.notifier.remoting.server import RemotingServer
from mqstore.services.notifier.remoting.server_calls import ServerCalls
from mqstore.services.notifier.remoting.topics import TopicTable
from mqstore.services.notifier.remoting.transaction_check import TransactionCheck
from mqstore.services.notifier.remoting.writer_link import WriterLink
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

log = logging.getLogger("mqstore.remoting")


class RemotingFront:
    def __init__(self, view: StoreView, offsets: ConsumerOffsets, settings: RemotingSettings,
                 *, queue_count_max: int, topics: TopicTable | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 users: Users | None = None, tls: TlsSettings | None = None) -> None:
        """`topics`: the process's topic table, shared with the notifier's HTTP API (default:
        a table of the front's own).  `ssl_context`: serve only TLS.  `users`: check every
        request against them (access.py); None: no check.  `tls`: the config's section, that
        the registrar's links verify name servers with (`remoting.namesrv_tls_enabled`)."""
        self.held = HeldPulls(held_max=settings.held_pulls_max,
                              held_per_client_max=settings.held_pulls_per_client_max)
        clients = ClientTable(expiry_ms=settings.consumer_expiry_ms,
                              lock_expiry_ms=settings.lock_expiry_ms,
                              clients_max=settings.clients_max)
        self.front = Front(
            view=view, settings=settings, store_config=view.config,
            topics=topics or TopicTable(view.directory, queue_count_max=queue_count_max,
                                        topic_size_bytes_max=view.config.topic_size_bytes_max,
                                        topics_max=settings.topics_max, on_disk=view.topics,
                                        reply_topic=f"{settings.cluster_name}_REPLY_TOPIC"),
            offsets=OffsetTable(offsets), clients=clients,
            held=self.held, link=WriterLink(settings, secret_path=secret_path(view.directory)),
            queues=RoundRobinQueues(queue_count=queue_count_max),
            calls=ServerCalls(calls_max=settings.server_calls_max),
            access=RemotingAccess(users, served_codes=frozenset(HANDLERS),
                                  client_groups=clients.groups_of_client)
            if users is not None else None)
        self.server = RemotingServer(self.front, ssl_context=ssl_context)
        self.transaction_check = TransactionCheck(self.front)
        self.registrar = BrokerRegistrar(self.front, tls=tls)
        self._flusher: asyncio.Task[None] | None = None

    async def start(self) -> int:
        port = await self.server.start()
        self._flusher = asyncio.create_task(
            self.front.offsets.flush_loop(self.front.settings.offsets_flush_interval_ms),
            name="remoting-offsets")
        self.transaction_check.start()
        self.registrar.start()
        return port

    async def close(self) -> None:
        await self.registrar.close()  # first: name servers stop routing clients here
        await self.transaction_check.close()
        self.held.close()
        await self.server.close()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        written = await self.front.offsets.flush()
        await self.front.link.close()
        log.info("remoting stopped", extra={"offsets_written": written})
