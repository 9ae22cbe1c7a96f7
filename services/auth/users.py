"""`Users`: the accounts of the users file and the one rule that decides what each may do.

    caller's address in globalWhiteRemoteAddresses   → allowed, no credentials asked
    unknown or missing access key                    → refused (authentication)
    address in the account's whiteRemoteAddress      → the signature is not checked
    admin: true                                      → everything allowed
    a Need of an admin account                       → refused for anyone else
    topic %RETRY%<g>                                 → SUB on group g (RocketMQ's rule)
    a system topic (TBW102, SCHEDULE_TOPIC_XXXX,     → only an explicit topicPerms entry;
      %DLQ%..., RMQ_SYS_...)                           the default permission never applies
    other topics / groups                            → topicPerms / groupPerms entry, else
                                                       defaultTopicPerm / defaultGroupPerm;
                                                       DENY refuses, else the bit is needed

Two choices stricter than RocketMQ 4.x: a white-listed account's permissions still apply
(4.x lets its requests through unchecked), and system topics are outside the defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from mqstore.services.auth.addresses import Matcher
from mqstore.services.auth.permissions import RETRY_PREFIX, Need, Perm, is_system_topic


@dataclasses.dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = dataclasses.field(repr=False)
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: Mapping[str, Perm] = dataclasses.field(default_factory=dict)
    group_perms: Mapping[str, Perm] = dataclasses.field(default_factory=dict)
    white_addresses: tuple[Matcher, ...] = ()
    """Addresses this account's requests come from unsigned (its permissions still apply)."""

    def is_white(self, address: str) -> bool:
        return any(match(address) for match in self.white_addresses)

    def refusal(self, needs: Iterable[Need]) -> str | None:
        """Why this account may not do what `needs` lists, or None if it may."""
        if self.admin:
            return None
        for need in needs:
            if not self._has(need):
                return f"AccessKey {self.access_key} lacks {need}"
        return None

    def _has(self, need: Need) -> bool:
        if need.kind == "admin":
            return False
        if need.kind == "group":
            return _grants(self.group_perms.get(need.name, self.default_group_perm), need.perm)
        assert need.kind == "topic", need
        if need.name.startswith(RETRY_PREFIX):
            group = need.name[len(RETRY_PREFIX):]
            return _grants(self.group_perms.get(group, self.default_group_perm), Perm.SUB)
        explicit = self.topic_perms.get(need.name)
        if explicit is None:
            if is_system_topic(need.name):
                return False
            explicit = self.default_topic_perm
        return _grants(explicit, need.perm)


def _grants(owned: Perm, needed: Perm) -> bool:
    return not owned & Perm.DENY and owned & needed == needed


@dataclasses.dataclass(frozen=True)
class Users:
    """Every account by access key, and the addresses that need no credentials at all."""

    accounts: Mapping[str, Account]
    global_white_addresses: tuple[Matcher, ...] = ()
    source: str = ""
    """The file they came from (named in log lines)."""

    def is_globally_white(self, address: str) -> bool:
        return any(match(address) for match in self.global_white_addresses)

    def account(self, access_key: str) -> Account | None:
        return self.accounts.get(access_key)

    def first_admin(self) -> Account | None:
        return next((account for account in self.accounts.values() if account.admin), None)
