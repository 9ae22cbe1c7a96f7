"""Growing a Broker's claims to `spec.storage.size` (the plan is operator/volumes.py's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .kube import ApiError, KubeApi
from .volumes import GrowthPlan, plan_growth


async def grow_claims(api: KubeApi, claims_path: str, selectors: Sequence[str],
                      claims: Sequence[Mapping[str, Any]], *,
                      size: str) -> tuple[GrowthPlan, list[Mapping[str, Any]], list[str]]:
    """Patch every bound claim below `size`; returns the plan after the patches, the claims
    as they are now, and the refusals (e.g. a StorageClass without volume expansion)."""
    plan = plan_growth(claims, size=size)
    problems = []
    for claim_name, patch in plan.patches:
        try:
            await api.merge_patch(f"{claims_path}/{claim_name}", patch)
        except ApiError as error:
            if error.retryable:
                raise
            problems.append(f"claim {claim_name}: {error.message}")
    if not plan.patches:
        return plan, list(claims), problems
    fresh: list[Mapping[str, Any]] = [
        claim for selector in selectors
        for claim in await api.list(claims_path, label_selector=selector)]
    return plan_growth(fresh, size=size), fresh, problems
