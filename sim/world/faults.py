"""The fault schedule: deterministic points at which a double misbehaves.

A run's fault plan is part of its immutable configuration, so every failure is
reproducible. Each entry names a point, the capability it applies to (or ``*``) and the
call it fires on (1-based; 0 = every call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from capabilities.ports import FaultPlanError
from kernel.text import quoted_shortly
from runs.domain.safepoints import SAFE_POINTS

# Boundaries of a capability call, in the order a request crosses them (SPEC §3).
WORLD_POINTS: Mapping[str, str] = {
    "before_validation": "the service fails before it validates the request (nothing sent)",
    "after_validation_before_dispatch": "transport fails after validation, before the "
    "request could be sent (definitely not dispatched)",
    "after_receipt_before_commit": "the service received the request and failed before "
    "committing; the client sees a timeout (outcome unknown, ledger absent)",
    "after_commit_before_response": "the service committed; the response is lost "
    "(outcome unknown, ledger has the effect)",
    "malformed_response": "the service committed and answered without effect id or commit time",
    "late_response": "the service committed and answered after the client deadline",
    "rate_limited_after_dispatch": "the service answered RATE_LIMITED after it may have committed",
    "revision_changed": "the inventory revision changes while a read is in flight "
    "(1.0.0 reports STALE; 1.1.0 reports CONFLICT and reads once more)",
    "stale_read": "an inventory read returns an observation older than its freshness rule",
    "cross_tenant_result": "a read returns another tenant's record",
    "timeout": "a read times out before any result (reads only)",
    "unavailable": "the service is unavailable before dispatch",
    "ledger_unavailable": "the reconciliation read of the ledger fails",
    "key_conflict": "the ledger already holds the key with a different intent",
}

# Cancellations a plan may schedule at the engine's safe points (the engine's vocabulary).
CANCEL_POINTS: Mapping[str, str] = SAFE_POINTS


@dataclass(frozen=True)
class Fault:
    point: str
    capability: str = "*"
    on_call: int = 1

    def matches(self, point: str, capability: str, call_index: int) -> bool:
        return (
            self.point == point
            and self.capability in ("*", capability)
            and (self.on_call == 0 or self.on_call == call_index)
        )


def parse_plan(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Fault, ...]:
    """Return the fault plan; raise FaultPlanError on an unknown point or a bad entry."""
    faults = []
    for entry in raw or ():
        if not isinstance(entry, Mapping):
            raise FaultPlanError("each fault must be an object")
        point = entry.get("point")
        if point not in WORLD_POINTS and point not in CANCEL_POINTS:
            raise FaultPlanError(f"unknown fault point: {quoted_shortly(point)}")
        on_call = entry.get("on_call", 1)
        if not isinstance(on_call, int) or isinstance(on_call, bool) or on_call < 0:
            raise FaultPlanError("on_call must be a non-negative integer")
        capability = entry.get("capability", "*")
        if not isinstance(capability, str):
            raise FaultPlanError("capability must be a string")
        faults.append(Fault(point=str(point), capability=capability, on_call=on_call))
    return tuple(faults)


def plan_as_data(plan: Iterable[Fault]) -> list[dict[str, Any]]:
    return [{"point": f.point, "capability": f.capability, "on_call": f.on_call} for f in plan]


def fires(plan: Iterable[Fault], point: str, capability: str, call_index: int) -> bool:
    return any(f.matches(point, capability, call_index) for f in plan)


def normalise(raw: Any) -> list[dict[str, Any]]:
    """The fault plan as stored on a run; raise FaultPlanError on anything unknown."""
    if raw is not None and not isinstance(raw, (list, tuple)):
        raise FaultPlanError("a fault plan is a list of faults")
    return plan_as_data(parse_plan(raw))
