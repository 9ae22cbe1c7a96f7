"""The operator's HTTP client of a group's master pod (operator/group_client.py), signed with
the Broker's admin account and verified with its CA.

    PUT /v1/broker/permission              {"permission": 4 | 6}     notifier (the drain)
    GET /v1/groups                         every consumer group and the topics it committed on,
                                           from this group's notifier and every other group's
    GET /v1/groups/{group}/offsets?topic=  per group and topic
    GET /v1/topics/{topic}/queues          once per topic
    GET /v1/replication                    writer (the roll): its followers in sync

The lag is `mqstore admin groups describe`'s (services/admin/lag.py), summed over every group
and topic.  The consumer groups are those of every group's notifier, not only the drained
one's: a consumer group whose commits never reached the drained group (a client that
stopped before its offsets were sent) has read nothing there, and counts its queues whole.
Every call is bounded by the operator's `group_request_timeout_s` (5 s), so an
unreachable pod delays a pass by that much at most per call, and the first failure ends
the measure: the pass reports it and the next one tries again."""

from __future__ import annotations

import base64
import binascii
import json
import ssl
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import yaml

from mqstore.services.admin.lag import lag as topic_lag
from mqstore.services.auth.http_signature import Signer

from .group_client import GroupClient, GroupUnreachable
from .kube import KubeApi, object_path
from .pod_secrets import ACCESS_KEY_KEY, SECRET_KEY_KEY, USERS_KEY, secrets_in_use
from .spec import BrokerSpec

CA_KEY = "ca.crt"


class HttpGroupClient:
    def __init__(self, *, signer: Signer | None, ssl_context: ssl.SSLContext | None,
                 timeout_s: float) -> None:
        self._signer = signer
        self._ssl = ssl_context
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def set_permission(self, url: str, *, permission: int) -> None:
        await self._call("PUT", f"{url}/v1/broker/permission", {"permission": permission})

    async def lag(self, url: str, *, peers: Sequence[str] = ()) -> int:
        """The consumer groups of every notifier (`url` and the other groups' `peers`),
        each on every topic it committed on anywhere, measured on `url`: a group that reads
        a topic elsewhere but never committed here counts this group's queues whole."""
        wanted: dict[str, set[str]] = {}
        for source in (url, *peers):
            for row in (await self._call("GET", f"{source}/v1/groups"))["groups"]:
                wanted.setdefault(row["group"], set()).update(row["topics"])
        total = 0
        queues: dict[str, list[dict[str, int]]] = {}
        for group, topics in sorted(wanted.items()):
            for topic in sorted(topics):
                if topic not in queues:
                    queues[topic] = (await self._call(
                        "GET", f"{url}/v1/topics/{quote(topic, safe='')}/queues"))["queues"]
                if not queues[topic]:
                    continue  # not a topic of this group
                offsets = (await self._call(
                    "GET", f"{url}/v1/groups/{quote(group, safe='')}/offsets?"
                           f"{urlencode({'topic': topic})}"))["offsets"]
                total += topic_lag(queues[topic], {int(queue_id): offset
                                                   for queue_id, offset in offsets.items()})
        return total

    async def replication(self, url: str) -> Mapping[str, Any]:
        return await self._call("GET", f"{url}/v1/replication")

    async def _call(self, method: str, url: str, body: object = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self._signer is not None:
            headers.update(self._signer.headers_for_url(method, url, data))
        try:
            async with aiohttp.ClientSession(timeout=self._timeout) as session, \
                    session.request(method, url, data=data, headers=headers,
                                    ssl=self._ssl if self._ssl is not None else True) as answer:
                text = await answer.text()
                if answer.status != 200:
                    raise GroupUnreachable(f"{method} {url}: {answer.status} {text[:200]}")
                document: dict[str, Any] = json.loads(text)
                return document
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise GroupUnreachable(f"{method} {url}: {error or type(error).__name__}") \
                from None


def secret_text(secret: Mapping[str, Any], key: str) -> str | None:
    """A key of a Secret as the API server returns it (base64 `data`), or `stringData`."""
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None  # not what the API server returns: treated as absent


def admin_keys(secret: Mapping[str, Any]) -> tuple[str, str] | None:
    """The admin's (access key, secret key): the generated Secret's own two keys, else the
    first admin account of its plain_acl.yml (None: there is none)."""
    access, secret_key = secret_text(secret, ACCESS_KEY_KEY), secret_text(secret, SECRET_KEY_KEY)
    if access and secret_key:
        return access, secret_key
    document = yaml.safe_load(secret_text(secret, USERS_KEY) or "") or {}
    for account in document.get("accounts") or []:
        if account.get("admin") is True and account.get("accessKey") and \
                account.get("secretKey"):
            return str(account["accessKey"]), str(account["secretKey"])
    return None


async def open_http_client(api: KubeApi, broker: Mapping[str, Any], spec: BrokerSpec, *,
                           timeout_s: float) -> GroupClient:
    """Reads the Broker's users Secret (the admin's keys) and TLS Secret (its CA)."""
    namespace, name = broker["metadata"]["namespace"], broker["metadata"]["name"]
    in_use = secrets_in_use(name, spec)
    signer = ssl_context = None
    if in_use.users is not None:
        secret = await api.get(object_path("v1", "Secret", namespace, in_use.users.name))
        keys = admin_keys(secret) if secret is not None else None
        if keys is None:
            raise GroupUnreachable(f"Secret {in_use.users.name} holds no admin account "
                                   f"to sign the operator's calls with")
        signer = Signer(*keys)
    if in_use.tls is not None:
        secret = await api.get(object_path("v1", "Secret", namespace, in_use.tls.name))
        ca = secret_text(secret, CA_KEY) if secret is not None else None
        if ca is None:
            raise GroupUnreachable(f"Secret {in_use.tls.name} has no {CA_KEY} to verify "
                                   f"the pods with")
        ssl_context = ssl.create_default_context(cadata=ca)
    return HttpGroupClient(signer=signer, ssl_context=ssl_context, timeout_s=timeout_s)
