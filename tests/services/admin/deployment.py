"""The three services on one directory, served from threads on 127.0.0.1, for the admin
commands to call as they call a running `mqstore up` (the helpers of the other service
tests: tests/services/serving.py, tests/services/notifier_stack.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.services.auth import load_users
from mqstore.services.cli.command import main
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import IndexerSettings, WriterSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.indexer.app import create_app as create_indexer_app
from mqstore.services.indexer.notices import NoticeHub
from mqstore.services.notifier import create_app as create_notifier_app
from mqstore.services.writer import create_app as create_writer_app
from mqstore.storage import Message, MessageStore
from mqstore.storage.dispatch.indexer import Indexer
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView
from tests.services.notifier_stack import settings as notifier_settings
from tests.services.serving import app_on_thread
from tests.storage.dispatch.split_helpers import indexer_config, wait_dispatched, writer_config

USERS_FILE = """\
accounts:
  - {accessKey: operator, secretKey: operator-secret, admin: true}
"""


@dataclasses.dataclass
class Deployment:
    store_dir: Path
    writer: MessageStore
    indexer: Indexer
    urls: dict[str, str]

    def put(self, topic: str, queue_id: int, body: bytes, *, keys: tuple[str, ...] = ()
            ) -> Any:
        result = self.writer.put(Message(topic, queue_id, body, keys=keys))
        assert result.ok
        wait_dispatched(self.indexer, self.writer.committed_position)
        return result

    def options(self) -> list[str]:
        return ["--url", self.urls["notifier"], "--writer-url", self.urls["writer"],
                "--indexer-url", self.urls["indexer"]]


@contextlib.contextmanager
def deployment(store_dir: Path, *, users_file: Path | None = None) -> Iterator[Deployment]:
    indexer_loop = asyncio.new_event_loop()
    indexers: list[Indexer] = []
    hub = NoticeHub(batch_latency_ms=2, subscriber_lines_max=10_000, snapshot=lambda: [
        (q.topic, q.queue_id, q.min_offset, q.max_offset) for q in indexers[0].queues])
    users = load_users(users_file) if users_file else None
    auth = AuthSettings(users_file=str(users_file)) if users_file else None
    with contextlib.ExitStack() as stack:
        writer = stack.enter_context(MessageStore.open(store_dir, writer_config()))
        indexer = stack.enter_context(Indexer.open(store_dir, indexer_config(),
                                                   listener=hub.threadsafe(indexer_loop)))
        indexers.append(indexer)
        urls = {"indexer": stack.enter_context(app_on_thread(
            create_indexer_app(indexer, hub, IndexerSettings(), users=users, auth=auth),
            loop=indexer_loop))}
        view = stack.enter_context(StoreView.open(store_dir, indexer_config()))
        notifier = create_notifier_app(view, ConsumerOffsets(store_dir, lock_timeout_ms=5000),
                                       notifier_settings(), users=users, auth=auth)
        urls["notifier"] = stack.enter_context(app_on_thread(notifier))
        # The writer looks at config/topics.json at every produce: a topic created by a
        # command binds at once (in service, within topics_file_check_interval_ms).
        urls["writer"] = stack.enter_context(app_on_thread(create_writer_app(
            writer, WriterSettings(), topics=TopicsSettings(topics_file_check_interval_ms=0),
            users=users, auth=auth)))
        yield Deployment(store_dir, writer, indexer, urls)
        hub.close()


@dataclasses.dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


def admin(capsys: pytest.CaptureFixture[str], *argv: str) -> Ran:
    """`mqstore admin ARGV` through the CLI's entry point, in this process."""
    capsys.readouterr()
    try:
        code = main(["admin", *argv])
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def until(check: Any, timeout_s: float = 20.0) -> Any:
    """Wait for the notifier to see what the indexer dispatched (its refresh pass)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "the notifier never saw the messages"
        time.sleep(0.02)
