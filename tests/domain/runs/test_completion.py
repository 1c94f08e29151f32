"""Completion predicates: pass / fail / insufficient, and only a full pass completes."""

from __future__ import annotations

import dataclasses

from kernel.canonical import digest
from runs.domain.completion import CompletionInputs, LedgerFact, Result, Verdict, verify

from .test_validation import NOW, OBS, PARTS, PROPOSAL

CANON = {**PROPOSAL, "proposed_at": NOW.isoformat(), "canonicalization": "c@1"}
HASH = digest(CANON)
ENTRY = LedgerFact(
    effect_id="EF-1",
    idempotency_key="k1",
    intent_matches=True,
    part_id="A17",
    slot_id="S-1",
    quantity=1,
    tenant="north",
    status="RESERVED",
    committed_at=NOW.isoformat(),
)


def inputs(**kw) -> CompletionInputs:
    base = dict(
        tenant="north",
        observations=OBS,
        canonical_proposal=CANON,
        canonical_hash=HASH,
        approval_status="USED",
        expected_key="k1",
        ledger=[ENTRY],
        recorded_effect_id="EF-1",
        unresolved_attempts=0,
        parts=PARTS,
    )
    base.update(kw)
    return CompletionInputs(**base)


def results(assessment):
    return {p.id: p.result for p in assessment.predicates}


def test_full_pass_completes_and_renders_the_artifact_from_verified_state():
    a = verify(inputs())
    assert a.verdict is Verdict.VERIFIED
    assert set(results(a).values()) == {Result.PASS}
    assert a.artifact["effect_id"] == "EF-1" and a.artifact["proposal_hash"] == HASH


def test_early_success_is_insufficient_not_success():
    a = verify(
        inputs(
            canonical_proposal=None,
            canonical_hash="",
            approval_status=None,
            ledger=[],
            recorded_effect_id="",
        )
    )
    assert a.verdict is Verdict.REJECTED
    assert Result.INSUFFICIENT in results(a).values()
    assert a.artifact is None
    assert any("no canonical proposal" in r for r in a.reasons)


def test_unconsumed_approval_is_insufficient():
    a = verify(inputs(approval_status="APPROVED"))
    assert results(a)["approval.exact_consumed"] is Result.INSUFFICIENT
    assert a.verdict is Verdict.REJECTED


def test_two_effects_are_a_mismatch():
    second = dataclasses.replace(ENTRY, effect_id="EF-2", idempotency_key="k2")
    a = verify(inputs(ledger=[ENTRY, second]))
    assert results(a)["ledger.exactly_one_effect"] is Result.FAIL
    assert a.verdict is Verdict.MISMATCH


def test_authoritative_state_contradicting_the_record_is_a_mismatch():
    a = verify(inputs(ledger=[dataclasses.replace(ENTRY, quantity=2)]))
    assert results(a)["state.matches"] is Result.FAIL and a.verdict is Verdict.MISMATCH
    a = verify(inputs(recorded_effect_id="EF-9"))
    assert a.verdict is Verdict.MISMATCH


def test_same_key_different_intent_fails():
    a = verify(inputs(ledger=[dataclasses.replace(ENTRY, intent_matches=False)]))
    assert results(a)["ledger.exactly_one_effect"] is Result.FAIL


def test_unresolved_attempts_block_completion():
    a = verify(inputs(unresolved_attempts=1))
    assert results(a)["effects.none_unresolved"] is Result.FAIL
    assert a.verdict is Verdict.REJECTED


def test_a_tampered_proposal_fails_its_hash():
    a = verify(inputs(canonical_proposal={**CANON, "quantity": 2}))
    assert results(a)["proposal.canonical"] is Result.FAIL


def test_every_predicate_carries_id_and_version():
    for p in verify(inputs()).predicates:
        assert p.id and p.version == 1
