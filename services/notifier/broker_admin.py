"""The broker's permission over HTTP: what `mqadmin updateBrokerConfig -k brokerPermission`
does over remoting (services/notifier/remoting/broker_config.py), for the operator's drain of
a group being removed (operator/drain.py).

    GET /v1/broker                  {"cluster_name", "broker_name", "permission"}
    PUT /v1/broker/permission       {"permission": 4}: 0..7 (2 write, 4 read, 6 both)

Both write and read `brokerPermission` in `config/broker.properties`
(storage/files/broker_properties.py), the file the remoting front re-reads with the topics
(topics.py, every 100 ms): at 4 the routes say read only, producers move to the other
groups of the cluster, and consumers keep reading what is left.
"""

from __future__ import annotations

from aiohttp import web

from mqstore.services.common.http.answers import json_response
from mqstore.services.common.settings.config_file import NotifierSettings
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.notifier.remoting.broker_config import PERMISSION_MAX
from mqstore.services.notifier.remoting.topics import (
    BROKER_PERMISSION_KEY,
    TopicTable,
    broker_permission,
)
from mqstore.services.notifier.requests import bad_request, json_int, read_json_object

PERMISSION_FIELDS = frozenset({"permission"})


class BrokerAdmin:
    def __init__(self, table: TopicTable, settings: NotifierSettings, *,
                 names: RemotingSettings) -> None:
        """`names`: the remoting front's settings (the cluster and broker names it
        registers with)."""
        self._table = table
        self._settings = settings
        self._cluster_name = names.cluster_name
        self._broker_name = names.broker_name

    async def broker(self, request: web.Request) -> web.Response:
        """GET /v1/broker: the names the group registers with and its permission now."""
        return json_response(self._answer())

    async def set_permission(self, request: web.Request) -> web.Response:
        """PUT /v1/broker/permission: 400 unless the body is {"permission": 0..7}."""
        body = await read_json_object(request, fields=PERMISSION_FIELDS,
                                      settings=self._settings)
        if "permission" not in body:
            raise bad_request(f"the body needs \"permission\" (0..{PERMISSION_MAX}: 2 write, "
                              f"4 read, 6 both)")
        permission = json_int(body, "permission", minimum=0, maximum=PERMISSION_MAX, default=0)
        self._table.properties.update({BROKER_PERMISSION_KEY: str(permission)})
        self._table.read_again()
        return json_response(self._answer())

    def _answer(self) -> dict[str, object]:
        return {"cluster_name": self._cluster_name, "broker_name": self._broker_name,
                "permission": broker_permission(self._table.properties.read())}
