"""Reading the users file: RocketMQ 4.x's `plain_acl.yml`, checked whole at start.

    globalWhiteRemoteAddresses: ["10.10.103.*"]     # optional: no credentials asked
    accounts:
      - accessKey: RocketMQ                         # more than 6 characters, unique
        secretKey: 12345678                         # more than 6 characters
        whiteRemoteAddress: 192.168.0.*             # optional: unsigned from there
        admin: false
        defaultTopicPerm: DENY                      # DENY (the default), PUB, SUB, PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
        groupPerms: ["groupA=DENY", "groupB=SUB"]

A field RocketMQ's own tools write (`dataVersion`) is accepted and ignored; any other
unknown key, a missing or short key, a duplicate access key, a bad permission or address
pattern is a `UsersFileError` naming the file, the account and the field: the service does
not start on a file it would half apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mqstore.services.auth.addresses import compile_pattern
from mqstore.services.auth.permissions import Perm, UsersFileError, parse_perm
from mqstore.services.auth.users import Account, Users

KEY_LENGTH_MIN = 7
"""RocketMQ refuses access and secret keys of 6 characters or fewer."""
TOP_KEYS = frozenset({"globalWhiteRemoteAddresses", "accounts", "dataVersion"})
ACCOUNT_KEYS = frozenset({"accessKey", "secretKey", "whiteRemoteAddress", "admin",
                          "defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms"})


def load_users(path: str | Path) -> Users:
    """The users of the file at `path`, or `UsersFileError` with one line saying why not."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsersFileError(f"auth.users_file {source}: cannot read it: {error}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        line = getattr(getattr(error, "problem_mark", None), "line", None)
        where = f" (line {line + 1})" if line is not None else ""
        raise UsersFileError(f"auth.users_file {source}: not YAML{where}: "
                             f"{getattr(error, 'problem', error)}") from None
    return parse_users(document, source=source)


def parse_users(document: object, *, source: str) -> Users:
    where = f"auth.users_file {source}"
    if not isinstance(document, dict):
        raise UsersFileError(f"{where}: expected a mapping with `accounts`, got "
                             f"{type(document).__name__}")
    unknown = sorted(set(map(str, document)) - TOP_KEYS)
    if unknown:
        raise UsersFileError(f"{where}: unknown key {unknown[0]!r}; expected "
                             f"{', '.join(sorted(TOP_KEYS))}")
    accounts: dict[str, Account] = {}
    for index, entry in enumerate(_list(document.get("accounts"), f"{where}: accounts")):
        account = _account(entry, where=f"{where}: accounts[{index}]")
        if account.access_key in accounts:
            raise UsersFileError(f"{where}: accounts[{index}]: accessKey "
                                 f"{account.access_key!r} is used twice")
        accounts[account.access_key] = account
    if not accounts:
        raise UsersFileError(f"{where}: no accounts: nobody could use the services (leave "
                             f"auth.users_file empty to turn authentication off)")
    white = tuple(compile_pattern(item, where=f"{where}: globalWhiteRemoteAddresses[{i}]")
                  for i, item in enumerate(_list(document.get("globalWhiteRemoteAddresses"),
                                                 f"{where}: globalWhiteRemoteAddresses")))
    return Users(accounts=accounts, global_white_addresses=white, source=source)


def _account(entry: object, *, where: str) -> Account:
    if not isinstance(entry, dict):
        raise UsersFileError(f"{where}: an account must be a mapping")
    unknown = sorted(set(map(str, entry)) - ACCOUNT_KEYS)
    if unknown:
        raise UsersFileError(f"{where}: unknown key {unknown[0]!r}; expected "
                             f"{', '.join(sorted(ACCOUNT_KEYS))}")
    access_key = _key(entry, "accessKey", where=where)
    where = f"{where} ({access_key})"
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise UsersFileError(f"{where}: admin must be true or false, got {admin!r}")
    white = entry.get("whiteRemoteAddress")
    return Account(
        access_key=access_key, secret_key=_key(entry, "secretKey", where=where), admin=admin,
        default_topic_perm=_perm_or_deny(entry, "defaultTopicPerm", where=where),
        default_group_perm=_perm_or_deny(entry, "defaultGroupPerm", where=where),
        topic_perms=_perm_list(entry, "topicPerms", where=where),
        group_perms=_perm_list(entry, "groupPerms", where=where),
        white_addresses=() if white in (None, "") else (
            compile_pattern(white, where=f"{where}: whiteRemoteAddress"),))


def _key(entry: dict[str, Any], name: str, *, where: str) -> str:
    value = entry.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # `secretKey: 12345678` is a number to YAML
    if not isinstance(value, str) or len(value) < KEY_LENGTH_MIN:
        raise UsersFileError(f"{where}: {name} must be text of at least {KEY_LENGTH_MIN} "
                             f"characters")
    return value


def _perm_or_deny(entry: dict[str, Any], name: str, *, where: str) -> Perm:
    value = entry.get(name)
    return Perm.DENY if value is None else parse_perm(value, where=f"{where}: {name}")


def _perm_list(entry: dict[str, Any], name: str, *, where: str) -> dict[str, Perm]:
    perms: dict[str, Perm] = {}
    for index, item in enumerate(_list(entry.get(name), f"{where}: {name}")):
        at = f"{where}: {name}[{index}]"
        resource, equals, perm = str(item).partition("=")
        if not isinstance(item, str) or not equals or not resource.strip():
            raise UsersFileError(f"{at}: expected \"name=PERM\", got {item!r}")
        if resource.strip() in perms:
            raise UsersFileError(f"{at}: {resource.strip()} is listed twice")
        perms[resource.strip()] = parse_perm(perm.strip(), where=at)
    return perms


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsersFileError(f"{where}: expected a list, got {type(value).__name__}")
    return value
