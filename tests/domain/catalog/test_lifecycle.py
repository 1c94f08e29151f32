"""Lifecycle steps, admission records and hint conflicts (pure)."""

from __future__ import annotations

import pytest

from catalog.domain.lifecycle import (
    LIFECYCLE_STEPS,
    Action,
    Refusal,
    State,
    actions_from,
    admission_record,
    hint_conflicts,
    hint_warnings,
    next_state,
)


@pytest.mark.parametrize(
    ("state", "action", "target"),
    [(s.value, a.value, t.value) for (s, a), t in LIFECYCLE_STEPS.items()],
)
def test_every_declared_step(state, action, target):
    assert next_state(state, action) == target


def test_every_absent_step_is_refused():
    for state in State:
        for action in Action:
            if (state, action) in LIFECYCLE_STEPS:
                continue
            with pytest.raises(Refusal) as info:
                next_state(state, action)
            expected = (
                "lifecycle_final"
                if state in (State.REJECTED, State.RETIRED)
                else "illegal_lifecycle_step"
            )
            assert info.value.code == expected


def test_a_refused_step_reads_as_a_sentence_whatever_the_state():
    with pytest.raises(Refusal) as info:
        next_state("ADMITTED", "admit")
    assert info.value.message == "cannot admit a version that is ADMITTED"


def test_unknown_actions_are_refused():
    with pytest.raises(Refusal) as info:
        next_state("ADMITTED", "resurrect")
    assert info.value.code == "unknown_action"


def test_actions_offered_per_state():
    assert actions_from("DISCOVERED") == ["admit", "reject", "defer"]
    assert actions_from("ADMITTED") == ["deprecate", "retire"]
    assert actions_from("RETIRED") == []
    assert actions_from("REJECTED") == []


CONTRACT = {
    "intent": "Read one record.",
    "non_intents": ["mutation"],
    "effect_class": "read_only_observation",
    "operational_effects": ["access_audit"],
}


def answers(**kw):
    base = {
        "contract": CONTRACT,
        "local_ref": "x@1#abc",
        "reviewer": "user:r",
        "task_transition": "NEED_X -> HAVE_X",
        "alternatives": ["human lookup"],
        "decision": "ADMIT_BOUNDED",
        "expiry": "on contract change",
    }
    base.update(kw)
    return base


def test_the_admission_record_takes_semantics_from_the_local_contract():
    record = admission_record(**answers()).as_dict()
    assert record["effect_class"] == "read_only_observation"
    assert record["intent"] == "Read one record."
    assert record["non_intents"] == ["mutation"]
    assert record["operational_effects"] == ["access_audit"]
    assert record["task_transition"] == "NEED_X -> HAVE_X"


@pytest.mark.parametrize(
    "bad",
    [
        {"task_transition": "anything"},
        {"task_transition": ""},
        {"alternatives": ["", "  "]},
        {"decision": "YOLO"},
        {"expiry": "soon"},
    ],
)
def test_an_incomplete_admission_record_is_refused(bad):
    with pytest.raises(Refusal) as info:
        admission_record(**answers(**bad))
    assert info.value.code == "admission_incomplete"


def test_read_only_hint_contradicting_an_effect_is_a_conflict():
    assert hint_conflicts({"readOnlyHint": True}, "consequential_external_mutation")
    assert hint_conflicts({"readOnlyHint": True}, "local_transformation")
    assert not hint_conflicts({"readOnlyHint": True}, "read_only_observation")
    assert not hint_conflicts({"readOnlyHint": False}, "consequential_external_mutation")
    assert not hint_conflicts({}, "consequential_external_mutation")


def test_other_hint_disagreements_are_warnings_only():
    warnings = hint_warnings(
        {"readOnlyHint": False, "openWorldHint": True}, "read_only_observation", False
    )
    assert len(warnings) == 2
    assert hint_warnings({"destructiveHint": False}, "consequential_external_mutation", False)
    # destructiveHint: true alone says "not read-only" too (readOnlyHint defaults to false).
    assert hint_warnings({"destructiveHint": True}, "read_only_observation", False)
    assert hint_warnings({"destructiveHint": True}, "local_transformation", False)
    assert not hint_warnings({"destructiveHint": True}, "consequential_external_mutation", False)
