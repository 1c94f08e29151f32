"""Approval writes: open checkpoints, decide them exactly, answer clarifications, expire.

A decision binds the approver and the proposal hash they saw. Refusals (hash mismatch,
expired, used, run ended, self-approval, missing role) are recorded with a clear reason;
late ones also append ``late_approval.rejected`` to the run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from access.roles import APPROVER, has_role, principal_ref_of
from approvals import domain
from approvals.models import Checkpoint, Decision, DecisionRefusal
from capabilities import evidence as ev
from capabilities.reserve_part import CONTRACT as RESERVE_CONTRACT
from fieldops import telemetry
from kernel import clock, retry
from runs import authority, evidence
from runs.domain.states import Actor, EventType, State
from runs.models import Run

LOST_RESPONSE_NOTE = str(RESERVE_CONTRACT.reconciliation["approver_copy"])
IDEMPOTENCY_NOTE = (
    "Safe to retry only under the same effect identity: the adapter derives "
    "one idempotency key from tenant, principal, task, run, proposal hash, "
    "part, slot and quantity; the ledger returns the original effect for it."
)
COMPENSATION_NOTE = str(RESERVE_CONTRACT.compensation["note"])


def _expiry(proposal: Mapping[str, Any]) -> dt.datetime:
    ttl = clock.now() + dt.timedelta(seconds=settings.FIELDOPS_APPROVAL_TTL_SECONDS)
    expires = proposal.get("expires_at")
    return min(ttl, clock.parse(expires)) if expires else ttl


def checkpoint_open_approval(
    *,
    run: Run,
    checkpoint_id: str,
    opened_sequence: int,
    proposal: Mapping[str, Any],
    proposal_hash: str,
    observations: Mapping[str, Mapping[str, Any]],
) -> Checkpoint:
    """Create the approval checkpoint (called inside the approval.required transaction)."""
    now = clock.now()
    evidence_view = []
    for ref in proposal.get("evidence_refs", []):
        obs = observations.get(ref, {})
        evidence_view.append(
            {
                "ref": ref,
                "capability": obs.get("capability", "?"),
                "observed_at": ev.observed_at(obs).isoformat() if ev.observed_at(obs) else None,
                "freshness_limit_s": ev.INVENTORY_MAX_AGE_S
                if obs.get("capability") == "check_inventory"
                else None,
            }
        )
    previous = (
        Checkpoint.objects.filter(
            run=run, kind=Checkpoint.Kind.APPROVAL, status=Checkpoint.Status.DECLINED
        )
        .select_related("decision")
        .order_by("-created_at")
        .first()
    )
    prior_change = (
        dict(previous.decision.requested_change)
        if previous and hasattr(previous, "decision")
        else {}
    )
    return Checkpoint.objects.create(
        id=checkpoint_id,
        run=run,
        tenant=run.tenant,
        kind=Checkpoint.Kind.APPROVAL,
        requested_by_ref=run.principal_ref,
        required_role=APPROVER,
        opened_sequence=opened_sequence,
        proposal_hash=proposal_hash,
        canonical=dict(proposal),
        effect_summary=_summary(proposal),
        evidence_view=evidence_view,
        idempotency_note=IDEMPOTENCY_NOTE,
        lost_response_note=LOST_RESPONSE_NOTE,
        compensation_note=COMPENSATION_NOTE,
        data_crossing=[
            "tenant",
            "principal reference",
            "task and run ids",
            "proposal hash",
            "part, slot, quantity",
            "idempotency key (derived)",
        ],
        prior_requested_change=prior_change,
        expires_at=_expiry(proposal),
        created_at=now,
    )


def _summary(proposal: Mapping[str, Any]) -> str:
    return (
        f"Reserve {proposal.get('quantity')} {proposal.get('unit', '')} of "
        f"{proposal.get('part_id')} in slot {proposal.get('slot_id')} at "
        f"{proposal.get('location_id')} for tenant {proposal.get('tenant')}."
    )


def checkpoint_open_clarification(
    *, run: Run, checkpoint_id: str, opened_sequence: int, question: str
) -> Checkpoint:
    now = clock.now()
    return Checkpoint.objects.create(
        id=checkpoint_id,
        run=run,
        tenant=run.tenant,
        kind=Checkpoint.Kind.CLARIFICATION,
        requested_by_ref=run.principal_ref,
        required_role="requester",
        opened_sequence=opened_sequence,
        question=question[:500],
        expires_at=now + dt.timedelta(seconds=settings.FIELDOPS_APPROVAL_TTL_SECONDS),
        created_at=now,
    )


@dataclass(frozen=True)
class DecisionResult:
    recorded: bool
    refusal: str = ""
    message: str = ""
    checkpoint: Checkpoint | None = None

    @classmethod
    def refused(cls, code: str, checkpoint: Checkpoint | None) -> DecisionResult:
        return cls(False, code, domain.REFUSALS.get(code, code), checkpoint)


def _refuse(checkpoint: Checkpoint, user: Any, code: str, seen_hash: str) -> DecisionResult:
    DecisionRefusal.objects.create(
        checkpoint=checkpoint,
        run=checkpoint.run,
        user=user,
        code=code,
        seen_hash=seen_hash[:64],
        created_at=clock.now(),
    )
    if code in ("checkpoint_expired", "run_not_waiting", "already_decided"):
        authority.append_control(
            run_id=str(checkpoint.run_id),
            type=EventType.LATE_APPROVAL_REJECTED,
            actor=Actor.HARNESS,
            reason_code=code,
            refs={"checkpoint": checkpoint.pk},
            payload={"by": principal_ref_of(user), "seen_hash": seen_hash[:64]},
        )
    return DecisionResult.refused(code, checkpoint)


@telemetry.traced_decision("approve")
def approval_decide(
    *,
    checkpoint_id: str,
    user: Any,
    approve: bool,
    seen_hash: str,
    reason: str,
    requested_change: Mapping[str, Any] | None = None,
) -> DecisionResult:
    """Approve or decline an approval checkpoint exactly as seen; refuse otherwise.

    The caller has already checked the checkpoint's tenant (objects of other tenants are
    404 in views). ``requested_change`` (decline only) names proposal fields to change; it
    becomes a new proposal that needs its own approval, never a silent edit.
    """
    seen_hash = (seen_hash or "").strip()
    reason = (reason or "").strip()
    change = {k: v for k, v in (requested_change or {}).items() if v not in (None, "")}

    def attempt() -> DecisionResult | None:
        checkpoint = Checkpoint.objects.select_related("run").get(pk=checkpoint_id)
        if checkpoint.kind != Checkpoint.Kind.APPROVAL:
            return DecisionResult.refused("not_an_approval", checkpoint)
        run = checkpoint.run
        refusal = domain.decision_refusal(
            seen_hash=seen_hash,
            checkpoint_hash=checkpoint.proposal_hash,
            checkpoint_status=checkpoint.status,
            expired=checkpoint.expires_at <= clock.now(),
            run_waiting_here=run.state == State.WAITING_HUMAN.value
            and run.waiting_checkpoint == checkpoint.pk,
            approver_ref=principal_ref_of(user),
            requester_ref=run.principal_ref,
            approver_has_role=has_role(user, APPROVER),
            reason=reason,
        )
        if refusal is None and change and not approve:
            refusal = domain.requested_change_problems(change)
        if refusal is not None:
            return _refuse(checkpoint, user, refusal, seen_hash)
        verdict = Decision.Verdict.APPROVE if approve else Decision.Verdict.DECLINE

        def within(
            run_row: Run, event: Any, checkpoint: Checkpoint = checkpoint, verdict: str = verdict
        ) -> None:
            Decision.objects.create(
                checkpoint=checkpoint,
                verdict=verdict,
                decided_by=user,
                decided_by_ref=principal_ref_of(user),
                seen_hash=seen_hash,
                reason=reason[:1000],
                requested_change=change if not approve else {},
                created_at=clock.now(),
            )
            Checkpoint.objects.filter(pk=checkpoint.pk).update(
                status=Checkpoint.Status.APPROVED if approve else Checkpoint.Status.DECLINED,
                closed_at=clock.now(),
            )

        result = authority.append(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.APPROVAL_GRANTED if approve else EventType.APPROVAL_DECLINED,
            actor=Actor.HUMAN_PRINCIPAL,
            reason_code="approved" if approve else "declined",
            refs={"checkpoint": checkpoint.pk, "approval": checkpoint.pk},
            payload={
                "by": principal_ref_of(user),
                "proposal_hash": seen_hash,
                "reason": reason[:300],
                "requested_change": change if not approve else {},
            },
            within=within,
            advance_after=True,
        )
        if result.applied:
            checkpoint.refresh_from_db()
            return DecisionResult(True, checkpoint=checkpoint)
        if result.busy:
            return DecisionResult.refused("busy", checkpoint)
        if not result.conflict:
            return DecisionResult.refused("run_not_waiting", checkpoint)
        return None

    outcome = retry.until_settled(attempt, what=f"decide checkpoint {checkpoint_id}")
    if isinstance(outcome, DecisionResult):
        return outcome
    return DecisionResult.refused("busy", None)


@telemetry.traced_decision("answer")
def clarification_answer(*, checkpoint_id: str, user: Any, answer: str) -> DecisionResult:
    """Record the requester's trusted answer; the run returns to OBSERVING."""
    answer = (answer or "").strip()

    def attempt() -> DecisionResult | None:
        checkpoint = Checkpoint.objects.select_related("run").get(pk=checkpoint_id)
        run = checkpoint.run
        if checkpoint.kind != Checkpoint.Kind.CLARIFICATION:
            return DecisionResult.refused("not_an_approval", checkpoint)
        if principal_ref_of(user) != run.principal_ref:
            return DecisionResult(
                False,
                "not_requester",
                "Only the person who requested the run can answer it.",
                checkpoint,
            )
        if not answer:
            return DecisionResult(False, "answer_required", "An answer is required.", checkpoint)
        if (
            checkpoint.status != Checkpoint.Status.PENDING
            or run.waiting_checkpoint != (checkpoint.pk)
            or checkpoint.expires_at <= clock.now()
        ):
            return _refuse(checkpoint, user, "run_not_waiting", "")
        answer_id = evidence.store(
            run_id=str(run.pk),
            kind="answer",
            content={
                "capability": "answer",
                "ok": True,
                "error": "",
                "data": {"question": checkpoint.question, "answer": answer[:1000]},
                "observed_at": clock.iso(clock.now()),
            },
        )

        def within(run_row: Run, event: Any, checkpoint: Checkpoint = checkpoint) -> None:
            Decision.objects.create(
                checkpoint=checkpoint,
                verdict=Decision.Verdict.ANSWER,
                decided_by=user,
                decided_by_ref=principal_ref_of(user),
                reason="answered",
                answer=answer[:1000],
                created_at=clock.now(),
            )
            Checkpoint.objects.filter(pk=checkpoint.pk).update(
                status=Checkpoint.Status.ANSWERED, closed_at=clock.now()
            )

        result = authority.append(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.CLARIFICATION_ANSWERED,
            actor=Actor.HUMAN_PRINCIPAL,
            reason_code="answered",
            refs={"checkpoint": checkpoint.pk, "observation": answer_id},
            within=within,
            advance_after=True,
        )
        if result.applied:
            return DecisionResult(True, checkpoint=checkpoint)
        if result.busy:
            return DecisionResult.refused("busy", checkpoint)
        if not result.conflict:
            return DecisionResult.refused("run_not_waiting", checkpoint)
        return None

    outcome = retry.until_settled(attempt, what=f"answer checkpoint {checkpoint_id}")
    if isinstance(outcome, DecisionResult):
        return outcome
    return DecisionResult.refused("busy", None)


