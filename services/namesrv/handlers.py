"""One handler per request code the name server serves: parse the header, call the route
table or the KV table once, shape the answer as RocketMQ 5.5.0's `DefaultRequestProcessor`
and `ClientRequestProcessor` do.

| code | name                               | answer                                        |
|------|------------------------------------|-----------------------------------------------|
| 100  | PUT_KV_CONFIG                      | 0                                             |
| 101  | GET_KV_CONFIG                      | 0 with header `value`; 22 when absent         |
| 102  | DELETE_KV_CONFIG                   | 0                                             |
| 103  | REGISTER_BROKER                    | 0, header `haServerAddr`/`masterAddr`, body   |
|      |                                    | the ORDER_TOPIC_CONFIG KVTable if any         |
| 104  | UNREGISTER_BROKER                  | 0                                             |
| 105  | GET_ROUTEINFO_BY_TOPIC             | TopicRouteData; 17 when no group serves it    |
| 106  | GET_BROKER_CLUSTER_INFO            | ClusterInfo                                   |
| 205  | WIPE_WRITE_PERM_OF_BROKER          | 0, header `wipeTopicCount`                    |
| 206  | GET_ALL_TOPIC_LIST_FROM_NAMESERVER | TopicList                                     |
| 216  | DELETE_TOPIC_IN_NAMESRV            | 0                                             |
| 219  | GET_KVLIST_BY_NAMESPACE            | KVTable; 22 when no such namespace            |
| 224  | GET_TOPICS_BY_CLUSTER              | TopicList                                     |
| 322  | QUERY_DATA_VERSION                 | 0, header `changed`, body the version held    |
| 327  | ADD_WRITE_PERM_OF_BROKER           | 0, header `addTopicCount`                     |
| 904  | BROKER_HEARTBEAT                   | 0                                             |

Anything else answers REQUEST_CODE_NOT_SUPPORTED (3) with a remark naming the code
(server.py).  A bound of a table answers SYSTEM_ERROR (1) naming the setting.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from mqstore.services.namesrv import registration
from mqstore.services.namesrv.kv_config import ORDER_TOPIC_CONFIG, KvConfigFull, KvConfigTable
from mqstore.services.namesrv.route_table import (
    Registration,
    RouteTable,
    TableFull,
    version_key,
)
from mqstore.services.namesrv.settings import NamesrvSettings
from mqstore.services.notifier.remoting import bodies, headers
from mqstore.services.notifier.remoting.codes import (
    DELETE_TOPIC_IN_NAMESRV,
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    GET_BROKER_CLUSTER_INFO,
    GET_ROUTEINFO_BY_TOPIC,
    GET_TOPICS_BY_CLUSTER,
    QUERY_NOT_FOUND,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    RemotingError,
)
from mqstore.services.notifier.remoting.frame import Command

PUT_KV_CONFIG = 100
GET_KV_CONFIG = 101
DELETE_KV_CONFIG = 102
REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
WIPE_WRITE_PERM_OF_BROKER = 205
GET_KVLIST_BY_NAMESPACE = 219
QUERY_DATA_VERSION = 322
ADD_WRITE_PERM_OF_BROKER = 327
BROKER_HEARTBEAT = 904

log = logging.getLogger("mqstore.namesrv")


@dataclasses.dataclass
class Namesrv:
    """What every handler reads and writes: the tables, the settings, the clock."""

    settings: NamesrvSettings
    routes: RouteTable
    kv: KvConfigTable
    external_connections: set[int] = dataclasses.field(default_factory=set)
    """Connections accepted on the external listener (server.py): their routes and cluster
    info name brokers by their external addresses."""
    now_ms: Callable[[], int] = dataclasses.field(
        default=lambda: time.monotonic_ns() // 1_000_000)


Handler = Callable[[Namesrv, Command, int], Command]


def register_broker(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    broker_id = headers.number(request, "brokerId", minimum=0)
    compressed = headers.flag(request, "compressed")
    try:
        registration.check_crc32(request.body, headers.optional_text(request, "bodyCrc32"))
        configs = registration.decode(request.body, compressed=compressed,
                                      inflated_bytes_max=namesrv.settings.frame_size_bytes_max)
        registered = namesrv.routes.register(Registration(
            cluster=headers.text(request, "clusterName"),
            broker_address=headers.text(request, "brokerAddr"),
            broker_name=headers.text(request, "brokerName"), broker_id=broker_id,
            ha_server_address=headers.optional_text(request, "haServerAddr") or "",
            topics=configs.topics if request.body else None,
            data_version=configs.data_version,
            enable_acting_master=headers.flag(request, "enableActingMaster"),
            connection_id=connection_id,
            external_address=headers.optional_text(request, headers.EXTERNAL_ADDRESS_FIELD) or ""),
            now_ms=namesrv.now_ms())
    except (registration.RegistrationError, TableFull) as error:
        log.warning("registration refused: %s", error,
                    extra={"broker_address": request.ext_fields.get("brokerAddr", "")})
        raise RemotingError(SYSTEM_ERROR, str(error)) from None
    fields = {"haServerAddr": registered.ha_server_address,
              "masterAddr": registered.master_address}
    order = namesrv.kv.namespace(ORDER_TOPIC_CONFIG)
    return request.answer(SUCCESS, ext_fields={k: v for k, v in fields.items() if v},
                          body=bodies.encode({"table": order}) if order is not None else b"")


def unregister_broker(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    headers.text(request, "brokerName")
    headers.number(request, "brokerId")
    namesrv.routes.drop(headers.text(request, "clusterName"),
                        headers.text(request, "brokerAddr"))
    return request.answer(SUCCESS)


def broker_heartbeat(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    namesrv.routes.heard(headers.text(request, "clusterName"),
                         headers.text(request, "brokerAddr"), now_ms=namesrv.now_ms())
    return request.answer(SUCCESS)


def query_data_version(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    cluster = headers.text(request, "clusterName")
    address = headers.text(request, "brokerAddr")
    try:
        asked = registration.decode_data_version(request.body)
    except registration.RegistrationError as error:
        raise RemotingError(SYSTEM_ERROR, str(error)) from None
    held = namesrv.routes.heard(cluster, address, now_ms=namesrv.now_ms())
    changed = held is None or (version_key(held.data_version)
                               != version_key(asked))
    return request.answer(SUCCESS, ext_fields={"changed": "true" if changed else "false"},
                          body=bodies.encode(dict(held.data_version)) if held else b"")


def get_route(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    topic = headers.text(request, "topic")
    route = namesrv.routes.route(topic)
    if route is None:
        raise RemotingError(TOPIC_NOT_EXIST, f"No topic route info in name server for the "
                                             f"topic: {topic}")
    return request.answer(SUCCESS, body=bodies.encode(
        _as_seen_by(namesrv, connection_id, route, "brokerDatas")))


def get_cluster_info(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    info = namesrv.routes.cluster_info()
    return request.answer(SUCCESS, body=bodies.encode(
        _as_seen_by(namesrv, connection_id, info, "brokerAddrTable")))


def _as_seen_by(namesrv: Namesrv, connection_id: int, body: dict[str, object],
                key: str) -> dict[str, object]:
    """`body` (a route or cluster info) with each broker data's addresses external if the
    client came in on the external listener; as it is otherwise."""
    if connection_id not in namesrv.external_connections:
        return body
    external = namesrv.routes.external_addresses()
    datas = body[key]
    assert isinstance(datas, list | dict), datas
    outside = [_external_data(data, external) for data in (
        datas.values() if isinstance(datas, dict) else datas)]
    if isinstance(datas, dict):
        return {**body, key: dict(zip(datas, outside, strict=True))}
    return {**body, key: outside}


def _external_data(data: object, external: dict[str, str]) -> object:
    assert isinstance(data, dict), data
    addresses = data["brokerAddrs"]
    return {**data, "brokerAddrs": {broker_id: external.get(address, address)
                                    for broker_id, address in addresses.items()}}


def get_all_topics(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    return request.answer(SUCCESS, body=bodies.encode(
        {"topicList": namesrv.routes.topic_names()}))


def get_topics_by_cluster(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    cluster = headers.text(request, "cluster")
    return request.answer(SUCCESS, body=bodies.encode(
        {"topicList": namesrv.routes.topic_names(cluster=cluster)}))


def delete_topic(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    namesrv.routes.delete_topic(headers.text(request, "topic"),
                                cluster=headers.optional_text(request, "clusterName") or None)
    return request.answer(SUCCESS)


def wipe_write_permission(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    count = namesrv.routes.set_write_permission(headers.text(request, "brokerName"),
                                                writable=False)
    return request.answer(SUCCESS, ext_fields={"wipeTopicCount": str(count)})


def add_write_permission(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    count = namesrv.routes.set_write_permission(headers.text(request, "brokerName"),
                                                writable=True)
    return request.answer(SUCCESS, ext_fields={"addTopicCount": str(count)})


def put_kv_config(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    try:
        namesrv.kv.put(headers.text(request, "namespace"), headers.text(request, "key"),
                       headers.text(request, "value"))
    except KvConfigFull as error:
        raise RemotingError(SYSTEM_ERROR, str(error)) from None
    return request.answer(SUCCESS)


def get_kv_config(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    namespace = headers.text(request, "namespace")
    key = headers.text(request, "key")
    value = namesrv.kv.get(namespace, key)
    if value is None:
        raise RemotingError(QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} "
                                             f"Key: {key}")
    return request.answer(SUCCESS, ext_fields={"value": value})


def delete_kv_config(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    namesrv.kv.delete(headers.text(request, "namespace"), headers.text(request, "key"))
    return request.answer(SUCCESS)


def get_kv_list(namesrv: Namesrv, request: Command, connection_id: int) -> Command:
    namespace = headers.text(request, "namespace")
    table = namesrv.kv.namespace(namespace)
    if table is None:
        raise RemotingError(QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
    return request.answer(SUCCESS, body=bodies.encode({"table": table}))


HANDLERS: dict[int, Handler] = {
    PUT_KV_CONFIG: put_kv_config, GET_KV_CONFIG: get_kv_config,
    DELETE_KV_CONFIG: delete_kv_config, REGISTER_BROKER: register_broker,
    UNREGISTER_BROKER: unregister_broker, GET_ROUTEINFO_BY_TOPIC: get_route,
    GET_BROKER_CLUSTER_INFO: get_cluster_info,
    WIPE_WRITE_PERM_OF_BROKER: wipe_write_permission,
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER: get_all_topics,
    DELETE_TOPIC_IN_NAMESRV: delete_topic, GET_KVLIST_BY_NAMESPACE: get_kv_list,
    GET_TOPICS_BY_CLUSTER: get_topics_by_cluster, QUERY_DATA_VERSION: query_data_version,
    ADD_WRITE_PERM_OF_BROKER: add_write_permission, BROKER_HEARTBEAT: broker_heartbeat,
}
