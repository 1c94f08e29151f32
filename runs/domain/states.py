"""Run states, event types and actors: the vocabulary of SPEC §1.

Pure module: standard library only.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    CREATED = "CREATED"
    OBSERVING = "OBSERVING"
    DECIDING = "DECIDING"
    VALIDATING = "VALIDATING"
    EXECUTING = "EXECUTING"
    VERIFYING = "VERIFYING"
    WAITING_HUMAN = "WAITING_HUMAN"
    WAITING_EXTERNAL = "WAITING_EXTERNAL"
    RECOVERING = "RECOVERING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    ESCALATED = "ESCALATED"


TERMINAL_STATES: frozenset[State] = frozenset(
    {State.COMPLETED, State.FAILED, State.CANCELLED, State.ESCALATED}
)
WAITING_STATES: frozenset[State] = frozenset({State.WAITING_HUMAN, State.WAITING_EXTERNAL})
NON_TERMINAL_STATES: tuple[State, ...] = tuple(s for s in State if s not in TERMINAL_STATES)


def is_terminal(state: State | str) -> bool:
    if type(state) is State:  # the common case, without the enum constructor
        return state in TERMINAL_STATES
    return State(state) in TERMINAL_STATES


def is_waiting(state: State | str) -> bool:
    return State(state) in WAITING_STATES


class EventType(StrEnum):
    # Transition events (each is an edge of the transition table).
    RUN_STARTED = "run.started"
    OBSERVATION_RECORDED = "observation.recorded"
    PROPOSAL_EMITTED = "proposal.emitted"
    PROPOSAL_ALLOWED = "proposal.allowed"
    PROPOSAL_DENIED = "proposal.denied"
    APPROVAL_REQUIRED = "approval.required"
    CLARIFICATION_REQUIRED = "clarification.required"
    WAIT_ADMITTED = "wait.admitted"
    COMPLETION_REQUESTED = "completion.requested"
    ESCALATION_ADMITTED = "escalation.admitted"
    APPROVAL_GRANTED = "approval.granted"
    APPROVAL_DECLINED = "approval.declined"
    CLARIFICATION_ANSWERED = "clarification.answered"
    APPROVAL_EXPIRED = "approval.expired"
    EXTERNAL_OBSERVED = "external.observed"
    EXTERNAL_EXPIRED = "external.expired"
    OBSERVATION_RECEIVED = "observation.received"
    EFFECT_RECORDED = "effect.recorded"
    EFFECT_REJECTED = "effect.rejected"
    EFFECT_AMBIGUOUS = "effect.ambiguous"
    RECONCILIATION_MATCHED = "reconciliation.matched"
    RECONCILIATION_ABSENT = "reconciliation.absent"
    RECONCILIATION_CONFLICT = "reconciliation.conflict"
    RECONCILIATION_UNRESOLVED = "reconciliation.unresolved"
    COMPLETION_VERIFIED = "completion.verified"
    COMPLETION_REJECTED = "completion.rejected"
    VERIFICATION_MISMATCH = "verification.mismatch"
    RUN_CANCELLED = "run.cancelled"
    RUN_FAILED = "run.failed"

    # Control events: always appended, never change state.
    TRANSITION_REJECTED = "transition.rejected"
    PROPOSAL_REJECTED_AFTER_CANCEL = "proposal.rejected_after_cancel"
    STALE_OWNER_REJECTED = "stale_owner.rejected"
    LATE_APPROVAL_REJECTED = "late_approval.rejected"
    # A decision attempt refused while the checkpoint was live (changed hash, too large...).
    DECISION_REFUSED = "decision.refused"
    # One approval of a quorum that needs more: counted, the run keeps waiting.
    APPROVAL_COUNTED = "approval.counted"
    CALLBACK_ORPHANED = "callback.orphaned"
    DUPLICATE_DEDUPLICATED = "duplicate.deduplicated"
    BUDGET_CHANGED = "budget.changed"
    # Beyond the SPEC's list, kept in the same family (state never changes):
    # a recovery attempt took ownership after a lease expired (attempt +1), and an
    # operator recorded the ledger outcome of an effect obligation after the run ended.
    RUN_RECOVERED = "run.recovered"
    EFFECT_RECONCILED = "effect.reconciled"


CONTROL_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.TRANSITION_REJECTED,
        EventType.PROPOSAL_REJECTED_AFTER_CANCEL,
        EventType.STALE_OWNER_REJECTED,
        EventType.LATE_APPROVAL_REJECTED,
        EventType.DECISION_REFUSED,
        EventType.APPROVAL_COUNTED,
        EventType.CALLBACK_ORPHANED,
        EventType.DUPLICATE_DEDUPLICATED,
        EventType.BUDGET_CHANGED,
        EventType.RUN_RECOVERED,
        EventType.EFFECT_RECONCILED,
    }
)

# Control events that record something refused (rendered as "rejected" in timelines).
REJECTION_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.TRANSITION_REJECTED,
        EventType.PROPOSAL_REJECTED_AFTER_CANCEL,
        EventType.STALE_OWNER_REJECTED,
        EventType.LATE_APPROVAL_REJECTED,
        EventType.DECISION_REFUSED,
        EventType.CALLBACK_ORPHANED,
    }
)

# Control events that may be appended after the run is terminal: the record of a late
# arrival must survive even though it cannot move the run.
POST_TERMINAL_CONTROL_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.TRANSITION_REJECTED,
        EventType.PROPOSAL_REJECTED_AFTER_CANCEL,
        EventType.STALE_OWNER_REJECTED,
        EventType.LATE_APPROVAL_REJECTED,
        EventType.DECISION_REFUSED,
        EventType.CALLBACK_ORPHANED,
        EventType.DUPLICATE_DEDUPLICATED,
        EventType.EFFECT_RECONCILED,
    }
)


def is_control(event_type: EventType | str) -> bool:
    return EventType(event_type) in CONTROL_EVENTS


class Actor(StrEnum):
    MODEL = "model"
    HARNESS = "harness"
    HUMAN_PRINCIPAL = "human-principal"
    OPERATOR = "operator"
    CAPABILITY_ADAPTER = "capability-adapter"
    RESOURCE_SERVICE = "resource-service"
    CLOCK = "clock"


class Disposition(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    ESCALATED = "ESCALATED"


# The version of the state machine and event schema this code writes. Replay reads each
# event under its own version through replay.COMPATIBILITY.
STATE_MACHINE_VERSION = 1
