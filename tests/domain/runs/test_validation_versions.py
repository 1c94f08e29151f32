"""Issue 16 in the pure core: exposure enforced (not_exposed), the tenant gate, and the one
repeated-denial rule (owner denials escalate; correctable denials do not)."""

from __future__ import annotations

import dataclasses

from runs.domain.budgets import Budget
from runs.domain.proposals import ObserveIntent
from runs.domain.validation import (
    OWNER_DENIALS,
    REPEATED_DENIAL_LIMIT,
    PriorOutcome,
    ValidationOutcome,
    request_digest,
    validate,
)
from tests.domain.runs.test_validation import READ, RESERVE, RULES, ctx


def _denied(c, proposal, reason):
    return PriorOutcome(proposal.capability, request_digest(c, proposal), "", denied_reason=reason)


def test_a_capability_the_context_did_not_show_is_denied_not_exposed_as_a_correction():
    c = ctx(visible=frozenset({"read_equipment", "search_manual"}))
    d = validate(c, READ)
    assert (d.outcome, d.step, d.reason) == (ValidationOutcome.DENY, 3, "not_exposed")
    assert d.charge is Budget.CORRECTIONS
    assert validate(ctx(visible=frozenset({"check_inventory"})), READ).reason == "read_admitted"
    assert validate(ctx(visible=None), READ).reason == "read_admitted"  # nothing recorded


def test_a_retired_pin_gets_its_precise_reason_not_not_exposed():
    retired = dataclasses.replace(RULES["check_inventory"], lifecycle="RETIRED")
    c = ctx(visible=frozenset(), rules={**RULES, "check_inventory": retired})
    d = validate(c, READ)
    assert (d.step, d.reason) == (8, "capability_retired")


def test_the_tenant_gate_stops_only_effects():
    closed = dataclasses.replace(RULES["reserve_part"], tenant_gate_open=False)
    c = ctx(rules={**RULES, "reserve_part": closed})
    assert validate(c, RESERVE).reason == "tenant_effect_gate_closed"
    assert validate(c, READ).reason == "read_admitted"


def test_an_unchanged_owner_denial_repeated_escalates_repeated_denial():
    closed = dataclasses.replace(RULES["reserve_part"], effect_gate_open=False)
    c = ctx(rules={**RULES, "reserve_part": closed})
    first = validate(c, RESERVE)
    assert (first.outcome, first.reason) == (ValidationOutcome.DENY, "effect_gate_closed")
    prior = [_denied(c, RESERVE, "effect_gate_closed")] * (REPEATED_DENIAL_LIMIT - 1)
    again = validate(dataclasses.replace(c, history=prior), RESERVE)
    assert (again.outcome, again.reason) == (ValidationOutcome.ESCALATE, "repeated_denial")
    # A changed request (another canonical proposal) is a new request, not a repetition.
    fresh = validate(dataclasses.replace(c, history=prior, canonical_hash="h2"), RESERVE)
    assert fresh.reason == "effect_gate_closed"


def test_correctable_denials_are_not_owner_denials():
    assert "not_exposed" not in OWNER_DENIALS and "unknown_capability" not in OWNER_DENIALS
    lookup = ObserveIntent("lookup_stock", {"part_id": "A17"})
    c = ctx()
    prior = [_denied(c, lookup, "unknown_capability")] * 5
    d = validate(dataclasses.replace(c, history=prior), lookup)
    assert (d.outcome, d.reason) == (ValidationOutcome.DENY, "unknown_capability")
