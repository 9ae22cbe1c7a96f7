"""The one permission rule (services/auth/users.py), case by case."""

from __future__ import annotations

import pytest

from mqstore.services.auth.permissions import ADMIN, Perm, group, is_system_topic, topic
from mqstore.services.auth.users import Account

USER = Account("producer1", "secret-1", default_topic_perm=Perm.SUB,
               default_group_perm=Perm.SUB,
               topic_perms={"Orders": Perm.PUB | Perm.SUB, "Audit": Perm.PUB,
                            "Secret": Perm.DENY, "SCHEDULE_TOPIC_XXXX": Perm.PUB},
               group_perms={"billing": Perm.SUB, "other": Perm.DENY})


@pytest.mark.parametrize(("need", "allowed"), [
    (topic("Orders", Perm.PUB), True),
    (topic("Orders", Perm.SUB), True),
    (topic("Audit", Perm.SUB), False),          # explicit entry wins over the default SUB
    (topic("Secret", Perm.SUB), False),         # DENY
    (topic("Elsewhere", Perm.SUB), True),       # default SUB
    (topic("Elsewhere", Perm.PUB), False),
    (group("billing"), True),
    (group("other"), False),
    (group("unlisted"), True),                  # default group SUB
    (topic("%RETRY%billing", Perm.PUB), True),  # a retry topic is its group's
    (topic("%RETRY%other", Perm.PUB), False),
    (topic("TBW102", Perm.PUB), False),         # system topics: never by default
    (topic("TBW102", Perm.SUB), False),
    (topic("%DLQ%billing", Perm.SUB), False),
    (topic("RMQ_SYS_TRACE_TOPIC", Perm.PUB), False),
    (topic("SCHEDULE_TOPIC_XXXX", Perm.PUB), True),  # ... unless listed
    (ADMIN, False),
])
def test_a_user_gets_what_its_entries_and_defaults_grant(need: object, allowed: bool) -> None:
    reason = USER.refusal([need])  # type: ignore[list-item]
    assert (reason is None) is allowed
    if not allowed:
        assert reason == f"AccessKey producer1 lacks {need}"


def test_the_default_default_is_deny() -> None:
    bare = Account("consumer1", "secret-1")
    assert bare.refusal([topic("Orders", Perm.SUB)]) is not None
    assert bare.refusal([group("billing")]) is not None
    assert bare.refusal([]) is None  # authenticated, nothing asked


def test_an_admin_may_do_everything() -> None:
    admin = Account("admin-01", "secret-1", admin=True, topic_perms={"Orders": Perm.DENY})
    assert admin.refusal([ADMIN, topic("Orders", Perm.PUB), topic("TBW102", Perm.PUB),
                          group("any")]) is None


def test_every_need_of_a_request_must_be_granted() -> None:
    assert USER.refusal([topic("Orders", Perm.SUB), group("other")]) == \
        "AccessKey producer1 lacks SUB on group other"


@pytest.mark.parametrize("name", ["TBW102", "SCHEDULE_TOPIC_XXXX", "%DLQ%g", "rmq_sys_x",
                                  "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"])
def test_system_topics_are_recognised(name: str) -> None:
    assert is_system_topic(name)
    assert not is_system_topic("Orders")
