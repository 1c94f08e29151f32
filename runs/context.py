"""The context projection: the bounded, versioned view a policy receives at DECIDING.

Built from canonical state only: the objective, admitted observations, visible capability
projections, non-sensitive budget hints, and recent denial reasons. Never chat history
as state, never principal references or credentials. Its hash goes on the decision event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from approvals.models import Decision
from catalog.capabilities.registry import ALL_CONTRACTS
from catalog.domain.contracts import model_projection
from runs import evidence
from runs.domain.budgets import Budget
from runs.domain.canonical import digest
from runs.domain.states import EventType
from runs.models import Event, Run

VERSION = "context-projection@1"
MAX_OBSERVATIONS = 12
MAX_DENIALS = 3


def build(run: Run) -> dict[str, Any]:
    """Return the projection for ``run``'s next decision (hash it with ``projection_hash``)."""
    recorded = list(
        Event.objects.filter(
            run=run,
            type__in=[
                EventType.OBSERVATION_RECORDED.value,
                EventType.PROPOSAL_DENIED.value,
                EventType.APPROVAL_DECLINED.value,
                EventType.COMPLETION_REJECTED.value,
            ],
        )
        .order_by("sequence")
        .values("sequence", "type", "refs", "reason_code", "payload")
    )
    obs_ids = [
        e["refs"].get("observation")
        for e in recorded
        if e["type"] == EventType.OBSERVATION_RECORDED.value
    ]
    contents = evidence.contents(i for i in obs_ids if i)
    observations = []
    for e in recorded:
        if e["type"] != EventType.OBSERVATION_RECORDED.value:
            continue
        ref = e["refs"].get("observation", "")
        content = contents.get(ref)
        if content is None:
            continue
        observations.append(
            {
                "ref": ref,
                "seq": e["sequence"],
                "capability": content.get("capability", ""),
                "ok": bool(content.get("ok")),
                "error": content.get("error", ""),
                "detail": str(content.get("detail", ""))[:300],
                "data": content.get("data", {}),
            }
        )
    denials = [
        {"seq": e["sequence"], "reason": _denial_reason(e), "detail": _denial_detail(e)}
        for e in recorded
        if e["type"] != EventType.OBSERVATION_RECORDED.value
    ]
    counters, limits = run.counters, run.budget_limits
    return {
        "version": VERSION,
        "objective": run.objective,
        "turn": counters.get(Budget.TURNS, 0) + 1,
        "observations": observations[-MAX_OBSERVATIONS:]
        if len(observations) > MAX_OBSERVATIONS
        else observations,
        "capabilities": visible_capabilities(run),
        "budget_hints": {
            b: max(0, limits.get(b, 0) - counters.get(b, 0))
            for b in (Budget.TURNS, Budget.ACTIONS, Budget.CORRECTIONS)
        },
        "recent_denials": denials[-MAX_DENIALS:],
        "all_denial_reasons": [{"reason": d["reason"]} for d in denials],
        "requested_change": _requested_change(run),
    }


def _denial_reason(e: Mapping[str, Any]) -> str:
    if e["type"] == EventType.APPROVAL_DECLINED.value:
        return "approval_declined"
    if e["type"] == EventType.COMPLETION_REJECTED.value:
        return "completion_rejected"
    return str(e["reason_code"])


def _denial_detail(e: Mapping[str, Any]) -> str:
    payload = e.get("payload") or {}
    detail = payload.get("detail") or payload.get("reason") or ""
    if isinstance(payload.get("reasons"), list):
        detail = "; ".join(payload["reasons"])
    return str(detail)[:300]


def _requested_change(run: Run) -> dict[str, Any]:
    decision = (
        Decision.objects.filter(checkpoint__run=run, verdict=Decision.Verdict.DECLINE)
        .order_by("-created_at")
        .first()
    )
    return dict(decision.requested_change) if decision and decision.requested_change else {}


def visible_capabilities(run: Run) -> list[dict[str, Any]]:
    """Model projections of the capabilities this run pinned (trusted controls included)."""
    return [
        model_projection(ALL_CONTRACTS[c]) for c in sorted(run.components) if c in ALL_CONTRACTS
    ]


def projection_hash(projection: Mapping[str, Any]) -> str:
    return digest(dict(projection))
