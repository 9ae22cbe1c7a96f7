"""What the operator asks of a broker group's master pod, over HTTP: the drain (operator/
drain.py) sets its notifier's permission and measures its consumers' lag; the roll (operator/
roll_replication.py) asks its writer whether every follower has caught up.

    notifier  https://<group>-0.<group>-headless.<namespace>.svc:8083   permission, lag
    writer    https://<group>-0.<group>-headless.<namespace>.svc:8081   GET /v1/replication

`GroupClient` is the calls; operator/group_http_client.py makes them (signed with the Broker's
admin account, verified with its CA), the tests fake them.  A client is opened once per pass,
at its first call (`LazyGroupClient`), so a pass with nothing to ask reads no Secret."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from . import names
from .spec import BrokerSpec


class GroupUnreachable(Exception):
    """A call to a group's pod failed (refused, timed out, answered an error)."""


class GroupClient(Protocol):
    async def set_permission(self, url: str, *, permission: int) -> None:
        """The notifier's broker permission.  Raises GroupUnreachable."""

    async def lag(self, url: str, *, peers: Sequence[str] = ()) -> int:
        """Every consumer group's lag on the notifier at `url`, summed: the groups of `url`
        and of the other groups' notifiers `peers`.  Raises GroupUnreachable."""

    async def replication(self, url: str) -> Mapping[str, Any]:
        """The writer's GET /v1/replication (services/writer/replication_status.py).
        Raises GroupUnreachable."""


OpenClient = Callable[[Mapping[str, Any], BrokerSpec], Awaitable[GroupClient]]
"""Makes the client for one Broker (its credentials, its CA)."""


class LazyGroupClient:
    """Opens the client (reads the Secrets) at its first call; a failure to open is the
    group's being unreachable."""

    def __init__(self, opener: Callable[[], Awaitable[GroupClient]]) -> None:
        self._opener = opener
        self._client: GroupClient | None = None

    async def _opened(self) -> GroupClient:
        if self._client is None:
            self._client = await self._opener()
        return self._client

    async def set_permission(self, url: str, *, permission: int) -> None:
        await (await self._opened()).set_permission(url, permission=permission)

    async def lag(self, url: str, *, peers: Sequence[str] = ()) -> int:
        return await (await self._opened()).lag(url, peers=peers)

    async def replication(self, url: str) -> Mapping[str, Any]:
        return await (await self._opened()).replication(url)


def _master_url(group: str, namespace: str, *, scheme: str, port: int) -> str:
    return f"{scheme}://{group}-0.{names.headless_service_name(group)}.{namespace}.svc:{port}"


def notifier_url(group: str, namespace: str, *, scheme: str) -> str:
    """The group's master notifier (pod 0) through the headless Service."""
    return _master_url(group, namespace, scheme=scheme, port=names.NOTIFIER_PORT)


def writer_url(group: str, namespace: str, *, scheme: str) -> str:
    """The group's master writer (pod 0) through the headless Service."""
    return _master_url(group, namespace, scheme=scheme, port=names.WRITER_PORT)
