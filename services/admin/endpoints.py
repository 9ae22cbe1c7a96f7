"""Where the services are: the URLs the admin commands call, found the way the other
commands find them.

Precedence, lowest first: `mqstore up`'s defaults on 127.0.0.1
(services/common/process/local_ports.py), the services' config file (`--config`: each
section's host and port, https when its `tls` section is on), then the URLs given (`--url`
for the notifier, as `mqstore consume` takes it, `--writer-url` as `mqstore produce --url`
takes it, `--indexer-url`).
"""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path
from urllib.parse import urlsplit

from mqstore.services.admin.client import AdminError
from mqstore.services.common.process.local_ports import UP_PORTS
from mqstore.services.common.settings.config_file import load_config
from mqstore.services.common.settings.tls import client_context
from mqstore.storage import ConfigError

DEFAULT_HOST = "127.0.0.1"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
"""A service listening on every address is reached on loopback from its own machine."""


@dataclasses.dataclass(frozen=True)
class Endpoints:
    writer_url: str
    indexer_url: str
    notifier_url: str
    ssl_context: ssl.SSLContext | None = None
    """How https URLs are verified (the config file's tls section); None: the system's."""

    def url(self, service: str) -> str:
        return {"writer": self.writer_url, "indexer": self.indexer_url,
                "notifier": self.notifier_url}[service]


def find_endpoints(*, config: Path | None, notifier_url: str | None, writer_url: str | None,
                   indexer_url: str | None) -> Endpoints:
    found = {name: f"http://{DEFAULT_HOST}:{UP_PORTS[name]}"
             for name in ("writer", "indexer", "notifier")}
    context = None
    if config is not None:
        found, context = _from_config(config)
    given = {"writer": writer_url, "indexer": indexer_url, "notifier": notifier_url}
    for name, url in given.items():
        if url is not None:
            found[name] = _checked_url(url, f"--{'url' if name == 'notifier' else name + '-url'}")
    return Endpoints(writer_url=found["writer"], indexer_url=found["indexer"],
                     notifier_url=found["notifier"], ssl_context=context)


def _from_config(path: Path) -> tuple[dict[str, str], ssl.SSLContext | None]:
    if not path.is_file():
        raise AdminError(f"--config {path}: no such file")
    try:
        loaded = load_config(path)
    except ConfigError as error:
        raise AdminError(f"--config {path}: {error}") from None
    scheme = "https" if loaded.tls.enabled else "http"
    urls: dict[str, str] = {}
    for name, section in (("writer", loaded.writer), ("indexer", loaded.indexer),
                          ("notifier", loaded.notifier)):
        if section.port == 0:
            raise AdminError(f"--config {path}: {name}.port is 0 (chosen by the system at "
                             f"start): give the {name}'s URL")
        host = DEFAULT_HOST if section.host in WILDCARD_HOSTS else section.host
        urls[name] = f"{scheme}://{_bracketed(host)}:{section.port}"
    try:
        context = client_context(loaded.tls, host=DEFAULT_HOST)
    except ConfigError as error:
        raise AdminError(f"--config {path}: {error}") from None
    return urls, context


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _checked_url(url: str, option: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError as error:
        raise AdminError(f"{option} {url!r}: not a URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AdminError(f"{option} {url!r}: not an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise AdminError(f"{option} {url!r}: a service's base URL has no query or fragment")
    return url.rstrip("/")
