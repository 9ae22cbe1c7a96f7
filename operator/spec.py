"""The Broker spec, parsed into frozen dataclasses, and the store settings it implies.

The CRD (charts/mqstore/crds/brokers.mqstore.io.yaml) defaults and validates every field,
so the API server hands the operator a complete spec.  The defaults are repeated here (and a
test holds them equal to the CRD's) only so that an older CRD without a new field still
reconciles.  Field names are the dataclass names in camelCase: `flush.intervalMs` is
`FlushSpec.interval_ms` and, in the config file, `store.flush_interval_ms`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from mqstore.storage import BrokerRole, ConfigError, FlushMode, PreallocateMethod, StoreConfig

from .quantity import QuantityError, quantity_bytes

GIB = 1 << 30

GROUPS_MAX = 16
"""The CRD's maximum of spec.groups (operator/groups.py)."""
REPLICAS_MAX = 16
"""The CRD's maximum of spec.replicas: pods of one group, and so the NodePorts each group
is given (operator/external.py)."""

NODE_PORT_MIN = 30000
NODE_PORT_MAX = 32767
"""Kubernetes' default NodePort range (kube-apiserver `--service-node-port-range`)."""
NODE_PORTS_PER_BROKER = 1 + GROUPS_MAX * REPLICAS_MAX
"""The name-server entry and one NodePort per pod of the largest cluster: 257."""
NODE_PORT_BASE_MAX = NODE_PORT_MAX - (NODE_PORTS_PER_BROKER - 1)
"""32511: the last port (base + 256) is then 32767.  The CRD's maximum of nodePortBase."""
NODE_PORT_BASE_DEFAULT = 30900


class SpecError(ValueError):
    """A spec the operator cannot act on; reported as condition Degraded (InvalidSpec)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StorageSpec:
    size: str
    storage_class_name: str | None = None
    access_modes: tuple[str, ...] = ("ReadWriteOnce",)
    segment_size_bytes: int = GIB
    preallocate: bool = True
    delete_claim: bool = False

    @property
    def size_bytes(self) -> int:
        return quantity_bytes(self.size)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlushSpec:
    mode: str = "async"
    interval_ms: int = 500
    pages_min: int = 4
    thorough_interval_ms: int = 10_000
    sync_timeout_ms: int = 5000


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicationSpec:
    mode: str = "async"
    """async: the master acknowledges without waiting for a follower (store.role
    async_master); sync: only once a follower has the record (sync_master)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoolSpec:
    enabled: bool = False
    buffer_count: int = 5


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetentionSpec:
    file_retention_hours: int = 72
    delete_hours: tuple[int, ...] = (4,)
    disk_max_used_ratio: float = 0.75
    disk_clean_forcibly_ratio: float = 0.85
    disk_warning_ratio: float = 0.9


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServiceSpec:
    resources: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """A container's `resources` ({requests, limits}), passed through as given."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NotifierSpec(ServiceSpec):
    replicas: int = 0
    """Extra notifiers in a Deployment sharing the master's (ReadWriteMany) volume."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NameServerSpec(ServiceSpec):
    replicas: int = 0
    """`mqstore namesrv` pods in a Deployment, which every group registers with.  0: none,
    each pod's remoting front answers the name-server codes for itself (a one-group
    Broker); a Broker of more than one group needs at least 1 (clients need one route
    across the groups)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecuritySpec:
    """Where the pods' credentials come from (Secrets in the Broker's namespace).  The keys
    and mount paths are in `pod_secrets.py`; the CRD's descriptions say the same."""

    users_secret: str | None = None
    """A Secret with key `plain_acl.yml` (users, their secrets and permissions): every entry
    point but metrics and health then needs credentials (config `auth.users_file`)."""

    replication_secret: str | None = None
    """A Secret with key `replication-secret`: what a follower proves it knows before the
    master sends a byte (config `replication.secret_file`)."""

    tls_secret: str | None = None
    """A Secret with keys `tls.crt`, `tls.key`, `ca.crt` (what cert-manager writes): TLS on
    every listener (config `tls.cert_file`, `key_file`, `ca_file`)."""

    generate_users_secret: bool = True
    """With `users_secret` unset: create `<broker>-users` (one admin with a random secret),
    once, owned by the Broker.  On by default, so a Broker starts with authentication on;
    false (and no users_secret) leaves the services open to whoever the NetworkPolicies
    let in.  The replication Secret is always generated when not named (the writers refuse
    a network-reachable replication listener without one); a TLS Secret never is:
    certificates come from the cluster's issuer."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PeerSpec:
    """One NetworkPolicy peer as Kubernetes spells it: pods matching `pod_selector` in the
    namespaces matching `namespace_selector` (only one of the two: the Broker's own
    namespace, or every pod of those namespaces), or addresses in `ip_block`."""

    namespace_selector: Mapping[str, Any] | None = None
    pod_selector: Mapping[str, Any] | None = None
    ip_block: Mapping[str, Any] | None = None


SAME_NAMESPACE = (PeerSpec(pod_selector={}),)
"""Every pod of the Broker's namespace: clients elsewhere must be named."""