@telemetry.traced_decision("expire")
@transaction.atomic
def checkpoint_expire(*, checkpoint_id: str) -> bool:
    """Expire a checkpoint whose lease passed: approval.expired moves the run to ESCALATED."""
    checkpoint = Checkpoint.objects.select_related("run").get(pk=checkpoint_id)
    run = checkpoint.run
    if checkpoint.status != Checkpoint.Status.PENDING or checkpoint.expires_at > clock.now():
        return False
    if run.state != State.WAITING_HUMAN.value or run.waiting_checkpoint != checkpoint.pk:
        Checkpoint.objects.filter(pk=checkpoint.pk).update(
            status=Checkpoint.Status.EXPIRED, closed_at=clock.now()
        )
        return False
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.APPROVAL_EXPIRED,
        actor=Actor.CLOCK,
        reason_code="checkpoint_expired",
        refs={"checkpoint": checkpoint.pk},
        payload={"expired_at": clock.iso(checkpoint.expires_at), "owner": "approver"},
    )
    return result.applied


def checkpoints_close(run: Run, event: Any) -> list[dict[str, str]]:
    """Close the run's pending checkpoints with its terminal event (same transaction): an
    expiry expires them, anything else cancels them. Return them as unresolved items."""
    pending = list(
        Checkpoint.objects.filter(run=run, status=Checkpoint.Status.PENDING).values_list(
            "id", flat=True
        )
    )
    Checkpoint.objects.filter(pk__in=pending).update(
        status=Checkpoint.Status.EXPIRED
        if event.type is EventType.APPROVAL_EXPIRED
        else Checkpoint.Status.CANCELLED,
        closed_at=clock.now(),
    )
    return [{"checkpoint": c} for c in pending]


