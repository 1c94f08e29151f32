"""The transition table as data: complete, closed, rendered from itself."""

from __future__ import annotations

import itertools

import pytest

from runs.domain import render
from runs.domain.states import (
    CONTROL_EVENTS,
    NON_TERMINAL_STATES,
    TERMINAL_STATES,
    EventType,
    State,
    is_terminal,
)
from runs.domain.transitions import (
    EVENT_DESCRIPTIONS,
    STATE_INFO,
    TRANSITION_LIST,
    TRANSITIONS,
    edge,
    events_from,
    next_state,
)


def test_there_are_thirteen_states_four_terminal():
    assert len(State) == 13
    assert {State.COMPLETED, State.FAILED, State.CANCELLED, State.ESCALATED} == TERMINAL_STATES


def test_every_spec_edge_is_declared():
    spec = {
        ("CREATED", "run.started", "OBSERVING"),
        ("OBSERVING", "observation.recorded", "DECIDING"),
        ("DECIDING", "proposal.emitted", "VALIDATING"),
        ("VALIDATING", "proposal.allowed", "EXECUTING"),
        ("VALIDATING", "proposal.denied", "DECIDING"),
        ("VALIDATING", "approval.required", "WAITING_HUMAN"),
        ("VALIDATING", "clarification.required", "WAITING_HUMAN"),
        ("VALIDATING", "wait.admitted", "WAITING_EXTERNAL"),
        ("VALIDATING", "completion.requested", "VERIFYING"),
        ("VALIDATING", "escalation.admitted", "ESCALATED"),
        ("WAITING_HUMAN", "approval.granted", "VALIDATING"),
        ("WAITING_HUMAN", "approval.declined", "DECIDING"),
        ("WAITING_HUMAN", "clarification.answered", "OBSERVING"),
        ("WAITING_HUMAN", "approval.expired", "ESCALATED"),
        ("WAITING_EXTERNAL", "external.observed", "OBSERVING"),
        ("WAITING_EXTERNAL", "external.expired", "ESCALATED"),
        ("EXECUTING", "observation.received", "OBSERVING"),
        ("EXECUTING", "effect.recorded", "VERIFYING"),
        ("EXECUTING", "effect.rejected", "OBSERVING"),
        ("EXECUTING", "effect.ambiguous", "RECOVERING"),
        ("RECOVERING", "reconciliation.matched", "VERIFYING"),
        ("RECOVERING", "reconciliation.absent", "VALIDATING"),
        ("RECOVERING", "reconciliation.conflict", "ESCALATED"),
        ("RECOVERING", "reconciliation.unresolved", "ESCALATED"),
        ("VERIFYING", "completion.verified", "COMPLETED"),
        ("VERIFYING", "completion.rejected", "OBSERVING"),
        ("VERIFYING", "verification.mismatch", "ESCALATED"),
    }
    for state in NON_TERMINAL_STATES:
        spec.add((state.value, "run.cancelled", "CANCELLED"))
        spec.add((state.value, "run.failed", "FAILED"))
    declared = {(t.source.value, t.event.value, t.target.value) for t in TRANSITION_LIST}
    assert declared == spec


def test_every_absent_pair_is_denied():
    declared = set(TRANSITIONS)
    for state, event in itertools.product(State, EventType):
        if (state, event) in declared:
            assert next_state(state, event) is not None
        else:
            assert next_state(state, event) is None, (state, event)


def test_terminal_states_have_no_outgoing_edges():
    for state in TERMINAL_STATES:
        assert events_from(state) == ()
        assert is_terminal(state)


def test_control_events_are_not_edges():
    for event in CONTROL_EVENTS:
        assert all(edge(s, event) is None for s in State)


def test_unknown_names_are_denied_not_errors():
    assert edge("NOPE", "run.started") is None
    assert edge("CREATED", "made.up") is None


def test_only_the_model_may_emit_proposals_and_nothing_else():
    for t in TRANSITION_LIST:
        if t.event is EventType.PROPOSAL_EMITTED:
            assert {a.value for a in t.actors} == {"model"}
        else:
            assert "model" not in {a.value for a in t.actors}


@pytest.mark.parametrize("event", list(EventType))
def test_every_event_is_described(event):
    assert EVENT_DESCRIPTIONS[event]


def test_every_state_has_an_owner_and_purpose():
    assert set(STATE_INFO) == set(State)


def test_markdown_table_is_rendered_from_the_data():
    table = render.markdown_table()
    for t in TRANSITION_LIST:
        if t.event not in (EventType.RUN_CANCELLED, EventType.RUN_FAILED):
            assert f"| {t.source} | `{t.event}` | {t.guard} | {t.target} |" in table
    assert "| any non-terminal | `run.cancelled` |" in table


def test_state_diagram_highlights_the_current_state():
    svg = render.state_diagram_svg("WAITING_HUMAN")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "state-current' data-state='WAITING_HUMAN'" in svg
    assert svg.count("state-current") == 1
    # every drawn edge is a real edge
    for t in TRANSITION_LIST:
        if t.event not in (EventType.RUN_CANCELLED, EventType.RUN_FAILED):
            assert f"{t.source} --{t.event}--&gt; {t.target}" in svg
