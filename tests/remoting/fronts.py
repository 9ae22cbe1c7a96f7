"""A `RemotingFront` over a store directory, not listening: the handlers' tests call
`answer_to` on its `Front` directly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from mqstore.services.auth import load_users
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.tls import TlsSettings
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.service import RemotingFront
from mqstore.storage import StoreConfig
from mqstore.storage.files.consumer_offsets import ConsumerOffsets
from mqstore.storage.reads.store_view import StoreView


@contextlib.contextmanager
def front_over(store_dir: Path, *, offsets: ConsumerOffsets | None = None,
               config: StoreConfig | None = None,
               users_file: Path | None = None,
               settings: RemotingSettings | None = None,
               tls: TlsSettings | None = None) -> Iterator[Front]:
    """The front of `store_dir` (made if missing), with its own offsets unless given, the
    store host 127.0.0.1:9876 unless `config` says otherwise, the users of `users_file`
    when given (every request checked), `settings` (default: port 0) and the config's
    `tls` section (its registrar's name-server links)."""
    store_dir.mkdir(parents=True, exist_ok=True)
    view = StoreView.open(store_dir, config or StoreConfig(store_host="127.0.0.1:9876"))
    try:
        yield RemotingFront(view, offsets or ConsumerOffsets(store_dir, lock_timeout_ms=1000),
                            settings or RemotingSettings(port=0), queue_count_max=8,
                            users=load_users(users_file) if users_file else None,
                            tls=tls).front
    finally:
        view.close()
