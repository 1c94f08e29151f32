"""The effect attempt lifecycle as data: its table, its named sets, its outcome rules."""

from __future__ import annotations

import pytest

from runs.domain import effects
from runs.domain.effects import AttemptStatus as S
from runs.domain.effects import Found
from runs.domain.states import EventType


def test_every_unresolved_status_has_an_owner_and_every_other_is_final_or_settled():
    for status in S:
        if status in effects.UNRESOLVED:
            assert (status in effects.SWEEPER_PICKUP) != (status in effects.OPERATOR_OWNED)
        else:
            assert effects.MOVES[status] == frozenset(), f"{status} is settled: final"


def test_no_effect_and_effect_statuses_are_disjoint_and_settled():
    assert not effects.NO_EFFECT & effects.UNRESOLVED
    assert S.CONFIRMED not in effects.NO_EFFECT | effects.UNRESOLVED
    assert effects.MAYBE_SENT <= effects.UNRESOLVED


def test_a_settled_attempt_never_moves_again():
    with pytest.raises(effects.IllegalMove):
        effects.check_move(S.CONFIRMED, S.ABSENT)
    with pytest.raises(effects.IllegalMove):
        effects.check_move(S.ABSENT, S.SENDING)
    effects.check_move(S.SENDING, S.CONFIRMED)


def test_every_reconcilable_status_can_reach_every_reconciliation_outcome():
    for source in effects.RECONCILABLE:
        for found in Found:
            resolution = effects.resolve_reconciliation(found)
            if resolution is not None and resolution.status is not source:
                assert effects.can_move(source, resolution.status), (source, found)


def test_sources_of_a_target_are_the_statuses_that_may_move_there():
    assert effects.sources_of(S.SENDING) == {S.DISPATCH_RECORDED}
    assert S.AMBIGUOUS in effects.sources_of(S.CONFIRMED)


@pytest.mark.parametrize(
    ("ok", "stage", "error", "declared", "status", "event"),
    [
        (True, "definite", "", None, S.CONFIRMED, EventType.EFFECT_RECORDED),
        (False, "pre_dispatch", "STALE", "proposal.denied", S.NOT_SENT, EventType.EFFECT_REJECTED),
        (False, "definite", "DENIED", "effect.rejected", S.REJECTED, EventType.EFFECT_REJECTED),
        # A definite answer the contract does not declare as a rejection is not believed.
        (
            False,
            "definite",
            "CONFLICT",
            "effect.ambiguous",
            S.AMBIGUOUS,
            EventType.EFFECT_AMBIGUOUS,
        ),
        (False, "definite", "WHATEVER", None, S.AMBIGUOUS, EventType.EFFECT_AMBIGUOUS),
        # After a possible dispatch even a declared rejection is ambiguous when the stage is.
        (False, "ambiguous", "DENIED", "effect.rejected", S.AMBIGUOUS, EventType.EFFECT_AMBIGUOUS),
    ],
)
def test_what_a_dispatch_answer_means(ok, stage, error, declared, status, event):
    resolution = effects.resolve_dispatch(ok=ok, stage=stage, error=error, declared=declared)
    assert (resolution.status, resolution.event) == (status, event)
    assert resolution.effect is (status is S.CONFIRMED)


def test_a_busy_ledger_resolves_nothing():
    assert effects.resolve_reconciliation(Found.BUSY) is None
    matched = effects.resolve_reconciliation(Found.MATCHED)
    assert matched is not None and matched.effect and matched.status is S.CONFIRMED


def test_only_matching_events_record_an_effect():
    assert effects.records_effect(EventType.EFFECT_RECORDED)
    assert effects.records_effect(EventType.RECONCILIATION_MATCHED)
    assert effects.records_effect(EventType.EFFECT_RECONCILED, "matched")
    assert not effects.records_effect(EventType.EFFECT_RECONCILED, "absent")
    assert not effects.records_effect(EventType.EFFECT_AMBIGUOUS)


def test_cancellation_is_qualified_from_records():
    q = effects.cancel_qualification
    assert q(effects_counted=1, recovering=False, statuses=[]) == "cancelled_after_effect"
    assert q(effects_counted=0, recovering=False, statuses=[S.SENDING]) == (
        "cancelled_effect_unknown"
    )
    assert q(effects_counted=0, recovering=True, statuses=[]) == "cancelled_effect_unknown"
    assert q(effects_counted=0, recovering=False, statuses=[S.DISPATCH_RECORDED]) == (
        "cancelled_no_dispatch"
    )


def test_a_follow_up_never_reserves_again():
    account = effects.EffectAccount
    assert effects.follow_up(completed=False, account=account(0, 0, 0)) == ("start_follow_up_run",)
    assert effects.follow_up(completed=False, account=account(0, 0, 1)) == ("reconcile_effect",)
    assert effects.follow_up(completed=False, account=account(0, 1, 0)) == ()
    assert effects.follow_up(completed=True, account=account(1, 0, 0)) == ()
    # A follow-up still running or one that reserved: another would reserve again.
    assert effects.follow_up(completed=False, account=account(0, 0, 0), follow_up_taken=True) == ()


def test_a_reviewed_conflict_is_no_longer_reconciled_nor_followed_up():
    """A conflict (same key, different intent) is final: reconciling cannot move it. Once
    an operator reviewed it, nothing of the run is left to reconcile; a follow-up run is
    still not offered (the ledger holds the key: an effect may exist, SPEC §1 MAYBE_SENT)."""
    account = effects.EffectAccount
    assert effects.AttemptStatus.CONFLICT in effects.MAYBE_SENT
    # Not reviewed yet: it is reviewed, not reconciled.
    conflict = account(0, 0, 1, conflicts=1)
    assert effects.follow_up(completed=False, account=conflict) == ("review_conflict",)
    reviewed = account(0, 0, 1, conflicts=1, reviewed_conflicts=1)
    assert effects.follow_up(completed=False, account=reviewed) == ()
    # Another attempt still unknown beside it: that one is reconciled first.
    both = account(0, 0, 2, conflicts=1, reviewed_conflicts=1)
    assert effects.follow_up(completed=False, account=both) == ("reconcile_effect",)