def approval_consume(*, run: Run, proposal_hash: str, attempt_id: str) -> str:
    """Consume the approval of ``proposal_hash`` for the dispatch ``attempt_id``; return the
    checkpoint's id. Call inside the transaction that records the dispatch (proposal.allowed).

    A live approval is used exactly once (SPEC §4): its decision is marked consumed by the
    attempt and the checkpoint becomes USED. A checkpoint already USED (a same-key
    redispatch after a proven absence) is returned as it is. Raise ApprovalNotConsumable
    when no checkpoint binds the hash or the approval was consumed meanwhile.
    """
    checkpoint = (
        Checkpoint.objects.select_for_update()
        .filter(run=run, kind=Checkpoint.Kind.APPROVAL, proposal_hash=proposal_hash)
        .order_by("-created_at")
        .first()
    )
    if checkpoint is None:
        raise ApprovalNotConsumable("effect admitted without a checkpoint for its hash")
    if checkpoint.status == Checkpoint.Status.APPROVED:
        consumed = Decision.objects.filter(
            checkpoint=checkpoint, verdict=Decision.Verdict.APPROVE, consumed_at__isnull=True
        ).update(consumed_at=clock.now(), consumed_by_attempt=attempt_id)
        if consumed != 1:
            raise ApprovalNotConsumable("the approval was already consumed")
        Checkpoint.objects.filter(pk=checkpoint.pk).update(status=Checkpoint.Status.USED)
    return str(checkpoint.pk)


class ApprovalNotConsumable(RuntimeError):
    """The dispatch record cannot consume an approval: an integrity failure, never routine."""
