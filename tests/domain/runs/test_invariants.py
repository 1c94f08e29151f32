"""The eight named invariants reject exactly what they name."""

from __future__ import annotations

import dataclasses

import pytest

from runs.domain.events import RunSnapshot, build_event
from runs.domain.invariants import INVARIANTS, InvariantViolation, assert_invariants, violations
from runs.domain.states import EventType, State

from .factory import CONFIG, HAPPY, chain


def _names(run, event):
    return {v.invariant for v in violations(run, event)}


def test_the_eight_invariants_exist_by_name():
    assert [name for name, _ in INVARIANTS] == [
        "run.identity.stable",
        "event.sequence.next",
        "state.transition.declared",
        "terminal.unique",
        "budget.counter.monotonic",
        "contract.version.fixed",
        "proposal.not_authority",
        "effect.evidence.required",
    ]


def test_a_valid_happy_path_violates_nothing():
    snap = RunSnapshot.initial(CONFIG)
    _, events = chain(HAPPY)
    for event in events:
        assert violations(snap, event) == []
        from runs.domain.events import apply

        snap = apply(snap, event)
    assert snap.state is State.COMPLETED and snap.disposition == "COMPLETED"


def _first():
    snap = RunSnapshot.initial(CONFIG)
    _, events = chain([EventType.RUN_STARTED])
    return snap, events[0]


def test_identity_must_be_stable():
    snap, event = _first()
    assert "run.identity.stable" in _names(snap, dataclasses.replace(event, run_id="other"))


def test_sequence_must_be_next():
    snap, event = _first()
    assert "event.sequence.next" in _names(snap, dataclasses.replace(event, sequence=2))


def test_transition_must_be_declared():
    snap, event = _first()
    bad = dataclasses.replace(event, type=EventType.COMPLETION_VERIFIED, next_state=State.COMPLETED)
    assert "state.transition.declared" in _names(snap, bad)
    wrong_target = dataclasses.replace(event, next_state=State.DECIDING)
    assert "state.transition.declared" in _names(snap, wrong_target)


def test_control_events_never_change_state():
    snap, event = _first()
    bad = dataclasses.replace(event, type=EventType.TRANSITION_REJECTED, next_state=State.OBSERVING)
    assert "state.transition.declared" in _names(snap, bad)


def test_terminal_is_unique():
    snap, _ = chain(HAPPY)
    again = build_event(
        snap,
        event_id="x",
        type=EventType.RUN_FAILED,
        actor="harness",
        next_state=State.FAILED,
        occurred_at="t",
    )
    assert "terminal.unique" in _names(snap, again)
    late = build_event(
        snap,
        event_id="y",
        type=EventType.TRANSITION_REJECTED,
        actor="harness",
        next_state=State.COMPLETED,
        occurred_at="t",
    )
    assert _names(snap, late) == set()


def test_counters_never_decrease():
    snap, _ = chain(HAPPY[:3])
    event = build_event(
        snap,
        event_id="x",
        type=EventType.PROPOSAL_ALLOWED,
        actor="harness",
        next_state=State.EXECUTING,
        occurred_at="t",
    )
    lowered = dataclasses.replace(event, budget={**event.budget, "turns": 0})
    assert "budget.counter.monotonic" in _names(snap, lowered)


def test_versions_are_fixed():
    snap, event = _first()
    drifted = dataclasses.replace(event, policy_version="fieldops-policy@2.0.0")
    assert "contract.version.fixed" in _names(snap, drifted)


def test_model_output_never_authorizes():
    snap, _ = chain(HAPPY[:8])  # WAITING_HUMAN
    by_model = build_event(
        snap,
        event_id="x",
        type=EventType.APPROVAL_GRANTED,
        actor="model",
        next_state=State.VALIDATING,
        occurred_at="t",
        refs={"approval": "cp-1"},
    )
    assert "proposal.not_authority" in _names(snap, by_model)
    unbound = build_event(
        snap,
        event_id="y",
        type=EventType.APPROVAL_GRANTED,
        actor="human-principal",
        next_state=State.VALIDATING,
        occurred_at="t",
    )
    assert "proposal.not_authority" in _names(snap, unbound)


def test_effect_progress_needs_ledger_evidence():
    snap, _ = chain(HAPPY[:10])  # EXECUTING
    bare = build_event(
        snap,
        event_id="x",
        type=EventType.EFFECT_RECORDED,
        actor="capability-adapter",
        next_state=State.VERIFYING,
        occurred_at="t",
    )
    assert "effect.evidence.required" in _names(snap, bare)


def test_assert_invariants_raises_with_every_violation():
    snap, event = _first()
    bad = dataclasses.replace(event, run_id="other", sequence=9)
    with pytest.raises(InvariantViolation) as info:
        assert_invariants(snap, bad)
    assert {v.invariant for v in info.value.violations} >= {
        "run.identity.stable",
        "event.sequence.next",
    }
