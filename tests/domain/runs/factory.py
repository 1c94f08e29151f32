"""Build valid event chains in memory for domain tests (no database)."""

from __future__ import annotations

from typing import Any

from runs.domain.budgets import DEFAULT_LIMITS
from runs.domain.events import EventRecord, RunConfig, RunSnapshot, apply, build_event
from runs.domain.states import EventType, State
from runs.domain.transitions import next_state

CONFIG = RunConfig(
    run_id="run-401",
    task_id="task-401",
    contract_version="fieldops-reservation@1.0.0",
    policy_version="fieldops-policy@1.0.0",
    model_adapter_version="double@1",
    component_set="bvs-04-1",
    tenant="north",
    principal_ref="user:operator",
    scope=("LOC-N1",),
    limits=dict(DEFAULT_LIMITS),
    deadline="2026-11-30T12:00:00+00:00",
    created_at="2026-11-30T10:00:00+00:00",
)

ACTORS = {
    EventType.PROPOSAL_EMITTED: "model",
    EventType.APPROVAL_GRANTED: "human-principal",
    EventType.APPROVAL_DECLINED: "human-principal",
    EventType.OBSERVATION_RECEIVED: "capability-adapter",
    EventType.EFFECT_RECORDED: "capability-adapter",
    EventType.RUN_CANCELLED: "operator",
}

# The R-401 happy path, event by event.
HAPPY = [
    EventType.RUN_STARTED,
    EventType.OBSERVATION_RECORDED,
    EventType.PROPOSAL_EMITTED,
    EventType.PROPOSAL_ALLOWED,
    EventType.OBSERVATION_RECEIVED,
    EventType.OBSERVATION_RECORDED,
    EventType.PROPOSAL_EMITTED,
    EventType.APPROVAL_REQUIRED,
    EventType.APPROVAL_GRANTED,
    EventType.PROPOSAL_ALLOWED,
    EventType.EFFECT_RECORDED,
    EventType.COMPLETION_VERIFIED,
]


def refs_for(event: EventType, i: int) -> dict[str, str]:
    if event is EventType.EFFECT_RECORDED:
        return {"effect": "EF-1", "attempt": "at-1"}
    if event is EventType.APPROVAL_GRANTED:
        return {"approval": "cp-1", "checkpoint": "cp-1"}
    if event is EventType.APPROVAL_REQUIRED:
        return {"checkpoint": "cp-1"}
    if event is EventType.COMPLETION_VERIFIED:
        return {"completion": "ev-c"}
    if event in (EventType.RUN_STARTED, EventType.OBSERVATION_RECEIVED):
        return {"observation": f"ev-{i}"}
    if event is EventType.PROPOSAL_EMITTED:
        return {"proposal": f"ev-p{i}"}
    return {}


def chain(
    events: list[EventType], snapshot: RunSnapshot | None = None, **overrides: Any
) -> tuple[RunSnapshot, list[EventRecord]]:
    snap = snapshot or RunSnapshot.initial(CONFIG)
    out = []
    for i, event in enumerate(events):
        target = next_state(snap.state, event) or snap.state
        delta = {"turns": 1, "proposals": 1} if event is EventType.PROPOSAL_EMITTED else {}
        if event is EventType.EFFECT_RECORDED:
            delta = {"effects": 1}
        record = build_event(
            snap,
            event_id=f"e-{snap.revision + 1}",
            type=event,
            actor=ACTORS.get(event, "harness"),
            next_state=State(target),
            occurred_at=f"2026-11-30T10:00:{snap.revision + 1:02d}+00:00",
            counters_delta=delta,
            refs=refs_for(event, i),
            **overrides,
        )
        out.append(record)
        snap = apply(snap, record)
    return snap, out
