"""One send as an HTTP call: what to POST and how to read the answer (no I/O here).

`send` posts JSON to /v1/topics/{topic}/messages; `send_batch` posts the binary batch to
/v1/batch and asks for binary results (JSON results cost the writer more than the put).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence

from mqstore.client.errors import ServerError
from mqstore.client.results import (
    SUCCESS_HTTP_STATUSES,
    SendResult,
    error_for,
    result_from_json,
    results_from_binary,
)
from mqstore.services.common.http.batch_wire import (
    BATCH_MEDIA_TYPE,
    RESULT_MEDIA_TYPE,
    BatchCodec,
    WireMessage,
)


@dataclasses.dataclass(frozen=True)
class Call:
    path: str
    body: bytes
    headers: Mapping[str, str]
    read: Callable[[bytes], list[SendResult]]

    def answer(self, http_status: int, body: bytes) -> list[SendResult]:
        """The results of a 200/202, or raise the error the answer means."""
        if http_status not in SUCCESS_HTTP_STATUSES:
            raise error_for(http_status, body)
        try:
            return self.read(body)
        except (ValueError, KeyError, TypeError) as error:
            raise ServerError(f"unreadable answer to {self.path}: {error!r}",
                              http_status=http_status) from None


def base_path(url: str) -> tuple[urllib.parse.SplitResult, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"url {url!r} must be http://host[:port][/prefix]")
    return parts, parts.path.rstrip("/")


def message_call(prefix: str, topic: str, body: bytes | str, *, queue_id: int | None,
                 tags: str | None, keys: Sequence[str],
                 properties: Mapping[str, str] | None) -> Call:
    if isinstance(keys, str):
        raise TypeError("keys must be a sequence of strings, not one string")
    document: dict[str, object] = {"queue_id": queue_id, "tags": tags, "keys": list(keys)}
    if isinstance(body, str):
        document["body"] = body
    else:
        document["body_base64"] = base64.b64encode(body).decode("ascii")
    if properties:
        document["properties"] = dict(properties)
    path = f"{prefix}/v1/topics/{urllib.parse.quote(topic, safe='')}/messages"
    return Call(path, json.dumps(document).encode(), {"Content-Type": "application/json"},
                lambda answer: [result_from_json(json.loads(answer))])


def batch_call(prefix: str, messages: Iterable[WireMessage]) -> Call:
    return Call(f"{prefix}/v1/batch", BatchCodec.encode(messages),
                {"Content-Type": BATCH_MEDIA_TYPE, "Accept": RESULT_MEDIA_TYPE},
                results_from_binary)
