"""mqstore.client signs its requests when given an account's keys, blocking and async."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mqstore.client import AsyncProducer, BadRequestError, OutgoingMessage, Producer
from mqstore.services.auth import load_users
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import WriterSettings
from mqstore.services.writer import create_app
from mqstore.storage import MessageStore
from tests.services.serving import app_on_thread

USERS_FILE = """\
accounts:
  - {accessKey: producer1, secretKey: producer-secret, topicPerms: [Orders=PUB]}
"""


def test_producers_sign_with_keys_and_are_refused_without(store: MessageStore,
                                                          tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text(USERS_FILE)
    users = load_users(tmp_path / "plain_acl.yml")
    app = create_app(store, WriterSettings(), users=users,
                     auth=AuthSettings(users_file=str(tmp_path / "plain_acl.yml")))
    with app_on_thread(app) as url:
        with Producer(url, access_key="producer1", secret_key="producer-secret") as producer:
            assert producer.send("Orders", b"a").ok
            assert producer.send_batch([OutgoingMessage("Orders", b"b")])[0].ok
            with pytest.raises(BadRequestError) as forbidden:
                producer.send("Audit", b"c")
            assert (forbidden.value.http_status, forbidden.value.status) == (403, "FORBIDDEN")
        with Producer(url) as anonymous, pytest.raises(BadRequestError) as unauthorized:
            anonymous.send("Orders", b"d")
        assert unauthorized.value.http_status == 401

        async def send_async() -> bool:
            async with AsyncProducer(url, access_key="producer1",
                                     secret_key="producer-secret") as producer:
                return (await producer.send("Orders", b"e")).ok

        assert asyncio.run(send_async())
