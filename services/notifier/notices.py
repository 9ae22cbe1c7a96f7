"""How the notifier learns that queues moved: the indexer's notice stream, and its own refresh.

`NoticeFeed` applies what it learns to the view and wakes the held pulls that concern
it.  Two sources call it:

* `NoticeStream` follows `GET <indexer_url>/v1/notices` (NDJSON, one object per line):

      {"type": "snapshot", "queues": [[topic, queue_id, min_offset, max_offset], ...]}
      {"type": "advanced", "queues": [[topic, queue_id, next_offset], ...]}
      {"type": "heartbeat"}

  A stream that ends, fails, sends a malformed line, or stays silent for
  `notice_silence_max_ms` is reconnected after a backoff (`notice_reconnect_initial_ms`,
  doubling to `notice_reconnect_max_ms`, with jitter); the snapshot that starts each stream
  is taken as the truth.
* `refresh_loop` runs the view's `refresh` every `refresh_interval_ms`: it finds new
  queues and files retention deleted, and while the stream is down it also raises max
  offsets to what the indexer's `dispatched` file vouches for, so long polls still wake
  (within a refresh interval instead of within milliseconds).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
import urllib.parse
from collections.abc import Iterable, Mapping

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from mqstore.services.auth.http_signature import Signer
from mqstore.services.auth.users import Users
from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.config_file import NotifierSettings
from mqstore.services.notifier.held import NOTICE, REFRESH, HeldPulls
from mqstore.services.notifier.metrics import NotifierMetrics
from mqstore.storage import ConfigError, StoreError
from mqstore.storage.reads.store_view import StoreView

log = logging.getLogger("mqstore.notifier")

NDJSON_MEDIA_TYPE = "application/x-ndjson"
QueueKey = tuple[str, int]


class NoticeFormatError(ValueError):
    """A stream line that is not one of the three notices."""


class NoticeFeed:
    def __init__(self, view: StoreView, held: HeldPulls, metrics: NotifierMetrics) -> None:
        self._view = view
        self._helds = [held]
        """Every table of held pulls the view's advances wake: the HTTP API's, and the
        remoting front's when it runs in this process."""
        self._metrics = metrics

    def snapshot(self, queues: Iterable[tuple[str, int, int, int]]) -> int:
        """Apply a snapshot; returns the pulls woken."""
        return self._notify(self._view.apply_snapshot(queues), NOTICE)

    def advanced(self, notices: Mapping[QueueKey, int]) -> int:
        """Apply an "advanced" notice; returns the pulls woken."""
        return self._notify(self._view.advance(notices), NOTICE)

    def refresh(self, *, vouch_from_dispatched: bool) -> int:
        return self._notify(
            self._view.refresh(vouch_from_dispatched=vouch_from_dispatched), REFRESH)

    def add_held(self, held: HeldPulls) -> None:
        self._helds.append(held)

    def _notify(self, advanced: Mapping[QueueKey, int], cause: str) -> int:
        if not advanced:
            return 0
        return sum(held.notify(advanced, cause) for held in self._helds)

    def line(self, raw: bytes) -> str:
        """Apply one stream line; returns its type (`NoticeFormatError` for anything
        else)."""
        try:
            document = json.loads(raw)
        except ValueError as error:
            raise NoticeFormatError(f"not JSON: {error}: {raw[:80]!r}") from None
        kind = document.get("type") if isinstance(document, dict) else None
        if kind == "heartbeat":
            self._metrics.notice(kind)
        elif kind == "advanced":
            self._metrics.notice(kind)
            self.advanced({(row[0], row[1]): row[2] for row in _rows(document, 3)})
        elif kind == "snapshot":
            self._metrics.notice(kind)
            self.snapshot([(row[0], row[1], row[2], row[3]) for row in _rows(document, 4)])
        else:
            raise NoticeFormatError(f"unknown notice: {raw[:80]!r}")
        return str(kind)


