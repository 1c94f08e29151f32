"""The transition table of SPEC §1 as data.

Every (state, event) pair that is not listed is denied: there is no default transition.
The table renders itself (see ``render.py``) so the docs and the console always show
this data, never a copy of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .states import NON_TERMINAL_STATES, Actor, EventType, State


@dataclass(frozen=True)
class Transition:
    source: State
    event: EventType
    guard: str
    target: State
    # Who may cause this edge. The model never appears here: a model only proposes
    # (proposal.emitted is recorded by the harness on the adapter's behalf).
    actors: frozenset[Actor]


_H = frozenset({Actor.HARNESS})
_HUMAN = frozenset({Actor.HUMAN_PRINCIPAL})
_CLOCK = frozenset({Actor.CLOCK})
_ADAPTER = frozenset({Actor.CAPABILITY_ADAPTER, Actor.RESOURCE_SERVICE})

_EDGES: tuple[Transition, ...] = (
    Transition(
        State.CREATED,
        EventType.RUN_STARTED,
        "contract, versions, budgets valid",
        State.OBSERVING,
        _H,
    ),
    Transition(
        State.OBSERVING,
        EventType.OBSERVATION_RECORDED,
        "provenance, schema, scope, freshness valid",
        State.DECIDING,
        _H,
    ),
    Transition(
        State.DECIDING,
        EventType.PROPOSAL_EMITTED,
        "adapter produced one local proposal",
        State.VALIDATING,
        frozenset({Actor.MODEL}),
    ),
    Transition(
        State.VALIDATING,
        EventType.PROPOSAL_ALLOWED,
        "all validation steps pass (read/propose) or effect revalidated with live approval",
        State.EXECUTING,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.PROPOSAL_DENIED,
        "a validation step failed; correction budget remains",
        State.DECIDING,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.APPROVAL_REQUIRED,
        "effect proposal, exact canonical proposal formed",
        State.WAITING_HUMAN,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.CLARIFICATION_REQUIRED,
        "ask_user admitted",
        State.WAITING_HUMAN,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.WAIT_ADMITTED,
        "wait_for_event admitted, correlation record created",
        State.WAITING_EXTERNAL,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.COMPLETION_REQUESTED,
        "final candidate well-formed",
        State.VERIFYING,
        _H,
    ),
    Transition(
        State.VALIDATING,
        EventType.ESCALATION_ADMITTED,
        "escalation proposal, or policy says escalate",
        State.ESCALATED,
        _H,
    ),
    Transition(
        State.WAITING_HUMAN,
        EventType.APPROVAL_GRANTED,
        "live, exact, unused approval for this proposal hash",
        State.VALIDATING,
        _HUMAN,
    ),
    Transition(
        State.WAITING_HUMAN,
        EventType.APPROVAL_DECLINED,
        "reviewer declined",
        State.DECIDING,
        _HUMAN,
    ),
    Transition(
        State.WAITING_HUMAN,
        EventType.CLARIFICATION_ANSWERED,
        "trusted answer recorded",
        State.OBSERVING,
        _HUMAN,
    ),
    Transition(
        State.WAITING_HUMAN,
        EventType.APPROVAL_EXPIRED,
        "checkpoint lease passed",
        State.ESCALATED,
        _CLOCK,
    ),
    Transition(
        State.WAITING_EXTERNAL,
        EventType.EXTERNAL_OBSERVED,
        "correlated callback for current attempt/epoch",
        State.OBSERVING,
        frozenset({Actor.RESOURCE_SERVICE}),
    ),
    Transition(
        State.WAITING_EXTERNAL,
        EventType.EXTERNAL_EXPIRED,
        "wait deadline passed",
        State.ESCALATED,
        _CLOCK,
    ),
    Transition(
        State.EXECUTING,
        EventType.OBSERVATION_RECEIVED,
        "typed read result passed output validation",
        State.OBSERVING,
        _ADAPTER,
    ),
    Transition(
        State.EXECUTING,
        EventType.EFFECT_RECORDED,
        "committed effect record with effect id, key, commit time",
        State.VERIFYING,
        _ADAPTER,
    ),
    Transition(
        State.EXECUTING,
        EventType.EFFECT_REJECTED,
        "typed rejection before or by the service (no effect)",
        State.OBSERVING,
        _ADAPTER,
    ),
    Transition(
        State.EXECUTING,
        EventType.EFFECT_AMBIGUOUS,
        "dispatch may have happened, outcome unknown",
        State.RECOVERING,
        _ADAPTER,
    ),
    Transition(
        State.RECOVERING,
        EventType.RECONCILIATION_MATCHED,
        "ledger has the matching effect for the key",
        State.VERIFYING,
        _H,
    ),
    Transition(
        State.RECOVERING,
        EventType.RECONCILIATION_ABSENT,
        "ledger proves absence (full revalidation follows; same key)",
        State.VALIDATING,
        _H,
    ),
    Transition(
        State.RECOVERING,
        EventType.RECONCILIATION_CONFLICT,
        "same key, different intent",
        State.ESCALATED,
        _H,
    ),
    Transition(
        State.RECOVERING,
        EventType.RECONCILIATION_UNRESOLVED,
        "ledger unavailable / outcome still unknown",
        State.ESCALATED,
        _H,
    ),
    Transition(
        State.VERIFYING,
        EventType.COMPLETION_VERIFIED,
        "every completion predicate passes on authoritative state",
        State.COMPLETED,
        _H,
    ),
    Transition(
        State.VERIFYING,
        EventType.COMPLETION_REJECTED,
        "predicate failed or insufficient; budget remains",
        State.OBSERVING,
        _H,
    ),
    Transition(
        State.VERIFYING,
        EventType.VERIFICATION_MISMATCH,
        "authoritative state contradicts the effect record",
        State.ESCALATED,
        _H,
    ),
)

_GLOBAL: tuple[Transition, ...] = tuple(
    Transition(
        source,
        EventType.RUN_CANCELLED,
        "valid cancellation (operator/principal); qualified",
        State.CANCELLED,
        frozenset({Actor.OPERATOR, Actor.HUMAN_PRINCIPAL}),
    )
    for source in NON_TERMINAL_STATES
) + tuple(
    Transition(
        source,
        EventType.RUN_FAILED,
        "budget exhausted, deadline, contract/integrity failure",
        State.FAILED,
        frozenset({Actor.HARNESS, Actor.CLOCK}),
    )
    for source in NON_TERMINAL_STATES
)

TRANSITION_LIST: tuple[Transition, ...] = _EDGES + _GLOBAL

TRANSITIONS: Mapping[tuple[State, EventType], Transition] = {
    (t.source, t.event): t for t in TRANSITION_LIST
}
assert len(TRANSITIONS) == len(TRANSITION_LIST), "duplicate edge in the transition table"

# The events that may move a run between states (everything else is a control event).
TRANSITION_EVENTS: frozenset[EventType] = frozenset(t.event for t in TRANSITION_LIST)


def edge(state: State | str, event: EventType | str) -> Transition | None:
    """Return the declared edge for (state, event), or None: absent rows are denied."""
    # States and event types are string enums: plain strings find the same keys, and any
    # other value finds none.
    return TRANSITIONS.get((state, event))  # type: ignore[arg-type]


def next_state(state: State | str, event: EventType | str) -> State | None:
    t = edge(state, event)
    return t.target if t else None


def events_from(state: State | str) -> tuple[Transition, ...]:
    s = State(state)
    return tuple(t for t in TRANSITION_LIST if t.source is s)


@dataclass(frozen=True)
class StateInfo:
    purpose: str
    owner: str
    timeout: str
    cancellation: str


STATE_INFO: Mapping[State, StateInfo] = {
    State.CREATED: StateInfo(
        "identity and immutable configuration exist; execution has not begun",
        "harness",
        "run deadline",
        "CANCELLED (cancelled_no_dispatch)",
    ),
    State.OBSERVING: StateInfo(
        "admit one trusted, structured observation into the run",
        "harness",
        "run deadline",
        "CANCELLED (no dispatch pending)",
    ),
    State.DECIDING: StateInfo(
        "the only state in which a policy (model or double) is asked for a proposal",
        "harness + policy adapter",
        "turn budget, run deadline",
        "checked before model dispatch and after the response",
    ),
    State.VALIDATING: StateInfo(
        "apply the fixed nine-step validation to the current proposal",
        "harness",
        "run deadline",
        "step 1 of validation; proposal recorded as rejected after cancel",
    ),
    State.EXECUTING: StateInfo(
        "invoke one admitted capability; never holds a database transaction across it",
        "capability adapter",
        "capability timeout stages",
        "checked immediately before effect dispatch; in-flight effects classified",
    ),
    State.VERIFYING: StateInfo(
        "evaluate completion predicates against authoritative records",
        "harness (verifier)",
        "run deadline",
        "CANCELLED keeps any committed effect (cancelled_after_effect)",
    ),
    State.WAITING_HUMAN: StateInfo(
        "a checkpoint waits for an exact human decision (approval or clarification)",
        "approver / principal",
        "checkpoint expiry -> approval.expired -> ESCALATED",
        "the checkpoint is closed; a late decision is recorded as rejected",
    ),
    State.WAITING_EXTERNAL: StateInfo(
        "a correlation record waits for one expected external callback",
        "external system",
        "wait deadline -> external.expired -> ESCALATED",
        "later callbacks are recorded and cannot reopen the run",
    ),
    State.RECOVERING: StateInfo(
        "reconcile an ambiguous effect by querying the ledger with the same key",
        "harness + reconciliation read",
        "run deadline",
        "CANCELLED (cancelled_effect_unknown); the reconciliation obligation is kept",
    ),
    State.COMPLETED: StateInfo(
        "terminal: every completion predicate passed", "nobody (terminal)", "-", "-"
    ),
    State.FAILED: StateInfo(
        "terminal: budget, deadline, contract or integrity failure", "operator", "-", "-"
    ),
    State.CANCELLED: StateInfo(
        "terminal: a valid cancellation won; in-flight effects qualified", "operator", "-", "-"
    ),
    State.ESCALATED: StateInfo(
        "terminal: a named external decision or evidence is required", "operator", "-", "-"
    ),
}


EVENT_DESCRIPTIONS: Mapping[EventType, str] = {
    EventType.RUN_STARTED: "The harness validated contract, versions and budgets; work begins.",
    EventType.OBSERVATION_RECORDED: "One observation was admitted into the run's context.",
    EventType.PROPOSAL_EMITTED: "An adapter produced one local proposal from policy output "
    "(not yet allowed).",
    EventType.PROPOSAL_ALLOWED: "Validation admitted the proposal; for the effect, the "
    "dispatch record is written and the approval consumed in the same transaction.",
    EventType.PROPOSAL_DENIED: "A validation step failed; the reason code names it.",
    EventType.APPROVAL_REQUIRED: "An effect proposal needs an exact human approval; a "
    "checkpoint holds the canonical proposal.",
    EventType.CLARIFICATION_REQUIRED: "ask_user was admitted; a checkpoint holds the question.",
    EventType.WAIT_ADMITTED: "wait_for_event was admitted; a correlation record names the "
    "expected callback.",
    EventType.COMPLETION_REQUESTED: "A final candidate was well-formed; verification follows.",
    EventType.ESCALATION_ADMITTED: "The run needs a named external decision (policy or proposal).",
    EventType.APPROVAL_GRANTED: "An approver approved the exact proposal hash they saw.",
    EventType.APPROVAL_DECLINED: "An approver declined (optionally with a requested change).",
    EventType.CLARIFICATION_ANSWERED: "The requester answered the question (trusted input).",
    EventType.APPROVAL_EXPIRED: "The checkpoint lease passed without a decision.",
    EventType.EXTERNAL_OBSERVED: "A correlated callback for the current attempt and epoch arrived.",
    EventType.EXTERNAL_EXPIRED: "The external wait's deadline passed.",
    EventType.OBSERVATION_RECEIVED: "A read capability returned a typed result (data or a "
    "typed error).",
    EventType.EFFECT_RECORDED: "The service returned a committed effect record (effect id, "
    "key, commit time).",
    EventType.EFFECT_REJECTED: "The effect was refused before or by the service: no effect.",
    EventType.EFFECT_AMBIGUOUS: "The request may have been dispatched; the outcome is unknown.",
    EventType.RECONCILIATION_MATCHED: "The ledger holds the matching effect for the key.",
    EventType.RECONCILIATION_ABSENT: "The ledger proves no effect exists for the key.",
    EventType.RECONCILIATION_CONFLICT: "The ledger holds the key with a different intent.",
    EventType.RECONCILIATION_UNRESOLVED: "The ledger could not answer; the outcome stays unknown.",
    EventType.COMPLETION_VERIFIED: "Every completion predicate passed on authoritative state.",
    EventType.COMPLETION_REJECTED: "A predicate failed or was insufficient; budget remains.",
    EventType.VERIFICATION_MISMATCH: "Authoritative state contradicts the effect record.",
    EventType.RUN_CANCELLED: "A valid cancellation won; the reason qualifies in-flight effects.",
    EventType.RUN_FAILED: "Budget, deadline, contract or integrity failure.",
    EventType.TRANSITION_REJECTED: "A requested event had no edge (or came after the end); "
    "recorded, state unchanged.",
    EventType.PROPOSAL_REJECTED_AFTER_CANCEL: "A proposal arrived after cancellation won.",
    EventType.STALE_OWNER_REJECTED: "A write from an old owner epoch (or an old-epoch "
    "callback) was fenced.",
    EventType.LATE_APPROVAL_REJECTED: "A decision arrived after expiry, use or the end of the run.",
    EventType.DECISION_REFUSED: "A decision on a live checkpoint was refused (changed or altered "
    "hash, input too large, a second approval by the same person); recorded, state unchanged.",
    EventType.APPROVAL_COUNTED: "One approval of a quorum that needs more was recorded; the run "
    "keeps waiting.",
    EventType.CALLBACK_ORPHANED: "A callback matched no expected response.",
    EventType.DUPLICATE_DEDUPLICATED: "A delivery seen before was recorded and ignored.",
    EventType.BUDGET_CHANGED: "An operator changed a limit, with a reason.",
    EventType.RUN_RECOVERED: (
        "A new attempt took ownership after a lease expired (or its owner died on its host)."
    ),
    EventType.EFFECT_RECONCILED: "The ledger outcome of an effect obligation, recorded after "
    "the run ended.",
}
