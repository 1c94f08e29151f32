"""The eight named invariants of SPEC §1, as code.

Each check takes the run before an event and the event, and returns a violation message
or None. The transition authority refuses to append an event that violates any of them;
audit replay reports the first violation it meets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .events import EventRecord, RunSnapshot
from .states import (
    CONTROL_EVENTS,
    POST_TERMINAL_CONTROL_EVENTS,
    Actor,
    EventType,
    is_terminal,
)
from .transitions import edge


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str


class InvariantViolation(Exception):
    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("; ".join(f"{v.invariant}: {v.detail}" for v in violations))


Check = Callable[[RunSnapshot, EventRecord], str | None]


def run_identity_stable(run: RunSnapshot, event: EventRecord) -> str | None:
    if event.run_id != run.run_id:
        return f"event for run {event.run_id} appended to run {run.run_id}"
    return None


def event_sequence_next(run: RunSnapshot, event: EventRecord) -> str | None:
    if event.sequence != run.revision + 1:
        return f"sequence {event.sequence} does not follow revision {run.revision}"
    return None


def state_transition_declared(run: RunSnapshot, event: EventRecord) -> str | None:
    if event.prev_state is not run.state:
        return f"event says it left {event.prev_state}, run was in {run.state}"
    if event.type in CONTROL_EVENTS:
        if event.next_state is not run.state:
            return f"control event {event.type} changed state to {event.next_state}"
        return None
    declared = edge(run.state, event.type)
    if declared is None:
        return f"no edge ({run.state}, {event.type})"
    if declared.target is not event.next_state:
        return f"({run.state}, {event.type}) leads to {declared.target}, not {event.next_state}"
    return None


def terminal_unique(run: RunSnapshot, event: EventRecord) -> str | None:
    if is_terminal(run.state) and event.type not in POST_TERMINAL_CONTROL_EVENTS:
        return f"{event.type} after terminal {run.state}"
    return None


def budget_counter_monotonic(run: RunSnapshot, event: EventRecord) -> str | None:
    for key, before in run.counters.items():
        after = event.budget.get(key)
        if after is None or after < before:
            return f"counter {key} went from {before} to {after}"
    return None


def contract_version_fixed(run: RunSnapshot, event: EventRecord) -> str | None:
    config = run.config
    pinned = (config.contract_version, config.policy_version, config.component_set)
    carried = (event.contract_version, event.policy_version, event.component_set)
    if pinned != carried:
        return f"event carries versions {carried}, run pinned {pinned}"
    return None


def proposal_not_authority(run: RunSnapshot, event: EventRecord) -> str | None:
    if event.actor == Actor.MODEL.value and event.type is not EventType.PROPOSAL_EMITTED:
        return f"model output recorded as {event.type}: a model may only propose"
    declared = edge(run.state, event.type)
    if declared is not None and event.actor not in declared.actors:  # Actor is a str enum
        return f"{event.actor} may not cause {event.type}"
    if event.type is EventType.APPROVAL_GRANTED and not event.refs.get("approval"):
        return "approval.granted without an approval decision record"
    return None


_EFFECT_PROGRESS = frozenset({EventType.EFFECT_RECORDED, EventType.RECONCILIATION_MATCHED})


def effect_evidence_required(run: RunSnapshot, event: EventRecord) -> str | None:
    if event.type in _EFFECT_PROGRESS and not (
        event.refs.get("effect") and event.refs.get("attempt")
    ):
        return f"{event.type} without a ledger effect and attempt reference"
    if event.type is EventType.EFFECT_RECONCILED:
        if not event.refs.get("attempt"):
            return "effect.reconciled without the attempt it resolves"
        if event.payload.get("outcome") == "matched" and not event.refs.get("effect"):
            return "a matched reconciliation must reference the ledger effect"
    if event.type is EventType.COMPLETION_VERIFIED and not event.refs.get("completion"):
        return "completion.verified without a completion assessment"
    return None


INVARIANTS: tuple[tuple[str, Check], ...] = (
    ("run.identity.stable", run_identity_stable),
    ("event.sequence.next", event_sequence_next),
    ("state.transition.declared", state_transition_declared),
    ("terminal.unique", terminal_unique),
    ("budget.counter.monotonic", budget_counter_monotonic),
    ("contract.version.fixed", contract_version_fixed),
    ("proposal.not_authority", proposal_not_authority),
    ("effect.evidence.required", effect_evidence_required),
)


def violations(run: RunSnapshot, event: EventRecord) -> list[Violation]:
    out = []
    for name, check in INVARIANTS:
        detail = check(run, event)
        if detail is not None:
            out.append(Violation(name, detail))
    return out


def assert_invariants(run: RunSnapshot, event: EventRecord) -> None:
    """Raise InvariantViolation if appending ``event`` to ``run`` breaks an invariant."""
    found = violations(run, event)
    if found:
        raise InvariantViolation(found)
