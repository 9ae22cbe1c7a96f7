"""`run_writer(config)`: the commitlog-writer process, from open to a graceful stop.

    resolve the role (store.role; `replication.role_by_hostname`: the master's host only)
    open the store (takes the single-writer lock; a second writer fails here)
    → a master serves replication on its port; a follower connects to its master
    → serve until SIGTERM or SIGINT, or until the store stops itself (a failed sync)
    → /readyz 503, stop accepting, let in-flight requests finish (`shutdown_timeout_ms`)
    → replication stops (followers disconnected / the master connection closed)
    → store.close(): drains commit and flush, writes the checkpoint, removes `abort`

Exit status: 0 after a clean stop, 1 if the store had stopped itself: a failed sync is
fatal, so the writer exits for its supervisor (Kubernetes, `mqstore up`) to restart it, and
the next open recovers from the files (the abort marker stays).
"""

from __future__ import annotations

import dataclasses
import logging
import socket

from aiohttp import web

from mqstore.services.auth import users_of
from mqstore.services.common.observability.logs import configure_logging
from mqstore.services.common.process.lifecycle import serve
from mqstore.services.common.process.loops import run_service
from mqstore.services.common.settings.config_file import ServiceConfig, WriterSettings
from mqstore.services.common.settings.tls import client_context, server_context
from mqstore.services.writer.app import METRICS, PRODUCE, STATE, create_app
from mqstore.services.writer.delay_metrics import delay_schedule_metrics
from mqstore.services.writer.delay_schedule import DelaySchedule
from mqstore.services.writer.forward_server import ForwardServer
from mqstore.services.writer.replication_follower import ReplicationClient
from mqstore.services.writer.replication_master import ReplicationServer
from mqstore.services.writer.timer_schedule import TimerSchedule
from mqstore.storage import BrokerRole, ConfigError, MessageStore, StoreConfig

log = logging.getLogger("mqstore.writer")


def run_writer(config: ServiceConfig) -> int:
    """Run until a signal; return the process exit status."""
    if not __debug__:
        raise ConfigError("the writer refuses to run under python -O: its asserts guard "
                          "invariants of the data it writes")
    configure_logging(service="writer", level=config.writer.log_level)
    return run_service(_serve(config), event_loop=config.writer.event_loop)


def with_role(config: ServiceConfig, *, role: BrokerRole | None,
              master: str | None) -> ServiceConfig:
    """`mqstore writer --role R --master HOST:PORT`: the flags over the file (checked again)."""
    store, replication = config.store, config.replication
    if role is BrokerRole.FOLLOWER:
        store = follower_store(store)
    elif role is not None:
        store = dataclasses.replace(store, role=role)
    if master is not None:
        replication = dataclasses.replace(replication, master=master)
    return dataclasses.replace(config, store=store, replication=replication)


def resolve_role(config: ServiceConfig, *, hostname: str) -> ServiceConfig:
    """With `replication.role_by_hostname`: the host named by `master`'s first DNS label runs
    `store.role`; any other follows `master`."""
    replication = config.replication
    if not replication.role_by_hostname:
        return config
    master_host = replication.master_address[0].split(".")[0]
    if hostname.split(".", maxsplit=1)[0] == master_host:
        replication = dataclasses.replace(replication, master="", role_by_hostname=False)
        return dataclasses.replace(config, replication=replication)
    return dataclasses.replace(
        config, store=follower_store(config.store),
        replication=dataclasses.replace(replication, role_by_hostname=False))


def follower_store(store: StoreConfig) -> StoreConfig:
    """`store` as a follower runs it: never with the pool or filler records (its log is the
    master's byte for byte; RocketMQ too disables the pool on slaves), so a file shared with
    the master may turn them on."""
    if store.pool_enabled or store.group_commit_align_bytes:
        log.info("a follower runs without the pool and group commit alignment")
    return dataclasses.replace(store, role=BrokerRole.FOLLOWER, pool_enabled=False,
                               group_commit_align_bytes=0)


def writer_store_config(store: StoreConfig) -> StoreConfig:
    """The writer of the three services: the indexer process dispatches, so the writer does
    not, and it publishes its positions for the indexer to read."""
    return dataclasses.replace(store, dispatch_enabled=False, positions_publish_enabled=True)


def start_delay_schedule(app: web.Application, store: MessageStore,
                         settings: WriterSettings) -> DelaySchedule:
    """A master's delay schedule over the app's produce core, its series served on the app's
    /metrics (delay_metrics.py), started on the running loop."""
    core = app[PRODUCE]
    schedule = DelaySchedule(core, store, settings)
    app[METRICS].add(delay_schedule_metrics(schedule, levels=core.delay_levels))
    schedule.start()
    return schedule


async def _serve(config: ServiceConfig) -> int:
    config = resolve_role(config, hostname=socket.gethostname())
    settings = config.writer
    users = users_of(config.auth)  # a bad users file stops the start before the store opens
    tls = server_context(config.tls)
    server = (ReplicationServer(config.replication, ssl_context=tls)
              if config.store.role.is_master else None)
    store = MessageStore.open(config.data_dir, writer_store_config(config.store),
                              on_readable=server.notify if server is not None else None)
    try:
        client = None
        forward = None
        schedule = None
        timers = None
        if server is not None:
            await server.start(store)
        else:
            client = ReplicationClient(store, config.replication, ssl_context=client_context(
                config.tls, host=config.replication.master_address[0]))
            client.start()
        try:
            app = create_app(store, settings, follower=client, topics=config.topics,
                             users=users, auth=config.auth)
            forward = ForwardServer(app[PRODUCE], settings) if (
                settings.forward_enabled and client is None) else None
            if forward is not None:
                await forward.start(data_dir=config.data_dir)
            if settings.delay_enabled and client is None:
                schedule = start_delay_schedule(app, store, settings)
            timers = TimerSchedule.started(app[PRODUCE], store, settings,
                                           follower=client is not None)

            def on_stopping() -> None:
                app[STATE].stopping = True

            await serve(app, settings, log=log, failure=lambda: store.failure,
                        on_stopping=on_stopping, ssl_context=tls,
                        access_log=log.getChild("access") if settings.access_log_enabled
                        else None,
                        details={"data_dir": str(config.data_dir),
                                 "flush_mode": config.store.flush_mode.value,
                                 "role": store.config.role.value, "config": config.source})
        finally:
            if schedule is not None:
                await schedule.stop()
            if timers is not None:
                await timers.stop()
            if forward is not None:
                await forward.close()
            if server is not None:
                await server.close()
            if client is not None:
                await client.close()
    finally:
        store.close()
        if schedule is not None:
            schedule.persist_after_close(clean=store.failure is None)
        if timers is not None:
            timers.persist_after_close(clean=store.failure is None)
    failure = store.failure
    log.info("stopped", extra={"clean": failure is None, "failure": failure})
    return 0 if failure is None else 1
