"""`run_notifier(config)`: the pull-notifier process, from open to a graceful stop.

    open a view of `data_dir` (read-only: no lock, so replicas and the writer and the
    indexer share the directory) and the group offsets (`config/consumer-offsets/`)
    → serve until SIGTERM or SIGINT (the notice stream and the refresh loop run meanwhile)
    → /readyz 503, held pulls answered at once, in-flight requests finish
      (`shutdown_timeout_ms`) → close the view

Exit status: 0 after a stop on a signal.
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse

from mqstore.services.auth import users_of
from mqstore.services.common.links.forward_secret import secret_path
from mqstore.services.common.observability.logs import configure_logging
from mqstore.services.common.process.lifecycle import serve
from mqstore.services.common.process.loops import run_service
from mqstore.services.common.settings.config_file import ServiceConfig
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.tls import client_context, server_context
from mqstore.services.notifier.app import create_app
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.services.notifier.remoting.topics import TopicTable
from mqstore.services.notifier.remoting.writer_link import WriterLink
from mqstore.storage import ConfigError
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView

log = logging.getLogger("mqstore.notifier")


def run_notifier(config: ServiceConfig) -> int:
    """Run until a signal; return the process exit status."""
    if not __debug__:
        raise ConfigError("the notifier refuses to run under python -O: its asserts guard "
                          "what it reads and the offsets it writes")
    configure_logging(service="notifier", level=config.notifier.log_level)
    return run_service(_serve(config), event_loop=config.notifier.event_loop)


def front_settings(config: ServiceConfig) -> RemotingSettings:
    """The remoting front's settings under the `topics` section's rules: the front creates
    a topic on a send (into `config/topics.json`, which the writer reads as created
    explicitly) only if auto-creation is on in both, and holds no more topics than the
    writer admits (services/writer/topic_gate.py)."""
    remoting = config.remoting
    return dataclasses.replace(
        remoting,
        topic_auto_create_enabled=remoting.topic_auto_create_enabled and config.topics.auto_create,
        topics_max=min(remoting.topics_max, config.topics.topics_max))


async def _serve(config: ServiceConfig) -> int:
    settings = config.notifier
    if config.tls.enabled and settings.indexer_url.startswith("http://"):
        raise ConfigError(f"{config.source}: notifier.indexer_url={settings.indexer_url!r} "
                          f"must be https:// with tls on (the indexer serves only TLS)")
    tls = server_context(config.tls)
    indexer_host = urllib.parse.urlsplit(settings.indexer_url).hostname or ""
    users = users_of(config.auth)
    view = StoreView.open(config.data_dir, config.store)
    try:
        offsets = ConsumerOffsets(config.data_dir,
                                  lock_timeout_ms=settings.offsets_lock_timeout_ms,
                                  groups_max=settings.groups_max,
                                  file_size_bytes_max=settings.group_offsets_file_bytes_max)

        front = front_settings(config)
        topics = TopicTable(view.directory, queue_count_max=config.writer.topic_queue_count,
                            topics_max=front.topics_max,
                            topic_size_bytes_max=view.config.topic_size_bytes_max,
                            on_disk=view.topics,
                            reply_topic=f"{front.cluster_name}_REPLY_TOPIC")
        remoting = RemotingFront(view, offsets, front, topics=topics,
                                 queue_count_max=config.writer.topic_queue_count,
                                 ssl_context=tls, users=users, tls=config.tls) \
            if config.remoting.enabled else None
        # Nacks send their copies on the front's link, or on one of their own without it.
        link = None if remoting else WriterLink(front, secret_path=secret_path(view.directory))
        app = create_app(view, offsets, settings, remoting=remoting, topics=topics,
                         indexer_ssl=client_context(config.tls, host=indexer_host),
                         users=users, auth=config.auth, writer_link=link,
                         retry_max_times=front.retry_max_times)
        await serve(app, settings, log=log, failure=lambda: None, ssl_context=tls,
                    details={"data_dir": str(config.data_dir),
                             "indexer_url": settings.indexer_url, "config": config.source})
    finally:
        view.close()
    log.info("stopped")
    return 0
