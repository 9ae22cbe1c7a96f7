"""JSON calls to the services' HTTP APIs, for the interop tests that run them."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


def http_json(method: str, url: str, document: dict[str, Any] | None = None) -> Any:
    """The answer's JSON (urllib raises HTTPError for a 4xx or 5xx)."""
    data = json.dumps(document).encode() if document is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def quoted(topic: str) -> str:
    """A topic as a URL path segment (`%` and `|` are legal in topic names)."""
    return urllib.parse.quote(topic, safe="")
