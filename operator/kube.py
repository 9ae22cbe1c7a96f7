"""A small asynchronous Kubernetes API client: just what the reconcile pass needs (get,
list, server-side apply, merge patch, delete), on aiohttp with kopf's own credentials.

kopf logs in (`handlers.login`) with its kubeconfig and service-account readers and hands
the resulting `kopf.ConnectionInfo` to `KubeApi`; no other client library is needed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import kopf

from .names import FIELD_MANAGER

PLURALS = {"ConfigMap": "configmaps", "Service": "services", "StatefulSet": "statefulsets",
           "Deployment": "deployments", "PodDisruptionBudget": "poddisruptionbudgets",
           "PersistentVolumeClaim": "persistentvolumeclaims", "Broker": "brokers",
           "Pod": "pods", "Event": "events", "Secret": "secrets",
           "NetworkPolicy": "networkpolicies"}

REQUEST_TIMEOUT_S = 30.0
"""One API call: well under kopf's handler timeouts, long enough for a loaded API server."""


class ApiError(Exception):
    """The API server answered an error: `status` (HTTP) and its own `message`."""

    def __init__(self, status: int, reason: str, message: str, *, request: str) -> None:
        super().__init__(f"{request}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        """Worth trying again later: conflicts, throttling, server trouble."""
        return self.status in (409, 429) or self.status >= 500


def object_path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    """`/api/v1/namespaces/ns/configmaps/x` or `/apis/apps/v1/...`."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{quote(namespace)}/{PLURALS[kind]}"
    return f"{path}/{quote(name)}" if name is not None else path


class KubeApi:
    """One aiohttp session, opened on first use in the running event loop."""

    def __init__(self, login: Callable[[], kopf.ConnectionInfo]) -> None:
        self._login = login
        self._info: kopf.ConnectionInfo | None = None
        self._session: aiohttp.ClientSession | None = None
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _open(self, *, fresh: bool) -> aiohttp.ClientSession:
        async with self._lock:
            if fresh or self._info is None:
                await self.close()
                self._info = self._login()
            if self._session is None:
                info = self._info
                secure = info.server.startswith("https:")
                connector = aiohttp.TCPConnector(ssl=info.as_ssl_context() if secure else False)
                self._session = aiohttp.ClientSession(
                    base_url=info.server.rstrip("/") + "/", connector=connector,
                    headers=info.as_http_headers(),
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))
            return self._session

    async def request(self, method: str, path: str, *, body: object = None,
                      content_type: str = "application/json",
                      query: Mapping[str, str] | None = None) -> Any:
        """The decoded answer, or `ApiError`.  A 401 logs in again once (rotated tokens)."""
        url = path.lstrip("/") + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body)
        for attempt in (1, 2):
            session = await self._open(fresh=attempt == 2)
            async with session.request(method, url, data=data,
                                       headers={"Content-Type": content_type}) as response:
                text = await response.text()
                if response.status == 401 and attempt == 1:
                    continue
                if response.status >= 400:
                    raise _error(response.status, text, request=f"{method} {path}")
                return json.loads(text) if text else None
        raise AssertionError("unreachable")

    async def get(self, path: str) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = await self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return answer

    async def list(self, path: str, *, label_selector: str) -> list[dict[str, Any]]:
        answer = await self.request("GET", path, query={"labelSelector": label_selector})
        return list(answer.get("items") or [])

    async def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply as the operator's field manager: creates or updates in one
        idempotent call, and takes over fields another manager set (force)."""
        metadata = manifest["metadata"]
        path = object_path(manifest["apiVersion"], manifest["kind"], metadata["namespace"],
                           metadata["name"])
        answer: dict[str, Any] = await self.request(
            "PATCH", path, body=manifest, content_type="application/apply-patch+yaml",
            query={"fieldManager": FIELD_MANAGER, "force": "true"})
        return answer

    async def create(self, manifest: Mapping[str, Any]) -> bool:
        """Create `manifest` unless an object of its name exists: True if this call made
        it.  For what must never be overwritten (a generated Secret), where `apply` would
        replace it on every pass."""
        metadata = manifest["metadata"]
        path = object_path(manifest["apiVersion"], manifest["kind"], metadata["namespace"])
        try:
            await self.request("POST", path, body=manifest,
                               query={"fieldManager": FIELD_MANAGER})
        except ApiError as error:
            if error.status == 409 and error.reason == "AlreadyExists":
                return False
            raise
        return True

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = await self.request(
            "PATCH", path, body=patch, content_type="application/merge-patch+json")
        return answer

    async def delete(self, path: str) -> bool:
        """True if it was there.  Background propagation: its pods go by garbage collection."""
        try:
            await self.request("DELETE", path, body={"propagationPolicy": "Background"})
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True


def _error(status: int, text: str, *, request: str) -> ApiError:
    try:
        answer = json.loads(text)
        reason, message = str(answer.get("reason", "")), str(answer.get("message", text))
    except (ValueError, AttributeError):
        reason, message = "", text
    return ApiError(status, reason, message, request=request)
