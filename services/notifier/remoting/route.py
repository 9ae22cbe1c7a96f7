"""Name-server requests: routes that point clients at this broker, the cluster, topic lists.

One broker, one cluster: every route names the one broker (`broker_name`) at
`Front.broker_address` (`remoting.advertised_address`, else `store.store_host`) as its
master (brokerId 0, which producers require), with the topic's
queue counts and permissions.  Bodies are compact JSON with the `brokerAddrs` keys quoted
(RocketMQ's name server writes them so for clients of version 4.9.4 and later; older and Go
clients parse both).
"""

from __future__ import annotations

from mqstore.services.common.topics.rules import RETRY_PREFIX
from mqstore.services.notifier.remoting import bodies, headers
from mqstore.services.notifier.remoting.codes import SUCCESS, TOPIC_NOT_EXIST, RemotingError
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.topics import TopicConfig


def broker_data(front: Front, peer: Peer) -> dict[str, object]:
    """This broker as `peer` reaches it (`Front.address_for`: the external listener's
    clients are given the external advertised address)."""
    settings = front.settings
    return {"brokerAddrs": {"0": front.address_for(peer)}, "brokerName": settings.broker_name,
            "cluster": settings.cluster_name, "enableActingMaster": False}


def route_body(front: Front, config: TopicConfig, peer: Peer) -> dict[str, object]:
    return {"brokerDatas": [broker_data(front, peer)], "filterServerTable": {},
            "queueDatas": [{"brokerName": front.settings.broker_name, "perm": config.perm,
                            "readQueueNums": config.read_queue_nums, "topicSysFlag": 0,
                            "writeQueueNums": config.write_queue_nums}]}


async def get_route(front: Front, request: Command, peer: Peer) -> Command:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    topic = headers.text(request, "topic")
    config = front.topics.get(topic)
    if config is None:
        raise RemotingError(TOPIC_NOT_EXIST, f"No topic route info in name server for the "
                                             f"topic: {topic}")
    return request.answer(SUCCESS, body=bodies.encode(route_body(front, config, peer)))


async def get_cluster_info(front: Front, request: Command, peer: Peer) -> Command:
    """GET_BROKER_CLUSTER_INFO (106)."""
    settings = front.settings
    body = {"brokerAddrTable": {settings.broker_name: broker_data(front, peer)},
            "clusterAddrTable": {settings.cluster_name: [settings.broker_name]}}
    return request.answer(SUCCESS, body=bodies.encode(body))


async def get_topic_list(front: Front, request: Command, peer: Peer) -> Command:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), GET_TOPICS_BY_CLUSTER (224): the topics,
    and a `%RETRY%<group>` topic per consumer group known (`mqadmin consumerProgress`
    finds the groups through them, as on a RocketMQ name server)."""
    groups = set(front.clients.groups()) | set(front.offsets.groups())
    names = set(front.topics.names()) | {f"{RETRY_PREFIX}{group}" for group in groups}
    return request.answer(SUCCESS, body=bodies.encode({"topicList": sorted(names)}))


async def delete_topic(front: Front, request: Command, peer: Peer) -> Command:
    """DELETE_TOPIC_IN_NAMESRV (216) and DELETE_TOPIC_IN_BROKER (215): routed no more."""
    front.topics.delete(headers.text(request, "topic"))
    return request.answer(SUCCESS)
