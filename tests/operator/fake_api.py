"""An in-memory stand-in for `KubeApi`: objects by path, label-selector lists, and errors
injected per path (the e2e suite runs the real API server)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mqstore.operator.kube import ApiError, object_path


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.errors: dict[tuple[str, str], ApiError] = {}
        """(method, path) -> the error that call raises."""
        self.calls: list[tuple[str, str]] = []

    def put(self, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        path = object_path(obj["apiVersion"], obj["kind"], metadata["namespace"],
                           metadata["name"])
        self.objects[path] = copy.deepcopy(obj)

    def _check(self, method: str, path: str) -> None:
        self.calls.append((method, path))
        error = self.errors.get((method, path))
        if error is not None:
            raise error

    async def get(self, path: str) -> dict[str, Any] | None:
        self._check("GET", path)
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    async def list(self, path: str, *, label_selector: str) -> list[dict[str, Any]]:
        self._check("LIST", path)
        wanted = dict(pair.split("=") for pair in label_selector.split(","))
        return [copy.deepcopy(obj) for key, obj in sorted(self.objects.items())
                if key.startswith(path + "/")
                and wanted.items() <= (obj["metadata"].get("labels") or {}).items()]

    async def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        metadata = manifest["metadata"]
        path = object_path(manifest["apiVersion"], manifest["kind"], metadata["namespace"],
                           metadata["name"])
        self._check("APPLY", path)
        applied = copy.deepcopy(dict(manifest))
        old = self.objects.get(path)
        if old is not None and "status" in old:
            applied["status"] = old["status"]
        self.objects[path] = applied
        return copy.deepcopy(applied)

    async def create(self, manifest: Mapping[str, Any]) -> bool:
        metadata = manifest["metadata"]
        path = object_path(manifest["apiVersion"], manifest["kind"], metadata["namespace"],
                           metadata["name"])
        self._check("CREATE", path)
        if path in self.objects:
            return False
        created = copy.deepcopy(dict(manifest))
        if "stringData" in created:  # what the API server stores (base64 aside)
            created["data"] = created.pop("stringData")
        self.objects[path] = created
        return True

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self._check("PATCH", path)
        target = self.objects[path]
        _merge(target, patch)
        return copy.deepcopy(target)

    async def delete(self, path: str) -> bool:
        self._check("DELETE", path)
        return self.objects.pop(path, None) is not None


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
