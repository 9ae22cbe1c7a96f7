"""The spec parser: defaults agree with the CRD, bad values name their field."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mqstore.operator.spec import (
    BrokerSpec,
    SpecError,
    camel,
    check_store_settings,
    parse_spec,
    store_settings,
)
from mqstore.storage import FlushMode, PreallocateMethod

from .broker_fixtures import apply_defaults, broker, crd_schema


def _schema_defaults(schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    found = {}
    for key, sub in (schema.get("properties") or {}).items():
        if "default" in sub and sub["default"] != {}:
            found[prefix + key] = sub["default"]
        found.update(_schema_defaults(sub, f"{prefix}{key}."))
    return found


def _dataclass_defaults(spec: object, prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    assert dataclasses.is_dataclass(spec)
    for field in dataclasses.fields(spec):
        value = getattr(spec, field.name)
        if dataclasses.is_dataclass(value):
            found.update(_dataclass_defaults(value, f"{prefix}{camel(field.name)}."))
        else:
            found[prefix + camel(field.name)] = (
                [_as_crd_value(item) for item in value] if isinstance(value, tuple) else value)
    return found


def _as_crd_value(value: object) -> object:
    """A list item as the CRD spells it: a dataclass (a NetworkPolicy peer) becomes an
    object of its set fields in camelCase."""
    if not dataclasses.is_dataclass(value):
        return value
    return {camel(field.name): getattr(value, field.name)
            for field in dataclasses.fields(value) if getattr(value, field.name) is not None}


def test_every_crd_default_is_the_parsers_default() -> None:
    crd_defaults = _schema_defaults(crd_schema()["properties"]["spec"])
    code_defaults = _dataclass_defaults(parse_spec({"storage": {"size": "1Gi"}}))
    assert len(crd_defaults) >= 20
    for path, value in crd_defaults.items():
        assert code_defaults[path] == value, path


def test_every_spec_field_is_in_the_crd() -> None:
    code_fields = set(_dataclass_defaults(parse_spec({"storage": {"size": "1Gi"}})))
    schema = crd_schema()["properties"]["spec"]
    for path in code_fields:
        node = schema
        for part in path.split("."):
            node = node["properties"][part]
        assert "type" in node, path


def test_a_defaulted_spec_parses_to_its_values() -> None:
    spec = parse_spec(broker(spec={"storage": {"size": "20Gi", "storageClassName": "fast"},
                                   "flush": {"mode": "sync", "intervalMs": 100},
                                   "pool": {"enabled": True, "bufferCount": 3},
                                   "retention": {"deleteHours": [1, 2]}})["spec"])
    assert spec.storage.size_bytes == 20 << 30
    assert spec.storage.storage_class_name == "fast"
    assert (spec.flush.mode, spec.flush.interval_ms, spec.flush.pages_min) == ("sync", 100, 4)
    assert (spec.pool.enabled, spec.pool.buffer_count) == (True, 3)
    assert spec.retention.delete_hours == (1, 2)
    assert spec.replicas == 1


@pytest.mark.parametrize(("spec", "field"), [
    ({}, "storage"),
    ({"storage": {"size": "lots"}}, "spec.storage.size"),
    ({"storage": {"size": "1Gi"}, "replicas": "2"}, "spec.replicas"),
    ({"storage": {"size": "1Gi"}, "replicas": True}, "spec.replicas"),
    ({"storage": {"size": "1Gi"}, "flush": []}, "spec.flush"),
    ({"storage": {"size": "1Gi"}, "retention": {"deleteHours": 4}}, "spec.retention.deleteHours"),
])
def test_bad_values_name_their_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=field.replace(".", r"\.")):
        parse_spec(spec)


def test_unknown_fields_of_a_newer_crd_are_ignored() -> None:
    assert parse_spec({"storage": {"size": "1Gi", "future": 1}, "later": {}}).replicas == 1


def test_store_settings_are_what_the_writer_will_accept() -> None:
    spec = parse_spec(apply_defaults(crd_schema()["properties"]["spec"],
                                     {"storage": {"size": "1Gi", "preallocate": False},
                                      "flush": {"mode": "sync", "syncTimeoutMs": 900}}))
    config = check_store_settings(store_settings(spec))
    assert config.flush_mode is FlushMode.SYNC
    assert config.sync_flush_timeout_ms == 900
    assert config.preallocate_method is PreallocateMethod.NONE
    assert config.segment_size_bytes == 1 << 30


def test_a_combination_the_store_refuses_is_a_spec_error() -> None:
    spec = BrokerSpec(storage=parse_spec({"storage": {"size": "1Gi"}}).storage)
    settings = store_settings(spec)
    settings["disk_warning_ratio"] = 0.5  # below disk_max_used_ratio (an older CRD's miss)
    with pytest.raises(SpecError, match="disk_max_used_ratio"):
        check_store_settings(settings)
