"""Which messages a pull serves (its subscription), and CHECK_CLIENT_CONFIG (46).

A subscription is a TAG expression (`*`, `TagA || TagB`: the consume queue's tags code
answers it, and clients filter again by tag) or a SQL92 one (`a > 5`: the broker alone
filters, by each candidate record's whole property map; storage/filters/sql92.py).  Lite
and pull consumers put theirs in each pull (sysFlag 0x4); a push consumer's pulls carry
none, and its heartbeat's is used.  As RocketMQ 5.5.0's `PullMessageProcessor` answers
(checked against it):

| pull                                          | answer                                    |
|-----------------------------------------------|-------------------------------------------|
| 0x4, TAG (or no type)                         | the request's tags                        |
| 0x4, SQL92 with no expression                 | 23 SUBSCRIPTION_PARSE_FAILED              |
| 0x4, SQL92, `remoting.property_filter_enabled` off | 1, "does not support ... SQL92"      |
| 0x4, SQL92 that does not compile, or another type | 23 with the parser's message (*)      |
| no 0x4, no heartbeat subscription             | TAG pull: every message (**); SQL92: 24   |
| no 0x4, heartbeat's `subVersion` < the pull's | TAG: as registered (**); SQL92 either side: 25 |
| no 0x4, heartbeat's SQL92 does not compile    | 27 FILTER_DATA_NOT_EXIST                  |
| no 0x4, heartbeat's SQL92, filter off         | 1                                         |

(*) RocketMQ serves every message there: its code then relies on a Java `assert` that
production brokers run without.  Here a consumer that asked for a filter never gets
messages the filter was meant to keep from it.  Its start has already failed anyway:
clients send CHECK_CLIENT_CONFIG for each SQL92 subscription when they start.
(**) TAG filtering is advisory (the client filters again), so a TAG pull is never refused
for want of a heartbeat, as it was before SQL92 was served.  28 (filter data older than the
pull) cannot arise: the filter is compiled from the very subscription the pull is checked
against.  `%RETRY%<group>` subscriptions are `*` (the client registers them so), so retried
messages are not SQL-filtered, as on RocketMQ without `filterSupportRetry`.

CHECK_CLIENT_CONFIG (RocketMQ's `ClientManageProcessor#checkClientConfig`): a JSON body
`{"clientId", "group", "subscriptionData": {"subString", "expressionType", ...}}`; TAG (or
no subscription, or no body) answers 0; SQL92 with the filter off answers 1; an expression
that does not compile (or a type other than TAG and SQL92) answers 23 with the reason;
else 0.  Any non-zero answer fails the consumer's start.
"""

from __future__ import annotations

import dataclasses

from mqstore.services.notifier.remoting import bodies, headers
from mqstore.services.notifier.remoting.codes import (
    FILTER_DATA_NOT_EXIST,
    SUBSCRIPTION_NOT_EXIST,
    SUBSCRIPTION_NOT_LATEST,
    SUBSCRIPTION_PARSE_FAILED,
    SUCCESS,
    SYSTEM_ERROR,
    RemotingError,
)
from mqstore.services.notifier.remoting.context import Front, Peer
from mqstore.services.notifier.remoting.frame import Command
from mqstore.storage import Sql92ExpressionError, SubscriptionExpressionError, parse_tags
from mqstore.storage.filters import Sql92Filter

FLAG_SUBSCRIPTION = 0x4
"""PullSysFlag: the pull carries its subscription."""
SQL92 = "SQL92"
FILTER_OFF = "The broker does not support consumer to filter message by SQL92"
"""What RocketMQ answers (code 1) when `enablePropertyFilter` is off: clients show it."""


@dataclasses.dataclass(frozen=True)
class PullFilter:
    """What the read takes: tags (None: every tag), and a SQL92 filter or None."""

    tags: tuple[str, ...] | None = None
    properties: Sql92Filter | None = None


EVERY_MESSAGE = PullFilter()


def is_tag_type(kind: str | None) -> bool:
    """RocketMQ's `ExpressionType.isTagType`: no type, an empty one, or TAG."""
    return not kind or kind.upper() == "TAG"


def pull_filter(front: Front, request: Command, *, group: str, topic: str,
                sysflag: int) -> PullFilter:
    """The pull's filter (the table above); `RemotingError` for a refused subscription."""
    if sysflag & FLAG_SUBSCRIPTION:
        return _requested(front, request)
    return _registered(front, request, group=group, topic=topic)


