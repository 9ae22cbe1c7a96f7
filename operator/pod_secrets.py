"""The Secrets a Broker's pods read: which ones (named in the spec or generated), the keys
each must hold, where they appear in the pods, and the generated ones' manifests.

Every file lands in the one projected volume mounted at /etc/mqstore beside the config file
(`pod.py`), at the paths the services' config names:

| Secret (spec.security) | key | file in the pod (under /etc/mqstore) | config setting |
|---|---|---|---|
| usersSecret | `plain_acl.yml` | auth/plain_acl.yml | `auth.users_file` |
| replicationSecret | `replication-secret` | replication/secret | `replication.secret_file` |
| tlsSecret | `tls.crt`, `tls.key`, `ca.crt` | tls/<key> | `tls.cert_file`, `key_file`, `ca_file` |

A generated Secret is created once (never applied again: applying would replace the random
secret on every pass) and owned by its Broker, so it goes with it.  The builders take the
random values as arguments; only `reconcile.py` draws them, and nothing ever logs them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from . import names
from .spec import BrokerSpec

USERS_KEY = "plain_acl.yml"
REPLICATION_KEY = "replication-secret"
TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")

USERS_PATH = f"auth/{USERS_KEY}"
REPLICATION_PATH = "replication/secret"
TLS_DIR = "tls"
"""Paths inside the config volume (names.CONFIG_DIR)."""

ADMIN_ACCESS_KEY = "mqstore-admin"
"""The generated account's access key (RocketMQ wants more than 6 characters)."""

ACCESS_KEY_KEY = "accessKey"
SECRET_KEY_KEY = "secretKey"
"""The generated users Secret also holds the admin's two keys on their own, so a client's
pod can take them with `secretKeyRef` instead of parsing plain_acl.yml.  The services read
only plain_acl.yml."""

RANDOM_BYTES = 32
"""Entropy of each generated secret: 256 bits, beyond any guessing."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecretUse:
    """One Secret the pods mount: its name, the keys it must hold, and whether the
    operator creates it."""

    field: str
    """The spec field that names it (or would): for messages."""
    name: str
    keys: tuple[str, ...]
    generated: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecretsInUse:
    users: SecretUse | None
    """None: no authentication (no usersSecret, generateUsersSecret false)."""
    replication: SecretUse
    tls: SecretUse | None

    def all(self) -> list[SecretUse]:
        return [use for use in (self.users, self.replication, self.tls) if use is not None]


def users_secret_name(broker_name: str) -> str:
    return f"{broker_name}-users"


def replication_secret_name(broker_name: str) -> str:
    return f"{broker_name}-replication"


def secrets_in_use(broker_name: str, spec: BrokerSpec) -> SecretsInUse:
    """Named Secrets win.  An unnamed replication Secret is always generated; an unnamed
    users Secret when `generateUsersSecret`; a TLS Secret never."""
    security = spec.security
    if security.users_secret is not None:
        users: SecretUse | None = SecretUse(field="spec.security.usersSecret",
                                            name=security.users_secret, keys=(USERS_KEY,),
                                            generated=False)
    elif security.generate_users_secret:
        users = SecretUse(field="spec.security.generateUsersSecret",
                          name=users_secret_name(broker_name), keys=(USERS_KEY,),
                          generated=True)
    else:
        users = None
    replication = SecretUse(
        field="spec.security.replicationSecret",
        name=security.replication_secret or replication_secret_name(broker_name),
        keys=(REPLICATION_KEY,), generated=security.replication_secret is None)
    tls = (SecretUse(field="spec.security.tlsSecret", name=security.tls_secret,
                     keys=TLS_KEYS, generated=False)
           if security.tls_secret is not None else None)
    return SecretsInUse(users=users, replication=replication, tls=tls)


def config_path(relative: str) -> str:
    return f"{names.CONFIG_DIR}/{relative}"


def projected_sources(in_use: SecretsInUse) -> list[dict[str, Any]]:
    """The projected volume's Secret sources: each key to its file (mode 0440: the pod's
    group, 10001, reads it; nobody writes it)."""
    sources = []
    placed: list[tuple[SecretUse | None, dict[str, str]]] = [
              (in_use.users, {USERS_KEY: USERS_PATH}),
              (in_use.replication, {REPLICATION_KEY: REPLICATION_PATH}),
              (in_use.tls, {key: f"{TLS_DIR}/{key}" for key in TLS_KEYS})]
    for use, paths in placed:
        if use is None:
            continue
        sources.append({"secret": {"name": use.name, "items": [
            {"key": key, "path": path, "mode": 0o440} for key, path in paths.items()]}})
    return sources


def tls_volume_source(tls: SecretUse) -> dict[str, Any]:
    """The TLS Secret alone, for a volume mounted at /etc/mqstore/tls (the name servers,
    which read no config file): each key at its own name, mode 0440 as above."""
    return {"secret": {"name": tls.name, "items": [
        {"key": key, "path": key, "mode": 0o440} for key in TLS_KEYS]}}


def plain_acl_text(*, access_key: str, secret_key: str) -> str:
    """A users file with one admin account (RocketMQ 4.x plain_acl.yml): an admin with no
    per-topic or per-group rules may do everything.  Other users are added by editing the
    Secret (the operator never rewrites it)."""
    document = {"globalWhiteRemoteAddresses": [],
                "accounts": [{"accessKey": access_key, "secretKey": secret_key,
                              "admin": True}]}
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def _secret(broker: Mapping[str, Any], name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": names.child_metadata(broker, name), "stringData": data}


def build_users_secret(broker: Mapping[str, Any], *, secret_key: str) -> dict[str, Any]:
    name = users_secret_name(broker["metadata"]["name"])
    return _secret(broker, name, {
        USERS_KEY: plain_acl_text(access_key=ADMIN_ACCESS_KEY, secret_key=secret_key),
        ACCESS_KEY_KEY: ADMIN_ACCESS_KEY, SECRET_KEY_KEY: secret_key})


def build_replication_secret(broker: Mapping[str, Any], *, secret: str) -> dict[str, Any]:
    name = replication_secret_name(broker["metadata"]["name"])
    return _secret(broker, name, {REPLICATION_KEY: secret})


def build_generated_secret(broker: Mapping[str, Any], use: SecretUse, *,
                           random_text: str) -> dict[str, Any]:
    """The manifest of a generated Secret (`use.generated`), with `random_text` as its
    secret."""
    assert use.generated
    if use.keys == (USERS_KEY,):
        return build_users_secret(broker, secret_key=random_text)
    assert use.keys == (REPLICATION_KEY,)
    return build_replication_secret(broker, secret=random_text)


def secret_problem(use: SecretUse, live: Mapping[str, Any] | None, *,
                   namespace: str) -> str | None:
    """Why the pods could not mount `use` (None: they can).  Looks at key names only."""
    if live is None:
        return (f"Secret {namespace}/{use.name} ({use.field}) does not exist: the pods "
                f"cannot start until it does")
    present = set(live.get("data") or {}) | set(live.get("stringData") or {})
    missing = [key for key in use.keys if key not in present]
    if missing:
        return (f"Secret {namespace}/{use.name} ({use.field}) has no key "
                f"{', '.join(missing)}: the pods cannot start until it does")
    return None
