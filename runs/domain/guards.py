"""The authority's refusal guards, pure: given the run as it is and a requested event, the
control event that records a refusal, or nothing (SPEC §1 Transition authority).

The authority runs them inside its transaction on the row it compare-and-sets; tests and
replay can run them on any snapshot.

Pure module: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .budgets import Budget
from .events import RunSnapshot
from .states import CONTROL_EVENTS, POST_TERMINAL_CONTROL_EVENTS, Actor, EventType, State
from .transitions import edge

# Refs an event must carry to be appended (beyond the named invariants' checks).
REQUIRED_REFS: Mapping[EventType, tuple[str, ...]] = {
    EventType.APPROVAL_GRANTED: ("approval",),
    EventType.EFFECT_RECORDED: ("effect", "attempt"),
    EventType.RECONCILIATION_MATCHED: ("effect", "attempt"),
    EventType.COMPLETION_VERIFIED: ("completion",),
}

# Bytes reserved for the event being appended when the history size is checked.
EVENT_BYTES_RESERVE = 4096


@dataclass(frozen=True)
class HistoryLimits:
    max_events: int
    max_bytes: int
    warn_events: int
    warn_bytes: int


def refusal(
    run: RunSnapshot,
    type: EventType,
    actor: Actor,
    refs: Mapping[str, str] | None,
    delta: Mapping[str, int] | None,
) -> tuple[EventType, str] | None:
    """The control event type and reason refusing ``type`` on ``run``; None if it may go on."""
    if type in CONTROL_EVENTS:
        if run.terminal and type not in POST_TERMINAL_CONTROL_EVENTS:
            # A budget change or a recovery cannot touch a closed run; the request is recorded.
            return EventType.TRANSITION_REJECTED, "run_terminal"
        return None
    if run.terminal:
        if type is EventType.PROPOSAL_EMITTED and run.state is State.CANCELLED:
            return EventType.PROPOSAL_REJECTED_AFTER_CANCEL, "run_cancelled"
        if type in (
            EventType.APPROVAL_GRANTED,
            EventType.APPROVAL_DECLINED,
            EventType.CLARIFICATION_ANSWERED,
        ):
            return EventType.LATE_APPROVAL_REJECTED, "run_terminal"
        if type is EventType.EXTERNAL_OBSERVED:
            return EventType.TRANSITION_REJECTED, "post_terminal_callback"
        return EventType.TRANSITION_REJECTED, "run_terminal"
    declared = edge(run.state, type)
    if declared is None:
        return EventType.TRANSITION_REJECTED, "illegal_transition"
    if actor not in declared.actors:
        # proposal.not_authority: an actor without standing for this edge is refused.
        return EventType.TRANSITION_REJECTED, "actor_not_authorized"
    missing = [k for k in REQUIRED_REFS.get(type, ()) if not (refs or {}).get(k)]
    if missing:
        return EventType.TRANSITION_REJECTED, "evidence_required"
    for key, amount in (delta or {}).items():
        if key == Budget.ELAPSED_MS:
            continue
        if run.counters.get(key, 0) + amount > run.limits.get(key, 0):
            return EventType.TRANSITION_REJECTED, f"{key}_budget_exceeded"
    return None


def history_refusal(
    run: RunSnapshot, type: EventType, *, event_bytes: int, limits: HistoryLimits
) -> str | None:
    """Refuse growth past the hard history limit: the run fails with this precise reason."""
    if run.terminal or type is EventType.RUN_FAILED:
        return None
    if run.revision + 2 > limits.max_events:
        return "history_event_limit_exceeded"
    if event_bytes + EVENT_BYTES_RESERVE > limits.max_bytes:
        return "history_size_limit_exceeded"
    return None


def history_large(
    after: RunSnapshot, *, bytes_before: int, bytes_after: int, limits: HistoryLimits
) -> bool:
    """Whether the event that brought the run to ``after`` (its history growing from
    ``bytes_before`` to ``bytes_after``) made the history reach the size an operator should
    hear about: true once, for the event that crosses a warning line, never again after."""
    return after.revision == limits.warn_events or (bytes_before <= limits.warn_bytes < bytes_after)


def control_fits(
    run: RunSnapshot, type: EventType, *, event_bytes: int, limits: HistoryLimits
) -> bool:
    """Whether a control event recording a refusal still fits the history."""
    return (
        history_refusal(run, type, event_bytes=event_bytes, limits=limits) is None
        and run.revision + 1 <= limits.max_events
    )
