"""`Admin`: what every command needs, the client and the services' URLs, in one value."""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from mqstore.services.admin.client import AdminClient
from mqstore.services.admin.endpoints import Endpoints


@dataclasses.dataclass(frozen=True)
class Admin:
    client: AdminClient
    endpoints: Endpoints

    def notifier(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        return self.client.call(self.endpoints.notifier_url, method, path, **options)

    def service(self, name: str, method: str, path: str, **options: Any) -> dict[str, Any]:
        return self.client.call(self.endpoints.url(name), method, path, **options)


def quoted(name: str) -> str:
    """A topic or group name as one path segment (names are checked by the server)."""
    return urllib.parse.quote(name, safe="")
