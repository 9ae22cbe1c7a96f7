"""`BrokerRegistrar`: the front registers its broker with every name server, as RocketMQ's
broker does (`BrokerController.registerBrokerAll`), when `remoting.namesrv_addresses` is set.

    round task      every register_topics_check_interval_ms: the topic table as it would
                    be registered (registration_requests.py); changed since the last
                    round, or register_interval_ms since the last: advance the data
                    version if it changed, resolve every name again (≤ register_timeout_ms
                    each; a name that fails keeps its last addresses), start a task per new
                    address (≤ name_servers_max), stop those of addresses gone, and wake
                    every name server's task
    name server     one task each: wait to be woken, then REGISTER_BROKER on its own
                    connection (namesrv_link.py) within register_timeout_ms; the outcome
                    is counted and a failure logged, and the next wake tries again.  A
                    wake while a registration runs is kept (one flag, never a queue), so a
                    slow or dead name server holds only its own task
    join            once, after the first registration a name server accepts: a broker
                    holding no topic of its own takes its cluster's topics from that name
                    server (cluster_topics.py; `cluster_topics_copy_enabled`)
    close           stop the tasks, UNREGISTER_BROKER to every name server at once (each
                    within register_timeout_ms), close the connections

Everything runs on the notifier's event loop and never waits on the front's requests.
With `remoting.namesrv_tls_enabled` every link is TLS, verified with the `tls` section's
`ca_file` against the name as written in `namesrv_addresses` (namesrv_link.py); a name
server whose certificate does not verify counts as unreachable, and is logged.

Counts (`counts`, exported as `mqstore_remoting_namesrv_registrations_total`): by name
server address and outcome: success, refused (an answer not SUCCESS), timeout, unreachable
(refused connection, closed link, DNS failure).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import ssl
import time

from mqstore.services.common.links.framing import FrameLimits, FrameWatchdog
from mqstore.services.common.settings.tls import TlsSettings, client_context
from mqstore.services.notifier.remoting import cluster_topics
from mqstore.services.notifier.remoting import registration_requests as requests
from mqstore.services.notifier.remoting.codes import SUCCESS, RemotingError
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.frame import Command, FrameError
from mqstore.services.notifier.remoting.namesrv_link import NamesrvLink, resolve, split_address
from mqstore.services.notifier.remoting.topics import TopicConfig
from mqstore.storage import ConfigError

log = logging.getLogger("mqstore.remoting")

OUTCOMES = ("success", "refused", "timeout", "unreachable")


@dataclasses.dataclass
class _NameServer:
    link: NamesrvLink
    woken: asyncio.Event
    task: asyncio.Task[None] | None = None


class BrokerRegistrar:
    def __init__(self, front: Front, *, tls: TlsSettings | None = None) -> None:
        """`tls`: the config's `tls` section, which the links verify name servers with when
        `remoting.namesrv_tls_enabled` (a ConfigError without a certificate in it)."""
        settings = front.settings
        self._front = front
        self._settings = settings
        self._names = settings.namesrv_address_list
        self._contexts = _link_contexts(settings.namesrv_tls_enabled, tls or TlsSettings(),
                                        self._names)
        """Each name's TLS context (checking its host), or None for each: plain TCP."""
        self._watchdog = FrameWatchdog(FrameLimits(
            frame_size_bytes_max=settings.frame_size_bytes_max,
            frame_read_timeout_ms=settings.frame_read_timeout_ms,
            write_buffer_bytes_max=settings.write_buffer_bytes_max,
            write_drain_timeout_ms=settings.register_timeout_ms, setting_prefix="remoting."))
        self._resolved: dict[str, list[tuple[str, int]]] = {}
        """Each configured name's addresses at its last successful resolution."""
        self._servers: dict[tuple[str, int], _NameServer] = {}
        self._topics: dict[str, TopicConfig] | None = None
        self.version = requests.DataVersion()
        self._body = b""
        self._round: asyncio.Task[None] | None = None
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        """Registrations by (name server address, outcome)."""
        self._joined = False
        """The join was tried (or is not wanted: `start` found topics of this broker's)."""

    @property
    def enabled(self) -> bool:
        return bool(self._names)

    def start(self) -> None:
        if self.enabled:
            # Decided before any client can auto-create a topic here.
            self._joined = not self._settings.cluster_topics_copy_enabled or \
                cluster_topics.holds_topics(self._front)
            self._round = asyncio.create_task(self._rounds(), name="remoting-registrar")

    async def close(self) -> None:
        """Stop registering, unregister from every name server, close the connections."""
        if self._round is not None:
            self._round.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._round
        servers = list(self._servers.values())
        for server in servers:
            await _cancel(server.task)
        await asyncio.gather(*(self._unregister(server.link) for server in servers))
        for server in servers:
            server.link.close()
        self._servers.clear()
        await self._watchdog.stop()

    async def _rounds(self) -> None:
        interval_s = self._settings.register_interval_ms / 1000
        check_s = self._settings.register_topics_check_interval_ms / 1000
        last_round_s = -interval_s
        while True:
            try:
                changed = self._check_topics()
            except OSError as error:  # config/topics.json unreadable for now
                log.warning("topic table not read for registration: %r", error)
                changed = False
            now_s = time.monotonic()
            if changed or now_s - last_round_s >= interval_s:
                last_round_s = now_s
                await self._resolve_all()
                for server in self._servers.values():
                    server.woken.set()
            await asyncio.sleep(check_s)

    def _check_topics(self) -> bool:
        """Take the topic table as it is now; True (and a new data version) if it changed."""
        front = self._front
        groups = set(front.clients.groups()) | set(front.offsets.groups())
        topics = requests.registered_topics(
            front.topics, groups, auto_create=self._settings.topic_auto_create_enabled)
        if topics == self._topics:
            return False
        if self._topics is not None:
            self.version.advance()
        self._topics = topics
        self._body = requests.register_body(topics, self.version)
        return True

    async def _resolve_all(self) -> None:
        for name in self._names:
            try:
                self._resolved[name] = await resolve(
                    name, timeout_ms=self._settings.register_timeout_ms)
            except (OSError, TimeoutError) as error:
                self.counts[(name, "unreachable")] += 1
                log.warning("name server %s not resolved (kept its last addresses %s): %r",
                            name, self._resolved.get(name, []), error)
        wanted: dict[tuple[str, int], str] = {}
        """Each address, and the first name that resolved to it (its TLS host)."""
        for name, addresses in self._resolved.items():
            for address in addresses:
                wanted.setdefault(address, name)
        if len(wanted) > self._settings.name_servers_max:
            left_out = list(wanted)[self._settings.name_servers_max:]
            log.warning("registering with %d name servers of %d (remoting.name_servers_max); "
                        "left out: %s", self._settings.name_servers_max, len(wanted), left_out)
            wanted = dict(list(wanted.items())[:self._settings.name_servers_max])
        for address in [address for address in self._servers if address not in wanted]:
            server = self._servers.pop(address)
            await _cancel(server.task)
            server.link.close()
            for key in [key for key in self.counts if key[0] == server.link.address]:
                del self.counts[key]  # a pod gone for good: its series go too (bounded)
            log.info("name server %s no longer resolved: not registering with it",
                     server.link.address)
        for address, name in wanted.items():
            if address not in self._servers:
                self._servers[address] = self._serve(address, name)

    def _serve(self, address: tuple[str, int], name: str) -> _NameServer:
        link = NamesrvLink(*address, watchdog=self._watchdog, ssl_context=self._contexts[name],
                           server_hostname=split_address(name)[0])
        server = _NameServer(link, asyncio.Event())
        server.task = asyncio.create_task(self._register_forever(server),
                                          name=f"remoting-register-{server.link.address}")
        return server

    async def _register_forever(self, server: _NameServer) -> None:
        while True:
            await server.woken.wait()
            server.woken.clear()
            outcome = await self._register(server.link)
            self.counts[(server.link.address, outcome)] += 1
            if outcome == "success" and not self._joined:
                self._joined = True
                await self._join(server.link)

    async def _join(self, link: NamesrvLink) -> None:
        """Take the cluster's topics: this broker held none at start (cluster_topics.py)."""
        try:
            created = await cluster_topics.copy_cluster_topics(self._front, link)
        except (OSError, TimeoutError, FrameError, RemotingError, ValueError) as error:
            log.warning("the cluster's topics not taken from name server %s: %r; create "
                        "them by hand (mqadmin updateTopic -c)", link.address, error)
            return
        if created:
            log.info("joined cluster %s empty: created its %d topics from name server %s: %s",
                     self._settings.cluster_name, len(created), link.address,
                     ", ".join(created[:20]))

    async def _register(self, link: NamesrvLink) -> str:
        request = requests.register_request(
            self._settings, broker_address=self._front.broker_address, body=self._body,
            opaque=link.next_opaque())
        outcome = await self._call(link, request, "registration")
        if outcome == "success":
            log.debug("registered with name server %s (data version %d)", link.address,
                      self.version.counter)
        return outcome

    async def _unregister(self, link: NamesrvLink) -> None:
        request = requests.unregister_request(
            self._settings, broker_address=self._front.broker_address,
            opaque=link.next_opaque())
        if await self._call(link, request, "unregistration") == "success":
            log.info("unregistered from name server %s", link.address)

    async def _call(self, link: NamesrvLink, request: Command, what: str) -> str:
        """The outcome of one call, logged when it is not a success."""
        timeout_ms = self._settings.register_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                answer = await link.call(request)
        except TimeoutError:
            log.warning("%s with name server %s unanswered in %d ms "
                        "(remoting.register_timeout_ms); trying again next round", what,
                        link.address, timeout_ms)
            return "timeout"
        except (OSError, FrameError) as error:  # refused, reset, a frame bound broken
            log.warning("%s with name server %s failed: %r; trying again next round", what,
                        link.address, error)
            return "unreachable"
        if answer.code != SUCCESS:
            log.warning("%s refused by name server %s: code %d, %s", what, link.address,
                        answer.code, answer.remark)
            return "refused"
        return "success"


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _link_contexts(enabled: bool, tls: TlsSettings, names: tuple[str, ...]
                   ) -> dict[str, ssl.SSLContext | None]:
    """Each configured name's TLS context (None for each unless `enabled`); a ConfigError
    when TLS is wanted with no `tls` section, or its `ca_file` cannot be loaded."""
    if not enabled:
        return dict.fromkeys(names)
    if not tls.enabled:
        raise ConfigError("remoting.namesrv_tls_enabled needs the tls section (tls.cert_file, "
                          "tls.key_file, and tls.ca_file to verify the name servers)")
    return {name: client_context(tls, host=split_address(name)[0]) for name in names}
