"""Brokers as the API server would hand them to the operator (defaults applied)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
CRD_PATH = ROOT / "charts" / "mqstore" / "crds" / "brokers.mqstore.io.yaml"


def crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return loaded


def crd_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing property with a default
    gets it, recursively inside present objects."""
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    for key, sub in (schema.get("properties") or {}).items():
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            value[key] = apply_defaults(sub, value[key])
    return value


def broker(name: str = "demo", *, spec: dict[str, Any] | None = None,
           annotations: dict[str, str] | None = None, generation: int = 1,
           status: dict[str, Any] | None = None) -> dict[str, Any]:
    raw_spec = spec if spec is not None else {"storage": {"size": "10Gi"}}
    defaulted = apply_defaults(crd_schema()["properties"]["spec"], copy.deepcopy(raw_spec))
    return {"apiVersion": "mqstore.io/v1alpha1", "kind": "Broker",
            "metadata": {"name": name, "namespace": "ns1", "uid": "uid-1",
                         "generation": generation, "annotations": dict(annotations or {})},
            "spec": defaulted, "status": dict(status or {})}
