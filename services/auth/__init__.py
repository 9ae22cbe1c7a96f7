"""Users and permissions: RocketMQ's plain ACL model for every entry point.

    users_file.py          the users file (RocketMQ 4.x plain_acl.yml) → `Users`
    users.py               accounts and the rule deciding what each may do
    permissions.py         DENY/PUB/SUB, system topics, what a request needs (`Need`)
    addresses.py           white-listed client address patterns
    remoting_signature.py  AclClientRPCHook's HMAC-SHA1 signature (notifier/remoting/access.py)
    http_signature.py      signed HTTP requests (the servers and mqstore.client)
    http_access.py         the HTTP services' middleware; http_rules.py, what each route needs
"""

from __future__ import annotations

from mqstore.services.auth.permissions import UsersFileError
from mqstore.services.auth.users import Users
from mqstore.services.auth.users_file import load_users
from mqstore.services.common.settings.auth import AuthSettings


def users_of(settings: AuthSettings) -> Users | None:
    """The users the settings name, or None when authentication is off."""
    return load_users(settings.users_file) if settings.enabled else None


__all__ = ["Users", "UsersFileError", "load_users", "users_of"]
