"""The nine steps, in their fixed order, each with its denial reason."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from runs.domain.budgets import DEFAULT_LIMITS, Budget, Budgets
from runs.domain.proposals import (
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    EscalateIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    WaitIntent,
)
from runs.domain.states import State
from runs.domain.validation import (
    OUTCOME_EVENT,
    ApprovalView,
    CapabilityRule,
    PriorOutcome,
    ValidationContext,
    ValidationOutcome,
    args_digest,
    validate,
)

NOW = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
PARTS = {"A17": {"unit": "each", "families": ["pump-fixture"], "revisions": ["r7"]}}


def rule(cid: str, kind: str = "observe", **kw) -> CapabilityRule:
    base = dict(
        id=cid,
        kind=kind,
        requires_approval=False,
        model_fields=frozenset(),
        trusted_fields=frozenset({"tenant", "run_id"}),
        retry_budgets={},
        pinned="1.0.0#a",
        current="1.0.0#a",
        lifecycle="ADMITTED",
    )
    base.update(kw)
    return CapabilityRule(**base)


RULES = {
    "check_inventory": rule(
        "check_inventory", retry_budgets={"STALE": 1, "DENIED": 0}, location_bound=True
    ),
    "propose_reservation": rule("propose_reservation", "action"),
    "reserve_part": rule("reserve_part", "action", requires_approval=True),
    "ask_user": rule("ask_user", "control"),
    "wait_for_event": rule("wait_for_event", "control"),
    "no_applicable_tool": rule("no_applicable_tool", "control"),
}

OBS = {
    "ev-eq": {
        "capability": "read_equipment",
        "ok": True,
        "data": {"family": "pump-fixture", "revision": "r7", "observed_at": NOW.isoformat()},
    },
    "ev-man": {
        "capability": "search_manual",
        "ok": True,
        "data": {
            "passages": [{"trust_state": "approved", "text": "use part A17"}],
            "retrieved_at": NOW.isoformat(),
        },
    },
    "ev-inv": {
        "capability": "check_inventory",
        "ok": True,
        "data": {
            "part_id": "A17",
            "location_id": "LOC-N1",
            "slots": [{"slot_id": "S-1", "available": 3}],
            "observed_at": NOW.isoformat(),
        },
    },
}
PROPOSAL = {
    "part_id": "A17",
    "slot_id": "S-1",
    "quantity": 1,
    "tenant": "north",
    "location_id": "LOC-N1",
    "evidence_refs": ["ev-eq", "ev-inv", "ev-man"],
    "expires_at": (NOW + dt.timedelta(minutes=30)).isoformat(),
}


def ctx(**kw) -> ValidationContext:
    base = dict(
        state=State.VALIDATING,
        terminal=False,
        cancelled=False,
        budgets=Budgets(limits=DEFAULT_LIMITS),
        contract_actions=frozenset(RULES),
        rejected={"run_sql": "master key"},
        rules=RULES,
        schema_errors=lambda cap, args: (
            ["part_id: required"] if cap == "check_inventory" and "part_id" not in args else []
        ),
        tenant="north",
        scope=frozenset({"LOC-N1", "effect:reserve_part"}),
        observations=OBS,
        now=NOW,
        parts=PARTS,
        canonical_proposal=PROPOSAL,
        canonical_hash="h1",
    )
    base.update(kw)
    return ValidationContext(**base)


READ = ObserveIntent("check_inventory", {"part_id": "A17", "location_id": "LOC-N1"})
RESERVE = ActionIntent("reserve_part", {"part_id": "A17", "slot_id": "S-1", "quantity": 1})


def test_step1_cancelled_or_terminal_run_denies_first():
    d = validate(ctx(cancelled=True), InvalidProposal("x"))
    assert (d.step, d.reason) == (1, "run_cancelled")
    assert validate(ctx(terminal=True), READ).reason == "run_terminal"


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        (InvalidProposal("mixed_output"), "invalid_proposal:mixed_output"),
        (ObserveIntent("Bad Name!", {}), "invalid_capability_name"),
        (ObserveIntent("check_inventory", {"location_id": "LOC-N1"}), "schema_invalid"),
        (
            ObserveIntent(
                "check_inventory", {"part_id": "A17", "location_id": "LOC-N1", "tenant": "north"}
            ),
            "trusted_field_supplied",
        ),
        (
            ActionIntent("check_inventory", {"part_id": "A17", "location_id": "LOC-N1"}),
            "proposal_kind_mismatch",
        ),
        (ClarifyIntent(""), "schema_invalid"),
        (WaitIntent("why", "Not An Event"), "schema_invalid"),
        (FinalCandidate({}), "schema_invalid"),
        (EscalateIntent(" "), "schema_invalid"),
    ],
)
def test_step2_malformed_proposals_are_corrections(proposal, reason):
    d = validate(ctx(), proposal)
    assert (d.outcome, d.step, d.reason, d.charge) == (
        ValidationOutcome.DENY,
        2,
        reason,
        Budget.CORRECTIONS,
    )


def test_step2_a_trusted_field_is_denied_even_when_the_value_matches():
    d = validate(
        ctx(),
        ObserveIntent(
            "check_inventory", {"part_id": "A17", "location_id": "LOC-N1", "tenant": "north"}
        ),
    )
    assert d.reason == "trusted_field_supplied" and "tenant" in d.detail


def test_step3_unknown_and_rejected_capabilities_charge_actions():
    d = validate(ctx(), ActionIntent("lookup_stock", {}))
    assert (d.step, d.reason, d.charge) == (3, "unknown_capability", Budget.ACTIONS)
    d = validate(ctx(), ActionIntent("run_sql", {"sql": "drop"}))
    assert (d.step, d.reason) == (3, "capability_rejected") and "master key" in d.detail


def test_step3_control_outcome_must_be_enumerated():
    d = validate(ctx(contract_actions=frozenset({"check_inventory"})), ClarifyIntent("q?"))
    assert (d.step, d.reason) == (3, "control_not_enumerated")


def test_step4_only_from_validating():
    d = validate(ctx(state=State.WAITING_HUMAN), READ)
    assert (d.step, d.reason) == (4, "illegal_transition")


def test_step5_propose_needs_complete_fresh_evidence():
    propose = ActionIntent(
        "propose_reservation",
        {"part_id": "A17", "slot_id": "S-1", "quantity": 1, "evidence_refs": ["ev-inv"]},
    )
    d = validate(ctx(), propose)
    assert (d.step, d.reason) == (5, "evidence_missing") and "compatibility" in d.detail
    full = dataclasses.replace(
        propose, args={**propose.args, "evidence_refs": ["ev-eq", "ev-man", "ev-inv"]}
    )
    assert validate(ctx(), full).outcome is ValidationOutcome.EXECUTE
    later = NOW + dt.timedelta(minutes=6)
    assert validate(ctx(now=later), full).reason == "evidence_stale"


def test_step5_reserve_must_match_the_canonical_proposal():
    assert validate(ctx(canonical_proposal=None), RESERVE).reason == "no_canonical_proposal"
    other_slot = ActionIntent("reserve_part", {"part_id": "A17", "slot_id": "S-2", "quantity": 1})
    assert validate(ctx(), other_slot).reason == "proposal_mismatch"
    as_text = ActionIntent("reserve_part", {"part_id": "a17", "slot_id": "s-1", "quantity": "1"})
    assert validate(ctx(), as_text).outcome is ValidationOutcome.APPROVAL  # "1" and 1 are the same


def test_step5_stale_inventory_at_dispatch_is_denied():
    d = validate(ctx(now=NOW + dt.timedelta(minutes=10)), RESERVE)
    assert (d.step, d.reason) == (5, "evidence_stale")


def test_step5_expired_proposal_is_denied():
    expired = {**PROPOSAL, "expires_at": (NOW - dt.timedelta(seconds=1)).isoformat()}
    assert validate(ctx(canonical_proposal=expired), RESERVE).reason == "proposal_expired"


def test_step6_no_action_budget_fails_the_run():
    used = Budgets(limits=DEFAULT_LIMITS).charged({"actions": DEFAULT_LIMITS["actions"]})
    d = validate(ctx(budgets=used), READ)
    assert (d.outcome, d.step, d.reason) == (ValidationOutcome.FAIL, 6, "action_budget_exhausted")


def test_step6_second_effect_is_denied():
    used = Budgets(limits=DEFAULT_LIMITS).charged({"effects": 1})
    d = validate(ctx(budgets=used), RESERVE)
    assert (d.step, d.reason) == (6, "effect_budget_exhausted")


def test_step6_exhausted_retry_budget_escalates():
    history = [
        PriorOutcome("check_inventory", args_digest("check_inventory", READ.args), "STALE")
    ] * 2
    d = validate(ctx(history=history), READ)
    assert (d.outcome, d.step, d.reason) == (
        ValidationOutcome.ESCALATE,
        6,
        "retry_budget_exhausted",
    )
    assert validate(ctx(history=history[:1]), READ).outcome is ValidationOutcome.EXECUTE


def test_step7_scope_denied_then_repeated_denial_escalates():
    far = ObserveIntent("check_inventory", {"part_id": "A17", "location_id": "LOC-N2"})
    d = validate(ctx(), far)
    assert (d.step, d.reason) == (7, "scope_denied")
    history = [
        PriorOutcome(
            "check_inventory",
            args_digest("check_inventory", far.args),
            "",
            denied_reason="scope_denied",
        )
    ]
    d = validate(ctx(history=history), far)
    assert (d.outcome, d.reason) == (ValidationOutcome.ESCALATE, "repeated_denial")


def test_step7_effect_needs_delegation():
    d = validate(ctx(scope=frozenset({"LOC-N1"})), RESERVE)
    assert (d.step, d.reason) == (7, "authority_missing")


@pytest.mark.parametrize(
    ("change", "outcome", "reason"),
    [
        ({"pinned": "1.0.0#old"}, ValidationOutcome.FAIL, "component_version_drift"),
        ({"lifecycle": "RETIRED"}, ValidationOutcome.DENY, "capability_retired"),
        ({"lifecycle": "DISCOVERED"}, ValidationOutcome.DENY, "capability_not_admitted"),
        ({"effect_gate_open": False}, ValidationOutcome.DENY, "effect_gate_closed"),
    ],
)
def test_step8_version_must_be_admitted_and_undrifted(change, outcome, reason):
    rules = {**RULES, "reserve_part": dataclasses.replace(RULES["reserve_part"], **change)}
    d = validate(ctx(rules=rules), RESERVE)
    assert (d.outcome, d.step, d.reason) == (outcome, 8, reason)


def test_step8_closed_gate_does_not_stop_reads():
    rules = {
        **RULES,
        "check_inventory": dataclasses.replace(RULES["check_inventory"], effect_gate_open=False),
    }
    assert validate(ctx(rules=rules), READ).outcome is ValidationOutcome.EXECUTE


def _approval(status, **kw):
    return ApprovalView(
        proposal_hash="h1", status=status, expires_at=NOW + dt.timedelta(minutes=10), **kw
    )


@pytest.mark.parametrize(
    ("approval", "outcome", "reason"),
    [
        (None, ValidationOutcome.APPROVAL, "approval_required"),
        (_approval("PENDING"), ValidationOutcome.DENY, "approval_pending"),
        (_approval("DECLINED"), ValidationOutcome.DENY, "proposal_declined"),
        (_approval("APPROVED"), ValidationOutcome.EXECUTE, "effect_admitted_with_live_approval"),
        (_approval("USED"), ValidationOutcome.DENY, "approval_used"),
        (
            _approval("USED", consumed_without_effect=True),
            ValidationOutcome.EXECUTE,
            "same_key_redispatch_after_proven_absence",
        ),
        (
            dataclasses.replace(_approval("APPROVED"), expires_at=NOW),
            ValidationOutcome.DENY,
            "approval_expired",
        ),
        (
            dataclasses.replace(_approval("APPROVED"), proposal_hash="other"),
            ValidationOutcome.APPROVAL,
            "approval_required",
        ),
    ],
)
def test_step9_effect_decision_follows_the_exact_approval(approval, outcome, reason):
    d = validate(ctx(approval=approval), RESERVE)
    assert (d.outcome, d.step, d.reason) == (outcome, 9, reason)


@pytest.mark.parametrize(
    ("proposal", "outcome", "reason"),
    [
        (READ, ValidationOutcome.EXECUTE, "read_admitted"),
        (ClarifyIntent("Which depot?"), ValidationOutcome.CLARIFY, "clarification_admitted"),
        (WaitIntent("delivery", "depot.confirmed"), ValidationOutcome.WAIT, "wait_admitted"),
        (FinalCandidate({"text": "done"}), ValidationOutcome.VERIFY, "final_candidate_admitted"),
        (EscalateIntent("help"), ValidationOutcome.ESCALATE, "model_requested_escalation"),
        (AbstainIntent("nothing fits"), ValidationOutcome.ESCALATE, "no_applicable_tool"),
    ],
)
def test_step9_decides_what_an_admitted_proposal_becomes(proposal, outcome, reason):
    d = validate(ctx(), proposal)
    assert (d.outcome, d.reason) == (outcome, reason)
    assert OUTCOME_EVENT[d.outcome]


def test_cheap_checks_come_first():
    # A cancelled run denies at step 1 even when the proposal is also malformed and
    # the budgets are gone.
    used = Budgets(limits=DEFAULT_LIMITS).charged({"actions": DEFAULT_LIMITS["actions"]})
    d = validate(ctx(cancelled=True, budgets=used), InvalidProposal("junk"))
    assert d.step == 1
    # Schema (2) before unknown capability (3) before budgets (6).
    d = validate(ctx(budgets=used), ObserveIntent("check_inventory", {}))
    assert d.step == 2


def test_a_fresh_proposal_is_a_new_request_not_a_retry_of_a_refused_effect():
    rules = {
        **RULES,
        "reserve_part": dataclasses.replace(RULES["reserve_part"], retry_budgets={"CONFLICT": 0}),
    }
    from runs.domain.validation import request_digest

    refused = PriorOutcome(
        "reserve_part", request_digest(ctx(rules=rules, canonical_hash="h0"), RESERVE), "CONFLICT"
    )
    approved = _approval("APPROVED")
    # The same canonical proposal again: no retries left for CONFLICT.
    same = ctx(
        rules=rules,
        canonical_hash="h0",
        history=[refused],
        approval=dataclasses.replace(approved, proposal_hash="h0"),
    )
    assert validate(same, RESERVE).reason == "retry_budget_exhausted"
    # A new proposal (new evidence, new hash) with the same part/slot/quantity is new.
    fresh = ctx(rules=rules, history=[refused], approval=approved)
    assert validate(fresh, RESERVE).outcome is ValidationOutcome.EXECUTE
