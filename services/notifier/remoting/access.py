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
| 10, 310, 320 send; 324, 325 reply                       | PUB on topic (%RETRY%g: SUB on |
|                                                         | group g)                       |
| 11, 361 pull; 14, 15 query/commit offset                | SUB on topic and group         |
| 36 send-back                                            | SUB on group and `originTopic` |
|                                                         | (none named: admin)            |
| 37 end a transaction                                    | PUB on `topic` (5.x names the  |
|                                                         | real topic; 4.x and a check's  |
|                                                         | answer none: signature only,   |
|                                                         | the half's producer group and  |
|                                                         | two offsets must match)        |
| 12 query by key; 29-32 offsets by time, max, min, first | SUB on topic                   |
| 202 topic stats; 351 topic config                       | SUB on topic                   |
| 38 consumer list; 41, 42 lock/unlock (body's group)     | SUB on group                   |
| 203 connections                                         | SUB on group                   |
| 208 consume stats                                       | SUB on group, and on `topic`   |
|                                                         | when the header names one      |
| 34 heartbeat                                            | SUB on each consumer group of  |
|                                                         | the body and each topic it     |
|                                                         | subscribes; see below          |
| 35 unregister                                           | SUB on `consumerGroup` if set; |
|                                                         | see below                      |
| 33 view by position                                     | admin (a position names no     |
|                                                         | topic before the read)         |
| 17 create, 215/216 delete topic, 222 reset offsets,     | admin                          |
| 21 all topic configs, 28 runtime info, 300 consumers of |                                |
| a topic                                                 |                                |
| 105 route, 106 cluster, 206/224 topic lists             | a valid signature only         |
| 46 check client config (compiles an expression)         | a valid signature only         |

Heartbeats and unregistering are RocketMQ's `PlainAccessValidator` rules (34: SUB on each
`consumerDataSet[].groupName`, as its `%RETRY%` topic, and on each subscribed topic; 35: on
the `consumerGroup` header), plus one of mqstore's own: the client table is keyed by the
`clientID` alone (RocketMQ's by connection), so a heartbeat or an unregister naming a client
id also needs SUB on every group that id is registered in now (`client_groups`).  Without
it a user could take over another client's id and so drop it from a group it has no right
on.  Producer groups are not checked, as in RocketMQ: here a producer group only names
itself in the table (no transaction check or reply is sent to it).

Name-server codes: a RocketMQ 4.x name server checks nothing, but here name server and
broker are one port, so they need a valid signature (a client without credentials learns
no topic and no route); routes carry no messages, so no permission is asked beyond it.
A code served here without a row needs an admin (a test checks every served code has one);
a code not served needs only the signature, and then answers REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from mqstore.services.auth.addresses import host_of
from mqstore.services.auth.permissions import ADMIN, Need, Perm, group, topic
from mqstore.services.auth.remoting_signature import ACCESS_KEY, signature_matches
from mqstore.services.auth.users import Users
from mqstore.services.common.topics.rules import TRANSACTION_HALF_TOPIC
from mqstore.services.notifier.remoting import bodies, codes, headers
from mqstore.services.notifier.remoting.codes import NO_PERMISSION, RemotingError
from mqstore.services.notifier.remoting.frame import Command

NeedsOf = Callable[[Command], list[Need]]
ClientGroups = Callable[[str], Iterable[str]]
"""The consumer groups a client id is registered in now (the client table's)."""


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


def _group_and_asked_topic(request: Command) -> list[Need]:
    """GET_CONSUME_STATS with `topic` reads that topic's offsets (without: the group's)."""
    asked = headers.optional_text(request, "topic")
    return _consumer_group(request) + ([topic(asked, Perm.SUB)] if asked else [])


def _heartbeat(request: Command) -> list[Need]:
    """What the heartbeat would register: its consumer groups and their subscribed topics
    (a `%RETRY%g` topic is group g's).  Read as the handler reads it (clients.py): a body
    it would refuse is left to it, and it changes nothing then."""
    needs = []
    for consumer in _objects(_json_object(request).get("consumerDataSet")):
        name = consumer.get("groupName")
        if isinstance(name, str) and name:
            needs.append(group(name))
        for data in _objects(consumer.get("subscriptionDataSet")):
            subscribed = data.get("topic")
            if isinstance(subscribed, str):
                needs.append(topic(subscribed, Perm.SUB))
    return needs


def _unregister(request: Command) -> list[Need]:
    name = headers.optional_text(request, "consumerGroup")
    return [group(name)] if name else []


def _client_id(request: Command) -> str | None:
    """The client id a heartbeat (body) or an unregister (header) acts for."""
    if request.code == codes.UNREGISTER_CLIENT:
        return headers.optional_text(request, "clientID")
    name = _json_object(request).get("clientID")
    return name if isinstance(name, str) else None


def _json_object(request: Command) -> dict[str, Any]:
    """The body as the handler parses it; a body it refuses is {} here (it says why)."""
    try:
        return bodies.loads_object(request.body, what="heartbeat")
    except (RemotingError, RecursionError):
        return {}


def _objects(items: object) -> list[dict[str, Any]]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _body_group(request: Command) -> list[Need]:
    """Lock and unlock name their group in the JSON body (a bad body: the handler says)."""
    try:
        document = json.loads(bytes(request.body))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    name = document.get("consumerGroup") if isinstance(document, dict) else None
    return [group(name if isinstance(name, str) else "")]


def _nothing(request: Command) -> list[Need]:
    return []


def _send_back(request: Command) -> list[Need]:
    """36 copies the message at an offset into the group's retry topic: SUB on the group
    and on the message's topic (the handler checks the offset holds one of it), or an admin
    when the request names no `originTopic`."""
    origin = headers.optional_text(request, "originTopic")
    needs = [group(headers.optional_text(request, "group") or "")]
    return [*needs, topic(origin, Perm.SUB) if origin else ADMIN]


def _admin(request: Command) -> list[Need]:
    return [ADMIN]


def _end_transaction(request: Command) -> list[Need]:
    named = headers.optional_text(request, "topic")
    return [topic(named, Perm.PUB)] if named and named != TRANSACTION_HALF_TOPIC else []


NEEDS: dict[int, NeedsOf] = {
    codes.SEND_MESSAGE: _send, codes.SEND_MESSAGE_V2: _send, codes.SEND_BATCH_MESSAGE: _send,
    codes.SEND_REPLY_MESSAGE: _send, codes.SEND_REPLY_MESSAGE_V2: _send,
    codes.PULL_MESSAGE: _group_and_topic, codes.LITE_PULL_MESSAGE: _group_and_topic,
    codes.CONSUMER_SEND_MSG_BACK: _send_back, codes.END_TRANSACTION: _end_transaction,
    codes.QUERY_CONSUMER_OFFSET: _group_and_topic,
    codes.UPDATE_CONSUMER_OFFSET: _group_and_topic,
    codes.QUERY_MESSAGE: _read_topic, codes.SEARCH_OFFSET_BY_TIMESTAMP: _read_topic,
    codes.GET_MAX_OFFSET: _read_topic, codes.GET_MIN_OFFSET: _read_topic,
    codes.GET_EARLIEST_MSG_STORETIME: _read_topic, codes.GET_TOPIC_STATS_INFO: _read_topic,
    codes.GET_TOPIC_CONFIG: _read_topic,
    codes.GET_CONSUMER_LIST_BY_GROUP: _consumer_group,
    codes.GET_CONSUMER_CONNECTION_LIST: _consumer_group,
    codes.GET_CONSUME_STATS: _group_and_asked_topic,
    codes.LOCK_BATCH_MQ: _body_group, codes.UNLOCK_BATCH_MQ: _body_group,
    codes.VIEW_MESSAGE_BY_ID: _admin, codes.UPDATE_AND_CREATE_TOPIC: _admin,
    codes.DELETE_TOPIC_IN_BROKER: _admin, codes.DELETE_TOPIC_IN_NAMESRV: _admin,
    codes.INVOKE_BROKER_TO_RESET_OFFSET: _admin, codes.GET_ALL_TOPIC_CONFIG: _admin,
    codes.GET_BROKER_RUNTIME_INFO: _admin, codes.QUERY_TOPIC_CONSUME_BY_WHO: _admin,
    codes.UPDATE_BROKER_CONFIG: _admin, codes.GET_BROKER_CONFIG: _admin,
    codes.HEART_BEAT: _heartbeat, codes.UNREGISTER_CLIENT: _unregister,
    codes.GET_ROUTEINFO_BY_TOPIC: _nothing, codes.GET_BROKER_CLUSTER_INFO: _nothing,
    codes.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _nothing, codes.GET_TOPICS_BY_CLUSTER: _nothing,
    codes.CHECK_CLIENT_CONFIG: _nothing,  # compiles an expression: reads and writes nothing
}


class RemotingAccess:
    """Checks one request against the users; raises `RemotingError(NO_PERMISSION)`."""

    def __init__(self, users: Users, *, served_codes: frozenset[int],
                 client_groups: ClientGroups = lambda client_id: ()) -> None:
        """`client_groups`: the client table's groups of a client id, which a heartbeat or
        an unregister naming that id could drop it from."""
        self.users = users
        self._served_codes = served_codes
        self._client_groups = client_groups

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
        needs = needs_of(request)
        if request.code in (codes.HEART_BEAT, codes.UNREGISTER_CLIENT):
            client_id = _client_id(request)
            if client_id:
                needs += [group(name) for name in sorted(self._client_groups(client_id))]
        reason = account.refusal(needs)
        if reason is not None:
            raise _refused(request, reason)


def _refused(request: Command, reason: str) -> RemotingError:
    return RemotingError(NO_PERMISSION, f"request code {request.code} refused: {reason}")
