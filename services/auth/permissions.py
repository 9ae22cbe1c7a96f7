"""Permissions as RocketMQ's plain ACL writes them, and what a request needs.

    DENY 0x1   refuses, whatever else is set
    PUB  0x4   send to a topic
    SUB  0x8   read a topic, or act as a consumer group (pull, offsets)

written `DENY`, `PUB`, `SUB`, `PUB|SUB` (or `SUB|PUB`) in the users file.  A request needs a
list of `Need`s: a permission on a topic, a permission on a group, or an admin account;
an empty list means any authenticated user.
"""

from __future__ import annotations

import dataclasses
import enum

from mqstore.storage import ConfigError


class Perm(enum.IntFlag):
    DENY = 0x1
    PUB = 0x4
    SUB = 0x8


PERM_NAMES = {"DENY": Perm.DENY, "PUB": Perm.PUB, "SUB": Perm.SUB,
              "PUB|SUB": Perm.PUB | Perm.SUB, "SUB|PUB": Perm.PUB | Perm.SUB}

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
                           "TRANS_CHECK_MAX_TIME_TOPIC", "OFFSET_MOVED_EVENT",
                           "SELF_TEST_TOPIC", "BenchmarkTest"})
"""RocketMQ's own topics: the auto-create template, the delay, transaction, trace and
event topics.  A default permission never covers them: a user needs an explicit
`topicPerms` entry (or admin), so `defaultTopicPerm: PUB` cannot write into the broker's
machinery."""
SYSTEM_TOPIC_PREFIXES = ("rmq_sys_", "RMQ_SYS_", DLQ_PREFIX)


class UsersFileError(ConfigError):
    """The users file cannot be used; the message names the file and the problem."""


def parse_perm(text: object, *, where: str) -> Perm:
    """`DENY`, `PUB`, `SUB`, `PUB|SUB` or `SUB|PUB` (spaces around `|` allowed)."""
    if not isinstance(text, str):
        raise UsersFileError(f"{where}: a permission must be one of DENY, PUB, SUB, PUB|SUB; "
                             f"got {text!r}")
    perm = PERM_NAMES.get(text.replace(" ", "").upper())
    if perm is None:
        raise UsersFileError(f"{where}: unknown permission {text!r}; expected one of DENY, "
                             f"PUB, SUB, PUB|SUB")
    return perm


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIXES)


@dataclasses.dataclass(frozen=True, slots=True)
class Need:
    """One thing a request needs: `perm` on a topic or a group, or an admin account."""

    kind: str
    """"topic", "group" or "admin"."""
    name: str = ""
    perm: Perm = Perm.SUB

    def __str__(self) -> str:
        if self.kind == "admin":
            return "an admin account"
        return f"{self.perm.name} on {self.kind} {self.name}"


ADMIN = Need("admin")


def topic(name: str, perm: Perm) -> Need:
    return Need("topic", name, perm)


def group(name: str) -> Need:
    return Need("group", name, Perm.SUB)