def _rows(document: dict[str, object], width: int) -> list[tuple[str, int, int, int]]:
    """The `queues` rows of a notice, checked: [topic, n, n(, n)] with n >= 0 integers
    (padded to four for the type)."""
    rows = document.get("queues")
    if not isinstance(rows, list) or not all(
            isinstance(row, list) and len(row) == width and isinstance(row[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in row[1:])
            for row in rows):
        raise NoticeFormatError(f"queues must be rows of [topic, {width - 1} integers]")
    return [(row[0], row[1], row[2], row[3] if width == 4 else 0) for row in rows]


class NoticeStream:
    """Follows the indexer's stream until cancelled, reconnecting as the module says."""

    def __init__(self, feed: NoticeFeed, settings: NotifierSettings, *,
                 rng: random.Random | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 signer: Signer | None = None) -> None:
        """`signer`: sign each connection's request (the indexer checks users)."""
        self._feed = feed
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._signer = signer
        self._settings = settings
        self._stopped = False
        self._url = settings.indexer_url.rstrip("/") + "/v1/notices"
        self._rng = rng or random.Random()
        self.connected = False
        self.connections_total = 0
        self._snapshot_seen = False

    def stop(self) -> None:
        """No further attempt after the current one: the loop ends even if a cancellation
        is lost inside the HTTP client (seen once: a SIGTERM right after start left the
        notifier reconnecting to a stopped indexer for 90 s instead of exiting)."""
        self._stopped = True

    async def run(self) -> None:
        failures = 0
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                total=None, connect=self._settings.notice_silence_max_ms / 1000)) as session:
            while not self._stopped:
                self._snapshot_seen = False
                try:
                    await self._follow(session)
                except (aiohttp.ClientError, OSError, TimeoutError, HttpProcessingError,
                        NoticeFormatError, StoreError) as error:
                    log.warning("notice stream from %s failed: %r", self._url, error)
                finally:
                    self.connected = False
                # A stream that worked (delivered its snapshot) restarts the backoff.
                failures = 1 if self._snapshot_seen else failures + 1
                await asyncio.sleep(self._delay_s(failures))

    async def _follow(self, session: aiohttp.ClientSession) -> None:
        """Read one stream to its end."""
        settings = self._settings
        silence_s = settings.notice_silence_max_ms / 1000
        signed = (self._signer.headers("GET", urllib.parse.urlsplit(self._url).path, None)
                  if self._signer is not None else None)
        async with session.get(self._url, ssl=self._ssl, headers=signed) as response:
            if response.status != 200 or response.content_type != NDJSON_MEDIA_TYPE:
                raise NoticeFormatError(f"GET {self._url} answered {response.status} "
                                        f"{response.content_type}")
            self.connected = True
            self.connections_total += 1
            log.info("notice stream connected", extra={"url": self._url})
            loop = asyncio.get_running_loop()
            content = response.content
            # One deadline moved on by each line, not a task per line.
            async with asyncio.timeout(silence_s) as silence:
                while True:
                    line = await content.readuntil(b"\n",
                                                   max_size=settings.notice_line_bytes_max)
                    if not line.endswith(b"\n"):  # the end (a cut last line is dropped)
                        log.info("notice stream ended", extra={"url": self._url})
                        return
                    silence.reschedule(loop.time() + silence_s)
                    if self._feed.line(line) == "snapshot":
                        self._snapshot_seen = True

    def _delay_s(self, failures: int) -> float:
        settings = self._settings
        ceiling_ms = min(settings.notice_reconnect_max_ms,
                         settings.notice_reconnect_initial_ms * (1 << min(failures - 1, 20)))
        return self._rng.uniform(ceiling_ms / 2, ceiling_ms) / 1000


def notice_signer(users: Users, auth: AuthSettings) -> Signer:
    """The notifier signs its notice stream with `auth.internal_access_key`, or the first
    admin of the users file: the stream names every topic, so the indexer serves it to
    admins only.  No such account: the notifier does not start."""
    account = (users.account(auth.internal_access_key) if auth.internal_access_key
               else users.first_admin())
    if account is None or not account.admin:
        named = auth.internal_access_key or "an admin account"
        raise ConfigError(f"auth.users_file {users.source}: no admin account "
                          f"{named!r} for the notifier's notice stream (set "
                          f"auth.internal_access_key to an admin's accessKey)")
    return Signer(account.access_key, account.secret_key)


async def refresh_loop(feed: NoticeFeed, settings: NotifierSettings,
                       stream: NoticeStream | None) -> None:
    """Refresh the view every `refresh_interval_ms` until cancelled."""
    interval_s = settings.refresh_interval_ms / 1000
    while True:
        await asyncio.sleep(interval_s)
        connected = stream is not None and stream.connected
        try:
            feed.refresh(vouch_from_dispatched=not connected)
        except StoreError as error:
            log.error("view refresh failed: %s", error)