EXTERNAL_TYPES = ("NodePort", "LoadBalancer")
"""The Services an external listener can be reached through (operator/external.py)."""
PROMETHEUS_PODS = (PeerSpec(namespace_selector={}, pod_selector={
    "matchLabels": {"app.kubernetes.io/name": "prometheus"}}),)
"""Prometheus pods in any namespace, by the label the Prometheus Operator gives them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExternalSpec:
    """Services for clients outside the cluster network (operator/external.py): NodePorts,
    and clients are given `<host>:<node_port_base>` as their name server; or load
    balancers, and clients are given the entry load balancer's address."""

    enabled: bool = False
    type: str = "NodePort"
    """NodePort or LoadBalancer (EXTERNAL_TYPES): the kind of Service per pod and entry."""

    host: str = ""
    """The address clients outside reach a node on (its IP or DNS name): the host every
    external address advertises.  Required when enabled with NodePorts."""

    node_port_base: int = NODE_PORT_BASE_DEFAULT
    """The first of the Broker's `NODE_PORTS_PER_BROKER` NodePorts (the name-server entry);
    each Broker of the cluster needs a range of its own."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NetworkSpec:
    policies: bool = True
    """Render NetworkPolicies for the Broker's pods (enforced only where the cluster's
    network plugin enforces them)."""

    clients: tuple[PeerSpec, ...] = SAME_NAMESPACE
    """Who may produce and consume (writer, notifier and remoting ports); [] nobody."""

    metrics: tuple[PeerSpec, ...] = PROMETHEUS_PODS
    """Who may scrape /metrics (served on the three HTTP ports); [] nobody."""

    external: ExternalSpec = dataclasses.field(default_factory=ExternalSpec)
    """Listeners for clients outside the cluster network; off by default."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BrokerSpec:
    storage: StorageSpec
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    replicas: int = 1
    """Pods of each group: its master and followers."""
    groups: int = 1
    """Broker groups of the cluster (operator/groups.py); group 0 has a one-group Broker's
    names."""
    paused: bool = False
    replication: ReplicationSpec = dataclasses.field(default_factory=ReplicationSpec)
    flush: FlushSpec = dataclasses.field(default_factory=FlushSpec)
    pool: PoolSpec = dataclasses.field(default_factory=PoolSpec)
    retention: RetentionSpec = dataclasses.field(default_factory=RetentionSpec)
    writer: ServiceSpec = dataclasses.field(default_factory=ServiceSpec)
    indexer: ServiceSpec = dataclasses.field(default_factory=ServiceSpec)
    notifier: NotifierSpec = dataclasses.field(default_factory=NotifierSpec)
    name_server: NameServerSpec = dataclasses.field(default_factory=NameServerSpec)
    security: SecuritySpec = dataclasses.field(default_factory=SecuritySpec)
    network: NetworkSpec = dataclasses.field(default_factory=NetworkSpec)


def camel(name: str) -> str:
    """`interval_ms` -> `intervalMs`: the CRD's spelling of a dataclass field."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def parse_spec(spec: Mapping[str, Any]) -> BrokerSpec:
    """The Broker's `.spec` as a `BrokerSpec`; a `SpecError` names the first bad field."""
    parsed = _parse(BrokerSpec, spec, where="spec")
    assert isinstance(parsed, BrokerSpec)
    try:
        parsed.storage.size_bytes  # noqa: B018 (validates the quantity)
    except QuantityError as error:
        raise SpecError(f"spec.storage.size: {error}") from None
    if not 1 <= parsed.groups <= GROUPS_MAX:
        raise SpecError(f"spec.groups must be 1 to {GROUPS_MAX}, got {parsed.groups}")
    if parsed.groups > 1 and parsed.name_server.replicas < 1:
        raise SpecError("spec.groups > 1 needs spec.nameServer.replicas >= 1: clients "
                        "need one name server that routes across the groups")
    _check_external(parsed)
    return parsed