def _requested(front: Front, request: Command) -> PullFilter:
    """A subscription the pull carries (lite and pull consumers)."""
    expression = headers.optional_text(request, "subscription")
    kind = headers.optional_text(request, "expressionType")
    if is_tag_type(kind):
        return _tags(expression or "*")
    if not expression:
        raise RemotingError(SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription "
                                                       f"failed: {kind} needs an expression")
    return PullFilter(properties=_compiled(front, expression, kind or "",
                                           refused=SUBSCRIPTION_PARSE_FAILED))


def _registered(front: Front, request: Command, *, group: str, topic: str) -> PullFilter:
    """The subscription the group's heartbeat registered (push consumers)."""
    asked_kind = headers.optional_text(request, "expressionType")
    subscription = front.clients.subscription(group, topic)
    strict = not is_tag_type(asked_kind) or (subscription is not None and
                                             not is_tag_type(subscription.expression_type))
    if subscription is None:
        if not strict:
            return EVERY_MESSAGE
        known = "subscription" if front.clients.consumers(group) else "group info"
        raise RemotingError(SUBSCRIPTION_NOT_EXIST, f"the consumer's {known} does not exist "
                                                    f"(group {group}, topic {topic}): no "
                                                    f"heartbeat registered it")
    asked_version = headers.number(request, "subVersion", default=0)
    if strict and subscription.sub_version < asked_version:
        raise RemotingError(SUBSCRIPTION_NOT_LATEST, f"the consumer's subscription is not "
                                                     f"the latest: the heartbeat's is version "
                                                     f"{subscription.sub_version}, the pull's "
                                                     f"{asked_version}")
    if is_tag_type(subscription.expression_type):
        return _tags(subscription.expression)
    return PullFilter(properties=_compiled(front, subscription.expression,
                                           subscription.expression_type,
                                           refused=FILTER_DATA_NOT_EXIST))


def _tags(expression: str) -> PullFilter:
    try:
        return PullFilter(tags=parse_tags(expression))
    except SubscriptionExpressionError as error:
        raise RemotingError(SUBSCRIPTION_PARSE_FAILED, str(error)) from None


def _compiled(front: Front, expression: str, kind: str, *, refused: int) -> Sql92Filter:
    """A pull's SQL92 filter.  The heartbeat's expression (`refused` 27) is compiled before
    the switch is asked, the pull's own (23) after, as RocketMQ orders its checks."""
    if kind != SQL92:
        raise RemotingError(refused, f"expression type {kind!r} is not served; TAG and SQL92 "
                                     f"are")
    if refused == SUBSCRIPTION_PARSE_FAILED and not front.settings.property_filter_enabled:
        raise RemotingError(SYSTEM_ERROR, FILTER_OFF)
    try:
        compiled = front.sql92.compile(expression)
    except Sql92ExpressionError as error:
        raise RemotingError(refused, f"the SQL92 expression does not compile: {error}"
                            ) from None
    if not front.settings.property_filter_enabled:
        raise RemotingError(SYSTEM_ERROR, FILTER_OFF)
    return compiled


async def check_client_config(front: Front, request: Command, peer: Peer) -> Command:
    """CHECK_CLIENT_CONFIG (46): whether this broker serves a consumer's subscription."""
    if not request.body:
        return request.answer(SUCCESS)
    data = bodies.loads_object(request.body, what="check client config").get(
        "subscriptionData")
    if not isinstance(data, dict):
        return request.answer(SUCCESS)
    kind, expression = data.get("expressionType"), data.get("subString")
    if kind is None or (isinstance(kind, str) and is_tag_type(kind)):
        return request.answer(SUCCESS)
    if not front.settings.property_filter_enabled:
        raise RemotingError(SYSTEM_ERROR, FILTER_OFF)
    if kind != SQL92:
        raise RemotingError(SUBSCRIPTION_PARSE_FAILED, f"expression type {kind!r} is not "
                                                       f"served; TAG and SQL92 are")
    try:
        front.sql92.compile(expression if isinstance(expression, str) else "")
    except Sql92ExpressionError as error:
        raise RemotingError(SUBSCRIPTION_PARSE_FAILED, str(error)) from None
    return request.answer(SUCCESS)
