"""What each HTTP route needs, for the three services, in one table per service.

| service  | route                                                   | needs                      |
|----------|---------------------------------------------------------|----------------------------|
| all      | /healthz /readyz /metrics /openapi.json                 | nothing (open)             |
| writer   | POST /v1/topics/{topic}/messages[/batch]                | PUB on topic               |
| writer   | POST /v1/batch                                          | PUB on each topic (handler)|
| writer   | GET /v1/replication                                     | any user                   |
| notifier | GET  /v1/topics/{topic}/queues/{queue_id}/messages      | SUB on topic               |
| notifier | POST /v1/groups/{group}/topics/{topic}/poll             | SUB on group and topic     |
| notifier | POST /v1/groups/{group}/offsets                         | SUB on group; on the body's|
|          |                                                         | topic (handler)            |
| notifier | GET  /v1/groups/{group}/offsets?topic=                  | SUB on group and topic     |
| notifier | POST /v1/groups/{group}/nacks                           | SUB on group; on the body's|
|          |                                                         | topic (handler)            |
| notifier | GET  /v1/topics/{topic}/messages, .../offset-by-time,   | SUB on topic               |
|          | /v1/topics/{topic}/queues                               |                            |
| notifier | GET  /v1/messages/{physical_offset}                     | admin (a position names no |
|          |                                                         | topic before it is read)   |
| notifier | GET  /v1/topics                                         | any user                   |
| notifier | GET  /v1/groups                                         | admin (every group's name) |
| notifier | GET  /v1/retries, /v1/delays                            | admin (every group's name; |
|          |                                                         | the schedule's progress)   |
| notifier | GET  /v1/transactions                                   | admin (the check's progress|
|          |                                                         | over every producer group) |
| notifier | PUT, DELETE /v1/topics/{topic}                          | admin (as RocketMQ's topic |
|          |                                                         | admin codes)               |
| notifier | GET /v1/broker, PUT /v1/broker/permission           | admin (as mqadmin          |
|          |                                                         | updateBrokerConfig)        |
| indexer  | GET  /v1/notices                                        | admin (every topic's       |
|          |                                                         | offsets; the notifier's)   |
| indexer  | GET  /v1/status                                         | any user                   |

A route missing here needs an admin (tests check every route has its row).
"""

from __future__ import annotations

from aiohttp import web

from mqstore.services.auth.http_access import RouteRules
from mqstore.services.auth.permissions import ADMIN, Need, Perm, group, topic

OPEN: RouteRules = {("GET", "/healthz"): None, ("GET", "/readyz"): None,
                    ("GET", "/metrics"): None, ("GET", "/openapi.json"): None}


def _any_user(request: web.Request) -> list[Need]:
    return []


def _admin(request: web.Request) -> list[Need]:
    return [ADMIN]


def _publish(request: web.Request) -> list[Need]:
    return [topic(request.match_info["topic"], Perm.PUB)]


def _read_topic(request: web.Request) -> list[Need]:
    return [topic(request.match_info["topic"], Perm.SUB)]


def _group_and_topic(request: web.Request) -> list[Need]:
    return [group(request.match_info["group"]), topic(request.match_info["topic"], Perm.SUB)]


def _group(request: web.Request) -> list[Need]:
    return [group(request.match_info["group"])]


def _group_and_query_topic(request: web.Request) -> list[Need]:
    return [group(request.match_info["group"]),
            topic(request.query.get("topic", ""), Perm.SUB)]


WRITER_RULES: RouteRules = {
    **OPEN,
    ("POST", "/v1/topics/{topic}/messages"): _publish,
    ("POST", "/v1/topics/{topic}/messages/batch"): _publish,
    ("POST", "/v1/batch"): _any_user,  # each topic of the batch: WriterHandlers.put_batch
    ("GET", "/v1/replication"): _any_user,
}

NOTIFIER_RULES: RouteRules = {
    **OPEN,
    ("GET", "/v1/topics/{topic}/queues/{queue_id}/messages"): _read_topic,
    ("POST", "/v1/groups/{group}/topics/{topic}/poll"): _group_and_topic,
    ("POST", "/v1/groups/{group}/offsets"): _group,  # the body's topic: commit_offsets
    ("GET", "/v1/groups/{group}/offsets"): _group_and_query_topic,
    ("POST", "/v1/groups/{group}/nacks"): _group,  # the body's topic: Nacks.nack
    ("GET", "/v1/topics/{topic}/messages"): _read_topic,
    ("GET", "/v1/topics/{topic}/queues/{queue_id}/offset-by-time"): _read_topic,
    ("GET", "/v1/messages/{physical_offset}"): _admin,
    ("GET", "/v1/topics"): _any_user,
    ("GET", "/v1/groups"): _admin,
    ("GET", "/v1/retries"): _admin,
    ("GET", "/v1/delays"): _admin,
    ("GET", "/v1/transactions"): _admin,
    ("GET", "/v1/topics/{topic}/queues"): _read_topic,
    ("PUT", "/v1/topics/{topic}"): _admin,
    ("DELETE", "/v1/topics/{topic}"): _admin,
    ("GET", "/v1/broker"): _admin,
    ("PUT", "/v1/broker/permission"): _admin,
}

INDEXER_RULES: RouteRules = {
    **OPEN,
    ("GET", "/v1/notices"): _admin,
    ("GET", "/v1/status"): _any_user,
}
