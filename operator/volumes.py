"""Growing a Broker's volumes: which claims to patch, which must wait, which are resizing.

A claim is never asked to shrink: one already at or above the wanted size (grown by hand,
or by an earlier size) is left alone, so a smaller spec never turns into a refused patch.
Only a bound claim can be expanded (the API server refuses the rest), and its StorageClass
must allow expansion (the API server's admission says so; the operator reports it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .quantity import QuantityError, quantity_bytes


@dataclasses.dataclass(frozen=True)
class GrowthPlan:
    patches: list[tuple[str, dict[str, Any]]]
    """(claim name, merge patch) for each bound claim below the wanted size."""
    waiting: list[str]
    """Claims below the wanted size that cannot be expanded yet (not bound)."""
    resizing: list[str]
    """Claims whose request is above their capacity: the volume is being expanded."""


def claim_request(claim: Mapping[str, Any]) -> str | None:
    value = claim.get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
    return None if value is None else str(value)


def claim_capacity(claim: Mapping[str, Any]) -> str | None:
    value = (claim.get("status") or {}).get("capacity", {}).get("storage")
    return None if value is None else str(value)


def _bytes(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return quantity_bytes(text)
    except QuantityError:
        return None


def plan_growth(claims: Sequence[Mapping[str, Any]], *, size: str) -> GrowthPlan:
    wanted = quantity_bytes(size)
    patches: list[tuple[str, dict[str, Any]]] = []
    waiting: list[str] = []
    resizing: list[str] = []
    for claim in sorted(claims, key=lambda c: c["metadata"]["name"]):
        name = claim["metadata"]["name"]
        requested = _bytes(claim_request(claim))
        capacity = _bytes(claim_capacity(claim))
        if requested is not None and requested >= wanted:
            if capacity is not None and capacity < requested:
                resizing.append(name)
            continue
        if (claim.get("status") or {}).get("phase") != "Bound":
            waiting.append(name)
            continue
        patches.append((name, {"spec": {"resources": {"requests": {"storage": size}}}}))
    return GrowthPlan(patches, waiting, resizing)


def current_storage(claims: Sequence[Mapping[str, Any]]) -> str | None:
    """The smallest volume among the claims: its capacity, or its request while unbound."""
    sizes = []
    for claim in claims:
        text = claim_capacity(claim) or claim_request(claim)
        size_bytes = _bytes(text)
        if text is not None and size_bytes is not None:
            sizes.append((size_bytes, text))
    return min(sizes)[1] if sizes else None
