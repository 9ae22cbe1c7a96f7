"""The operator's own settings, read once from its environment (the chart sets them)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "MQSTORE_OPERATOR_"


class SettingsError(ValueError):
    """A bad MQSTORE_OPERATOR_* variable: the operator refuses to start."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class OperatorSettings:
    broker_image: str | None = None
    """The image of a Broker that names none (the chart passes its own image: one image
    runs the operator and every service)."""

    resync_interval_s: float = 30.0
    """How often the timer re-reads each Broker's children and re-applies them: a lost
    watch event or a hand edit is repaired within this, at one GET and a few applies."""

    metrics_port: int = 9090
    """Prometheus metrics of the operator itself on http://0.0.0.0:<port>/metrics; 0: off."""

    group_request_timeout_s: float = 5.0
    """Each call of the operator to a group's master pod (operator/group_client.py: the
    drain's to its notifier, the roll's to its writer): a pod answers in milliseconds; an
    unreachable one costs a pass at most this per call, then the pass reports it and the
    next tries again."""

    namespace: str | None = None
    """The operator's own namespace (the chart sets it from the downward API; else the
    service account's namespace file): the broker pods' NetworkPolicy admits the
    operator's pods from it on the notifier port, for the drain.  None: from any
    namespace (pods labelled as the operator only)."""

    def __post_init__(self) -> None:
        if not 0.5 <= self.resync_interval_s <= 3600:
            raise SettingsError(f"{ENV_PREFIX}RESYNC_INTERVAL_S={self.resync_interval_s} must "
                                f"be in 0.5..3600 seconds")
        if not 0.1 <= self.group_request_timeout_s <= 60:
            raise SettingsError(f"{ENV_PREFIX}GROUP_REQUEST_TIMEOUT_S="
                                f"{self.group_request_timeout_s} must be in 0.1..60 seconds")
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError(f"{ENV_PREFIX}METRICS_PORT={self.metrics_port} must be a port "
                                f"(0: off)")


SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def settings_from_environment(environ: Mapping[str, str] | None = None, *,
                              namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE
                              ) -> OperatorSettings:
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    if namespace_file.is_file():
        values["namespace"] = namespace_file.read_text().strip() or None
    known = {field.name: field for field in dataclasses.fields(OperatorSettings)}
    for key, text in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name not in known:
            raise SettingsError(f"{key}: unknown setting; known: "
                                f"{', '.join(ENV_PREFIX + n.upper() for n in known)}")
        kind = {"broker_image": str, "resync_interval_s": float, "metrics_port": int,
                "group_request_timeout_s": float, "namespace": str}[name]
        try:
            values[name] = kind(text) if text != "" or kind is not str else None
        except ValueError:
            raise SettingsError(f"{key}={text!r} is not a {kind.__name__}") from None
    return OperatorSettings(**values)  # type: ignore[arg-type]
