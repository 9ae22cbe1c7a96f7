"""A broker group that joins its cluster empty takes the cluster's topics.

RocketMQ's clients route a topic to the groups that registered it, so a group added to a
cluster would serve nothing until someone created every topic on it (RocketMQ's own answer
is `mqadmin updateTopic -c` by hand).  When `remoting.cluster_topics_copy_enabled` is on
and the front holds no topic of its own (no created topic, no queue on the volume: a new
group), the first name server that accepts its registration is asked:

    GET_TOPICS_BY_CLUSTER (224) {cluster}     the cluster's topics (TopicList)
    GET_ROUTEINFO_BY_TOPIC (105) {topic}      each one's queue datas, per group

and each topic that is not a system, retry or dead letter topic is created here with the
largest read and write queue counts another group has for it (at most the writer's
`topic_queue_count`) and its permission.  The registrar's next topic check (≤
`register_topics_check_interval_ms`) registers them, and producers' routes then include
this group.  A group that already holds topics copies nothing, so a topic created on chosen
groups only (`updateTopic -b`) stays there when those groups restart.  Bounded by
`topics_max` (the table refuses past it) and one request per topic, each within
`register_timeout_ms`.  The requests go on the registrar's link to that name server, so
over TLS when `remoting.namesrv_tls_enabled` (namesrv_link.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from mqstore.services.common.topics.rules import DLQ_PREFIX, RETRY_PREFIX, is_system_topic
from mqstore.services.notifier.remoting.codes import (
    GET_ROUTEINFO_BY_TOPIC,
    GET_TOPICS_BY_CLUSTER,
    SUCCESS,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front
from mqstore.services.notifier.remoting.frame import Command
from mqstore.services.notifier.remoting.namesrv_link import NamesrvLink
from mqstore.services.notifier.remoting.topics import PERM_READ_WRITE, TopicConfig

log = logging.getLogger("mqstore.remoting")

_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,])(-?\d+):')
"""A string literal (kept as it is) or a bare number key: fastjson writes a map with number
keys bare (`{0:"10.0.0.1:10911"}`), which is not JSON."""


def fastjson_loads(body: bytes) -> Any:
    """A fastjson body as JSON, its bare number keys quoted (never text inside a string)."""
    return json.loads(_BARE_KEY.sub(
        lambda found: f'{found[1]}"{found[2]}":' if found[1] else found[0],
        body.decode("utf-8")))


def holds_topics(front: Front) -> bool:
    """Whether this broker has a topic of its own (created, or queues on the volume)."""
    return any(not _not_copied(topic) for topic in front.topics.names()
               if topic != front.topics.reply_topic)


def _not_copied(topic: str) -> bool:
    return is_system_topic(topic) or topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


async def copy_cluster_topics(front: Front, link: NamesrvLink) -> list[str]:
    """Create here every topic of the cluster this broker lacks; the names created."""
    settings = front.settings
    listed = await _call(front, link, GET_TOPICS_BY_CLUSTER, {"cluster": settings.cluster_name})
    topics = listed.get("topicList", []) if isinstance(listed, dict) else []
    created = []
    for topic in sorted(t for t in topics if isinstance(t, str)):
        if _not_copied(topic) or topic == front.topics.reply_topic or \
                front.topics.get(topic) is not None:
            continue
        route = await _call(front, link, GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        config = _config_from_route(topic, route, front)
        if config is None:
            continue
        front.topics.create(config)
        created.append(topic)
    return created


def _config_from_route(topic: str, route: Any, front: Front) -> TopicConfig | None:
    """The widest queue counts another group routes `topic` with, within this writer's."""
    datas = [data for data in (route.get("queueDatas", []) if isinstance(route, dict) else [])
             if isinstance(data, dict) and data.get("brokerName") != front.settings.broker_name]
    if not datas:
        return None
    limit = front.topics.queue_count_max
    read = min(max(int(data.get("readQueueNums", 0)) for data in datas), limit)
    write = min(max(int(data.get("writeQueueNums", 0)) for data in datas), limit)
    perm = max(int(data.get("perm", PERM_READ_WRITE)) for data in datas) & PERM_READ_WRITE
    if read <= 0 or write <= 0:
        return None
    return TopicConfig(topic, read, write, perm or PERM_READ_WRITE)


async def _call(front: Front, link: NamesrvLink, code: int, fields: dict[str, str]) -> Any:
    timeout_ms = front.settings.register_timeout_ms
    async with asyncio.timeout(timeout_ms / 1000):
        answer = await link.call(Command(code, link.next_opaque(), ext_fields=fields))
    if answer.code != SUCCESS:
        raise RemotingError(answer.code, f"name server {link.address} answered code "
                                         f"{code} with {answer.code}: {answer.remark}")
    return fastjson_loads(bytes(answer.body))
