"""Claim growth: bound and smaller claims are patched; nothing ever shrinks."""

from __future__ import annotations

from typing import Any

from mqstore.operator.volumes import current_storage, plan_growth


def claim(name: str, request: str, *, phase: str = "Bound",
          capacity: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if capacity is not None:
        status["capacity"] = {"storage": capacity}
    return {"metadata": {"name": name},
            "spec": {"resources": {"requests": {"storage": request}}}, "status": status}


def test_bound_smaller_claims_are_patched_to_the_new_size() -> None:
    plan = plan_growth([claim("data-b-1", "10Gi", capacity="10Gi"),
                        claim("data-b-0", "10Gi", capacity="10Gi")], size="20Gi")
    assert plan.patches == [
        ("data-b-0", {"spec": {"resources": {"requests": {"storage": "20Gi"}}}}),
        ("data-b-1", {"spec": {"resources": {"requests": {"storage": "20Gi"}}}})]
    assert plan.waiting == plan.resizing == []


def test_larger_or_equal_claims_are_left_alone() -> None:
    plan = plan_growth([claim("a", "30Gi", capacity="30Gi"), claim("b", "20Gi", capacity="20Gi"),
                        claim("c", "21474836480", capacity="20Gi")], size="20Gi")
    assert plan.patches == []
    assert plan.resizing == []


def test_an_unbound_claim_waits_and_an_expanding_one_is_resizing() -> None:
    plan = plan_growth([claim("a", "10Gi", phase="Pending"),
                        claim("b", "20Gi", capacity="10Gi")], size="20Gi")
    assert plan.patches == []
    assert plan.waiting == ["a"]
    assert plan.resizing == ["b"]


def test_a_smaller_spec_never_shrinks_anything() -> None:
    assert plan_growth([claim("a", "20Gi", capacity="20Gi")], size="5Gi").patches == []


def test_current_storage_is_the_smallest_capacity_or_request() -> None:
    assert current_storage([]) is None
    assert current_storage([claim("a", "20Gi", capacity="20Gi"),
                            claim("b", "20Gi", capacity="10Gi")]) == "10Gi"
    assert current_storage([claim("a", "5Gi", phase="Pending")]) == "5Gi"
