"""The one config file every service, the CLI and the operator's ConfigMap read.

    data_dir: /data                     # the store directory (required)
    store:                              # exactly the StoreConfig fields (storage/config.py)
      segment_size_bytes: 1073741824
      flush_mode: sync                  # enums by value
    writer:                             # WriterSettings (service.py)
      port: 8081
    indexer: {port: 8082}
    notifier: {port: 8083}
    topics: {auto_create: true}         # TopicsSettings (topics.py)

Precedence, lowest first: the dataclass defaults, the file, then environment variables
`MQSTORE_<SECTION>__<FIELD>` (`MQSTORE_STORE__FLUSH_MODE=sync`, `MQSTORE_WRITER__PORT=8081`)
and `MQSTORE_DATA_DIR`.  A variable text is coerced by the field's type: ints, floats, bools
(true/false/1/0/yes/no), enums by value, and `tuple[int, ...]` as "4,5".  Unknown sections,
fields or `MQSTORE_*__*` variables, wrong types and bad values are a `ConfigError` naming the
key and where it came from; nothing is silently ignored or defaulted.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mqstore.services.common.settings.auth import AuthSettings
from mqstore.services.common.settings.remoting import RemotingSettings
from mqstore.services.common.settings.replication import ReplicationSettings, check_role
from mqstore.services.common.settings.service import (
    IndexerSettings,
    NotifierSettings,
    ServiceSettings,
    WriterSettings,
)
from mqstore.services.common.settings.tls import TlsSettings
from mqstore.services.common.settings.topics import TopicsSettings
from mqstore.services.common.settings.values import field_types, from_yaml
from mqstore.storage import ConfigError, StoreConfig
from mqstore.storage.config_text import coerce_text

__all__ = ["ENV_DATA_DIR", "SECTIONS", "IndexerSettings", "NotifierSettings", "ServiceConfig",
           "ServiceSettings", "WriterSettings", "load_config"]

ENV_PREFIX = "MQSTORE_"
ENV_DATA_DIR = "MQSTORE_DATA_DIR"

SECTIONS: dict[str, type[Any]] = {"store": StoreConfig, "writer": WriterSettings,
                                  "indexer": IndexerSettings, "notifier": NotifierSettings,
                                  "replication": ReplicationSettings,
                                  "remoting": RemotingSettings, "topics": TopicsSettings,
                                  "tls": TlsSettings, "auth": AuthSettings}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    """The whole file, loaded and checked."""

    data_dir: Path
    store: StoreConfig
    writer: WriterSettings
    indexer: IndexerSettings
    notifier: NotifierSettings
    replication: ReplicationSettings = dataclasses.field(default_factory=ReplicationSettings)
    remoting: RemotingSettings = dataclasses.field(default_factory=RemotingSettings)
    topics: TopicsSettings = dataclasses.field(default_factory=TopicsSettings)
    tls: TlsSettings = dataclasses.field(default_factory=TlsSettings)
    auth: AuthSettings = dataclasses.field(default_factory=AuthSettings)
    source: str = "defaults"
    """Where it was read from (named in errors raised later, e.g. by the writer's checks)."""

    def __post_init__(self) -> None:
        # One largest message must fit in a request in any encoding: base64 body (4/3),
        # properties as JSON text, and 4 KiB for topic, tags and syntax.
        needed = (self.store.message_body_size_bytes_max * 4 // 3
                  + self.store.properties_size_bytes_max + 4096)
        if self.writer.request_body_size_bytes_max < needed:
            raise ConfigError(
                f"{self.source}: writer.request_body_size_bytes_max="
                f"{self.writer.request_body_size_bytes_max} cannot carry one largest message "
                f"(store.message_body_size_bytes_max={self.store.message_body_size_bytes_max}"
                f" as base64 plus properties): it must be at least {needed}")
        check_role(self.store.role, self.replication, source=self.source)
        if self.remoting.namesrv_tls_enabled and not self.tls.enabled:
            raise ConfigError(
                f"{self.source}: remoting.namesrv_tls_enabled needs the tls section "
                f"(tls.cert_file, tls.key_file, and tls.ca_file to verify the name servers)")


def load_config(path: str | Path | None, *,
                environ: Mapping[str, str] | None = None) -> ServiceConfig:
    """Read `path` (None: defaults only), apply the environment, check everything."""
    environ = os.environ if environ is None else environ
    source = str(path) if path is not None else "defaults"
    document = _read_yaml(Path(path)) if path is not None else {}
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    data_dir: object = None
    for key, section in document.items():
        if key == "data_dir":
            data_dir = section
            continue
        if key not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {key!r}; expected data_dir, "
                              f"{', '.join(SECTIONS)}")
        values[key].update(_sectionfrom_yaml(key, section, source=source))
    data_dir = _apply_environment(values, data_dir, environ)
    if not isinstance(data_dir, str) or not data_dir:
        raise ConfigError(f"{source}: data_dir is required (a directory path), got "
                          f"{data_dir!r}; set it in the file or as {ENV_DATA_DIR}")
    built = {name: _build(name, cls, values[name], source=source)
             for name, cls in SECTIONS.items()}
    return ServiceConfig(data_dir=Path(data_dir), source=source, **built)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file: {error.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the file must hold a mapping of sections, not "
                          f"{type(document).__name__}")
    return document


def _sectionfrom_yaml(section: str, body: object, *, source: str) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ConfigError(f"{source}: {section} must be a mapping of settings, not "
                          f"{type(body).__name__}")
    types = field_types(SECTIONS[section])
    values = {}
    for name, value in body.items():
        where = f"{source}: {section}.{name}"
        if name not in types:
            raise ConfigError(f"{where}: unknown setting; {section} has "
                              f"{', '.join(sorted(types))}")
        values[name] = from_yaml(value, types[name], where=where)
    return values


def _apply_environment(values: dict[str, dict[str, Any]], data_dir: object,
                       environ: Mapping[str, str]) -> object:
    for variable, text in sorted(environ.items()):
        if variable == ENV_DATA_DIR:
            data_dir = text
            continue
        if not variable.startswith(ENV_PREFIX) or "__" not in variable:
            continue
        section, _, name = variable[len(ENV_PREFIX):].lower().partition("__")
        where = f"environment {variable}"
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section {section!r}; expected "
                              f"{', '.join(SECTIONS)}")
        types = field_types(SECTIONS[section])
        if name not in types:
            raise ConfigError(f"{where}: unknown setting {section}.{name}")
        values[section][name] = coerce_text(text, types[name], where=where)
    return data_dir


def _build(section: str, cls: type[Any], values: dict[str, Any], *, source: str) -> Any:
    try:
        return cls(**values)
    except ConfigError as error:
        raise ConfigError(f"{source}: {section}: {error}") from None
