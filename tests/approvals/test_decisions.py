"""Exact approvals: a decision binds the approver and the hash they saw; refusals are
recorded with a clear reason."""

from __future__ import annotations

import pytest

from approvals import services
from approvals.models import Checkpoint, Decision, DecisionRefusal
from kernel import clock
from runs.engine import sweeper
from runs.models import Event
from tests.conftest import make_user
from tests.helpers import approve, decline, make_run, types


@pytest.fixture
def waiting(world):
    return make_run()


def _checkpoint(run):
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)


def test_the_checkpoint_holds_everything_an_approver_must_see(waiting):
    cp = _checkpoint(waiting)
    assert cp.kind == "approval" and cp.status == "PENDING" and cp.required_role == "approver"
    assert cp.canonical["part_id"] == "A17" and cp.canonical["quantity"] == 1
    assert len(cp.proposal_hash) == 64
    assert "ledger can be checked by request identity" in cp.lost_response_note
    assert "No compensation" in cp.compensation_note
    assert cp.effect_summary.startswith("Reserve 1 each of A17")
    inventory = [e for e in cp.evidence_view if e["capability"] == "check_inventory"]
    assert inventory and inventory[0]["observed_at"] and inventory[0]["freshness_limit_s"]
    assert cp.expires_at > clock.now()


def test_a_tampered_hash_is_refused_and_recorded(waiting, approver):
    result = approve(waiting, approver, seen_hash="0" * 64, advance=False)
    assert not result.recorded and result.refusal == "hash_mismatch"
    assert "does not match" in result.message
    assert DecisionRefusal.objects.filter(code="hash_mismatch", user=approver).exists()
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"


def test_self_approval_is_refused(world):
    lead = make_user("lead", "north", "operator", "approver")
    run = make_run(principal="user:lead")
    result = approve(run, lead, advance=False)
    assert result.refusal == "self_approval"
    assert not Decision.objects.exists()


def test_an_approver_role_is_required(waiting, operator):
    result = approve(waiting, operator, advance=False)
    assert result.refusal == "not_an_approver"


def test_a_reason_is_required(waiting, approver):
    result = approve(waiting, approver, reason="  ", advance=False)
    assert result.refusal == "reason_required"


def _decide(cp, user, **kw):
    kw.setdefault("seen_hash", cp.proposal_hash)
    kw.setdefault("reason", "ok")
    return services.approval_decide(checkpoint_id=cp.pk, user=user, approve=True, **kw)


def test_an_expired_checkpoint_escalates_and_a_late_approval_is_recorded(waiting, approver):
    cp = _checkpoint(waiting)
    clock.advance(16 * 60)
    sweeper.sweep()
    waiting.refresh_from_db()
    assert waiting.state == "ESCALATED" and waiting.terminal_reason == "checkpoint_expired"
    result = _decide(cp, approver)
    # Its real cause (issue 19): the checkpoint expired, it was never decided.
    assert result.refusal == "checkpoint_expired"
    assert "expired at" in result.message
    assert "late_approval.rejected" in types(waiting)
    assert _checkpoint_status(waiting) == "EXPIRED"


def _checkpoint_status(run):
    return Checkpoint.objects.get(run=run).status


def test_approval_of_a_cancelled_run_is_late(waiting, approver):
    from runs import services as runs

    cp = _checkpoint(waiting)
    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="no longer needed")
    result = _decide(cp, approver)
    # Its real cause (issue 19): who cancelled the run, and when.
    assert result.refusal == "run_cancelled"
    assert "cancelled by user:operator at" in result.message
    assert "no longer needed" in result.message
    assert not result.recorded
    assert "late_approval.rejected" in types(waiting)


def test_a_decision_is_single_use(waiting, approver):
    cp = _checkpoint(waiting)
    assert approve(waiting, approver).recorded
    again = services.approval_decide(
        checkpoint_id=cp.pk, user=approver, approve=True, seen_hash=cp.proposal_hash, reason="again"
    )
    assert again.refusal == "already_decided"
    decision = Decision.objects.get(checkpoint=cp)
    assert decision.consumed_at is not None and decision.consumed_by_attempt


def test_decline_returns_to_deciding_with_a_structured_change(waiting, approver):
    result = decline(waiting, approver, requested_change={"slot_id": "S-N1-02"})
    assert result.recorded
    kinds = types(waiting)
    i = kinds.index("approval.declined")
    assert Event.objects.get(run=waiting, sequence=i + 1).next_state == "DECIDING"
    # The edited proposal is a new proposal with its own checkpoint and hash.
    checkpoints = list(Checkpoint.objects.filter(run=waiting).order_by("created_at"))
    assert [c.status for c in checkpoints] == ["DECLINED", "PENDING"]
    assert checkpoints[1].proposal_hash != checkpoints[0].proposal_hash
    assert checkpoints[1].canonical["slot_id"] == "S-N1-02"
    assert checkpoints[1].prior_requested_change == {"slot_id": "S-N1-02"}