def _check_external(spec: BrokerSpec) -> None:
    """What the CRD's bounds and rule refuse, for a CRD without them (the NodePorts are
    numbered for at most `REPLICAS_MAX` pods a group)."""
    external = spec.network.external
    if not NODE_PORT_MIN <= external.node_port_base <= NODE_PORT_BASE_MAX:
        raise SpecError(f"spec.network.external.nodePortBase must be {NODE_PORT_MIN} to "
                        f"{NODE_PORT_BASE_MAX} (its {NODE_PORTS_PER_BROKER} ports in the "
                        f"NodePort range), got {external.node_port_base}")
    if external.type not in EXTERNAL_TYPES:
        raise SpecError(f"spec.network.external.type must be one of "
                        f"{', '.join(EXTERNAL_TYPES)}, got {external.type!r}")
    if not external.enabled:
        return
    if external.type == "NodePort" and not external.host:
        raise SpecError("spec.network.external.host is required when "
                        "spec.network.external.enabled is true with NodePorts")
    if spec.replicas > REPLICAS_MAX:
        raise SpecError(f"spec.replicas must be at most {REPLICAS_MAX} with "
                        f"spec.network.external (each group has {REPLICAS_MAX} NodePorts), "
                        f"got {spec.replicas}")


def _parse(cls: type[Any], values: object, *, where: str) -> object:
    if not isinstance(values, Mapping):
        raise SpecError(f"{where} must be an object, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    known = {camel(field.name): field for field in dataclasses.fields(cls)}
    kwargs: dict[str, object] = {}
    for key, value in values.items():
        field = known.get(key)
        if field is None:
            continue  # a field of a newer CRD: ignored, as the API server would prune it
        kwargs[field.name] = _value(hints[field.name], value, where=f"{where}.{key}")
    try:
        return cls(**kwargs)
    except TypeError as error:  # a required field is missing
        raise SpecError(f"{where}: {error}") from None


def _value(kind: Any, value: object, *, where: str) -> object:
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _parse(kind, value, where=where)
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
        origin = typing.get_origin(kind)
    if origin is tuple:
        if not isinstance(value, list):
            raise SpecError(f"{where} must be a list")
        item_kind = typing.get_args(kind)[0]
        return tuple(_value(item_kind, item, where=f"{where}[{i}]") for i, item in enumerate(value))
    if origin is not None:  # Mapping[str, Any]: passed through
        if not isinstance(value, Mapping):
            raise SpecError(f"{where} must be an object")
        return dict(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SpecError(f"{where} must be {kind.__name__}, got {value!r}")
    return value


def store_settings(spec: BrokerSpec) -> dict[str, object]:
    """The config file's `store:` section for this spec (StoreConfig field names)."""
    return {
        "segment_size_bytes": spec.storage.segment_size_bytes,
        "role": f"{spec.replication.mode}_master",
        "preallocate_method": (PreallocateMethod.AUTO if spec.storage.preallocate
                               else PreallocateMethod.NONE).value,
        "flush_mode": spec.flush.mode,
        "flush_interval_ms": spec.flush.interval_ms,
        "flush_pages_min": spec.flush.pages_min,
        "flush_thorough_interval_ms": spec.flush.thorough_interval_ms,
        "sync_flush_timeout_ms": spec.flush.sync_timeout_ms,
        "pool_enabled": spec.pool.enabled,
        "pool_buffer_count": spec.pool.buffer_count,
        "file_retention_hours": spec.retention.file_retention_hours,
        "delete_hours": list(spec.retention.delete_hours),
        "disk_max_used_ratio": spec.retention.disk_max_used_ratio,
        "disk_clean_forcibly_ratio": spec.retention.disk_clean_forcibly_ratio,
        "disk_warning_ratio": spec.retention.disk_warning_ratio,
    }


def check_store_settings(settings: Mapping[str, object]) -> StoreConfig:
    """Build the StoreConfig the writer will build, so that a combination it would refuse is
    reported on the Broker instead of crash-looping the pods."""
    values = dict(settings)
    try:
        values["flush_mode"] = FlushMode(values["flush_mode"])
        values["role"] = BrokerRole(values["role"])
        values["preallocate_method"] = PreallocateMethod(values["preallocate_method"])
        hours = values["delete_hours"]
        assert isinstance(hours, list | tuple)
        values["delete_hours"] = tuple(hours)
        return StoreConfig(**values)  # type: ignore[arg-type]
    except (ConfigError, ValueError) as error:
        raise SpecError(f"the store settings are refused: {error}") from None
