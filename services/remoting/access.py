"""The remoting front's access check: RocketMQ's `AclClientRPCHook` signatures and the
users file's permissions, before any handler runs.

    peer address in globalWhiteRemoteAddresses       → served, no credentials
    no `AccessKey` ext field / an unknown one         → NO_PERMISSION (16)
    signature does not match (remoting_signature.py)  → NO_PERMISSION, unless the address is
                                                        in the account's whiteRemoteAddress
    the code's needs (table below) not granted        → NO_PERMISSION, remark naming the need

Refusals answer 16 NO_PERMISSION with a remark saying why, as RocketMQ 5.3+ does (4.x
answered 1 SYSTEM_ERROR with the exception text); the Java producer does not retry 16.

| codes                                                   | needs                          |
|---------------------------------------------------------|--------------------------------|
| 10, 310, 320 send                                       | PUB on topic (%RETRY%g: SUB on |
|                                                         | group g)                       |
| 11, 361 pull; 14, 15 query/commit offset                | SUB on topic and group         |
| 12 query by key; 29-32 offsets by time, max, min, first | SUB on topic                   |
| 202 topic stats; 351 topic config                       | SUB on topic                   |
| 38 consumer list; 41, 42 lock/unlock (body's group)     | SUB on group                   |
| 203 connections; 208 consume stats                      | SUB on group                   |
| 33 view by position                                     | admin (a position names no     |
|                                                         | topic before the read)         |
| 17 create, 215/216 delete topic, 222 reset offsets,     | admin                          |
| 21 all topic configs, 28 runtime info, 300 consumers of |                                |
| a topic                                                 |                                |
| 34 heartbeat, 35 unregister, 105 route, 106 cluster,    | a valid signature only         |
| 206/224 topic lists                                     |                                |

Name-server codes: a RocketMQ 4.x name server checks nothing, but here name server and
broker are one port, so they need a valid signature (a client without credentials learns
no topic and no route); routes carry no messages, so no permission is asked beyond it.
A code served here without a row needs an admin (a test checks every served code has one);
a code not served needs only the signature, and then answers REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mqstore.services.auth.addresses import host_of
from mqstore.services.auth.permissions import ADMIN, Need, Perm, group, topic
from mqstore.services.auth.remoting_signature import ACCESS_KEY, signature_matches
from mqstore.services.auth.users import Users

from . import codes, headers
from .codes import NO_PERMISSION, RemotingError
from .frame import Command

NeedsOf = Callable[[Command], list[Need]]


def _topic_field(request: Command) -> str:
    return headers.optional_text(request, "topic", "b") or ""


def _send(request: Command) -> list[Need]:
    return [topic(_topic_field(request), Perm.PUB)]


def _read_topic(request: Command) -> list[Need]:
    return [topic(_topic_field(request), Perm.SUB)]


def _consumer_group(request: Command) -> list[Need]:
    return [group(headers.optional_text(request, "consumerGroup") or "")]


def _group_and_topic(request: Command) -> list[Need]:
    return _consumer_group(request) + _read_topic(request)


def _body_group(request: Command) -> list[Need]:
    """Lock and unlock name their group in the JSON body (a bad body: the handler says)."""
    try:
        document = json.loads(bytes(request.body))
    except (ValueError, UnicodeDecodeError):
        return []
    name = document.get("consumerGroup") if isinstance(document, dict) else None
    return [group(name if isinstance(name, str) else "")]


def _nothing(request: Command) -> list[Need]:
    return []


def _admin(request: Command) -> list[Need]:
    return [ADMIN]


NEEDS: dict[int, NeedsOf] = {
    codes.SEND_MESSAGE: _send, codes.SEND_MESSAGE_V2: _send, codes.SEND_BATCH_MESSAGE: _send,
    codes.PULL_MESSAGE: _group_and_topic, codes.LITE_PULL_MESSAGE: _group_and_topic,
    codes.QUERY_CONSUMER_OFFSET: _group_and_topic,
    codes.UPDATE_CONSUMER_OFFSET: _group_and_topic,
    codes.QUERY_MESSAGE: _read_topic, codes.SEARCH_OFFSET_BY_TIMESTAMP: _read_topic,
    codes.GET_MAX_OFFSET: _read_topic, codes.GET_MIN_OFFSET: _read_topic,
    codes.GET_EARLIEST_MSG_STORETIME: _read_topic, codes.GET_TOPIC_STATS_INFO: _read_topic,
    codes.GET_TOPIC_CONFIG: _read_topic,
    codes.GET_CONSUMER_LIST_BY_GROUP: _consumer_group,
    codes.GET_CONSUMER_CONNECTION_LIST: _consumer_group,
    codes.GET_CONSUME_STATS: _consumer_group,
    codes.LOCK_BATCH_MQ: _body_group, codes.UNLOCK_BATCH_MQ: _body_group,
    codes.VIEW_MESSAGE_BY_ID: _admin, codes.UPDATE_AND_CREATE_TOPIC: _admin,
    codes.DELETE_TOPIC_IN_BROKER: _admin, codes.DELETE_TOPIC_IN_NAMESRV: _admin,
    codes.INVOKE_BROKER_TO_RESET_OFFSET: _admin, codes.GET_ALL_TOPIC_CONFIG: _admin,
    codes.GET_BROKER_RUNTIME_INFO: _admin, codes.QUERY_TOPIC_CONSUME_BY_WHO: _admin,
    codes.HEART_BEAT: _nothing, codes.UNREGISTER_CLIENT: _nothing,
    codes.GET_ROUTEINFO_BY_TOPIC: _nothing, codes.GET_BROKER_CLUSTER_INFO: _nothing,
    codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _nothing, codes.GET_TOPICS_BY_CLUSTER: _nothing,
}


class RemotingAccess:
    """Checks one request against the users; raises `RemotingError(NO_PERMISSION)`."""

    def __init__(self, users: Users, *, served_codes: frozenset[int]) -> None:
        self.users = users
        self._served_codes = served_codes

    def check(self, request: Command, peer_address: str) -> None:
        address = host_of(peer_address)
        users = self.users
        if users.is_globally_white(address):
            return
        fields = request.ext_fields
        access_key = fields.get(ACCESS_KEY)
        if not access_key:
            raise _refused(request, "no AccessKey: this broker needs credentials "
                                    "(AclClientRPCHook)")
        account = users.account(access_key)
        if account is None:
            raise _refused(request, f"no account for AccessKey {access_key[:64]}")
        if not account.is_white(address) and not signature_matches(
                fields, bytes(request.body), account.secret_key):
            raise _refused(request, f"check signature failed for AccessKey {access_key}")
        needs_of = NEEDS.get(request.code,
                             _admin if request.code in self._served_codes else _nothing)
        reason = account.refusal(needs_of(request))
        if reason is not None:
            raise _refused(request, reason)


def _refused(request: Command, reason: str) -> RemotingError:
    return RemotingError(NO_PERMISSION, f"request code {request.code} refused: {reason}")