def test_a_requested_change_must_name_a_proposal_field(waiting, approver):
    result = decline(waiting, approver, requested_change={"price": "0"})
    assert result.refusal == "invalid_requested_change"


def test_a_requested_location_outside_the_runs_scope_is_refused_and_recorded(waiting, approver):
    """An approver asked for a location the run was never delegated: the decline was
    recorded, the run proposed there, validation denied it for scope and the run ended
    ESCALATED repeated_denial. The change is refused instead, naming the locations the run
    may use; nothing is decided and the run still waits for a decision."""
    cp = _checkpoint(waiting)
    assert waiting.scope == ["LOC-N1", "effect:reserve_part"]
    for location in ("LOC-N2", "LOC-S1", "NOWHERE"):  # another van, another tenant, unknown
        result = decline(waiting, approver, requested_change={"location_id": location})
        assert not result.recorded and result.refusal == "location_out_of_scope"
        assert f"{location!r} is not a location this run may use" in result.message
        assert "it may use only LOC-N1" in result.message
    assert not Decision.objects.exists()
    assert (
        list(DecisionRefusal.objects.values_list("code", flat=True))
        == ["location_out_of_scope"] * 3
    )
    assert types(waiting).count("decision.refused") == 3
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"
    assert Checkpoint.objects.get(pk=cp.pk).status == "PENDING"


def test_a_requested_location_inside_the_runs_scope_is_a_recorded_decline(world, approver):
    run = make_run(scope=["LOC-N1", "LOC-N2", "effect:reserve_part"])
    result = decline(run, approver, requested_change={"location_id": "LOC-N2"})
    assert result.recorded
    following = Checkpoint.objects.filter(run=run).order_by("created_at").last()
    assert following.canonical["location_id"] == "LOC-N2"
    assert following.prior_requested_change == {"location_id": "LOC-N2"}


def test_a_plain_decline_hands_the_run_back_to_a_person(world, approver):
    run = make_run()
    cp = _checkpoint(run)
    assert decline(run, approver, reason="not this week").recorded
    # With no change asked for, the double does not send the declined reservation again
    # (validation would deny its hash: tests/domain/runs/test_validation.py): it abstains,
    # and the run ends escalated, saying why, with nothing reserved.
    assert run.state == "ESCALATED"
    assert run.terminal_reason == "no_applicable_tool"
    assert Checkpoint.objects.filter(run=run).count() == 1
    assert Checkpoint.objects.get(pk=cp.pk).status == "DECLINED"
    assert "effect.recorded" not in types(run)
    assert "proposal.denied" not in types(run)


def test_stale_inventory_at_dispatch_denies_without_consuming_the_approval(waiting, approver):
    cp = _checkpoint(waiting)
    clock.advance(10 * 60)
    approve(waiting, approver)
    decision = Decision.objects.get(checkpoint=cp)
    assert decision.consumed_at is None
    assert "evidence_stale" in list(
        Event.objects.filter(run=waiting, type="proposal.denied").values_list(
            "reason_code", flat=True
        )
    )


def test_an_approval_never_consumed_is_closed_with_the_run(waiting, approver):
    """A run that ends between its approval and the dispatch leaves the approval unusable:
    the checkpoint is closed with the run, not left APPROVED, and the terminal record names
    it among what stays unresolved; the decision itself still shows it was never used."""
    from runs import services as runs
    from runs.models import TerminalRecord

    cp = _checkpoint(waiting)
    assert approve(waiting, approver, advance=False).recorded
    assert _checkpoint_status(waiting) == "APPROVED"
    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="gate closed")

    cp.refresh_from_db()
    assert cp.status == "CANCELLED" and cp.closed_at is not None
    decision = Decision.objects.get(checkpoint=cp)
    assert decision.verdict == "APPROVE" and decision.consumed_at is None
    record = TerminalRecord.objects.get(run=waiting)
    assert {"checkpoint": cp.pk} in record.unresolved


def test_only_an_approved_checkpoint_can_be_consumed(waiting, approver):
    """The dispatch record consumes a live approval, or finds its checkpoint USED (a
    same-key redispatch); any other status is an integrity failure, never a dispatch."""
    from django.db import transaction

    cp = _checkpoint(waiting)
    waiting.refresh_from_db()
    for status in ("PENDING", "DECLINED", "CANCELLED", "EXPIRED"):
        Checkpoint.objects.filter(pk=cp.pk).update(status=status)
        with pytest.raises(services.ApprovalNotConsumable, match=status), transaction.atomic():
            services.approval_consume(
                run=waiting, proposal_hash=cp.proposal_hash, attempt_id="att-x"
            )
    Checkpoint.objects.filter(pk=cp.pk).update(status="USED")
    with transaction.atomic():
        assert services.approval_consume(
            run=waiting, proposal_hash=cp.proposal_hash, attempt_id="att-x"
        ) == str(cp.pk)
