"""Approval writes: open checkpoints, decide them exactly, answer clarifications, expire.

A decision binds the approver and the proposal hash they saw. Refusals (hash mismatch,
expired, used, run ended, self-approval, missing role) are recorded with a clear reason;
late ones also append ``late_approval.rejected`` to the run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from access.roles import APPROVER, has_role, principal_ref_of, roles_of
from approvals import domain, notify, rows
from approvals.models import ApprovalVote, Checkpoint, Decision, DecisionRefusal
from capabilities import evidence as ev
from capabilities.reserve_part import CONTRACT as RESERVE_CONTRACT
from fieldops import points, sql, telemetry
from kernel import clock, retry
from kernel.text import bidi_control_refusal, shows_nothing
from runs import authority, evidence
from runs import services as run_services
from runs.domain.states import Actor, EventType, State
from runs.domain.validation import delegated_locations
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


def world_of_namespace(namespace: str) -> str:
    """The world an approval policy names for a run namespace (live, faultlab, simulation)."""
    return "simulation" if namespace.startswith("sim-") else namespace


def eligibility_of(run: Run, proposal: Mapping[str, Any]) -> domain.Eligibility:
    """Who may decide ``proposal`` of ``run``: the tenant's matching approval policy."""
    rules = [p.rule() for p in rows.policies(run.tenant)]
    try:
        quantity = domain.canonical_quantity(proposal.get("quantity", 1))
    except domain.ProposalError:
        quantity = 1
    return domain.eligibility_for(
        rules,
        capability=RESERVE_CONTRACT.id,
        effect_class=RESERVE_CONTRACT.effect_class.value,
        world=world_of_namespace(run.namespace),
        quantity=quantity,
        part_id=str(proposal.get("part_id", "")),
    )


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
    prior_change = rows.prior_requested_change(run)
    eligibility = eligibility_of(run, proposal)
    checkpoint = Checkpoint(
        id=checkpoint_id,
        run=run,
        tenant=run.tenant,
        kind=Checkpoint.Kind.APPROVAL,
        policy_name=eligibility.policy,
        eligible_group=eligibility.group,
        eligible_users=list(eligibility.usernames),
        quorum=eligibility.quorum,
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
    sql.insert(checkpoint)
    notify.checkpoint_notify(checkpoint=checkpoint, event="opened")
    return checkpoint


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
    # True when an approval was counted towards a quorum that still needs more.
    counted: bool = False

    @property
    def refusal_logged(self) -> bool:
        """Whether the refusal is in the refusal log (every one but ``busy``: nothing could
        be written then)."""
        return bool(self.refusal) and self.refusal != "busy"

    @classmethod
    def refused(cls, code: str, checkpoint: Checkpoint | None, message: str = "") -> DecisionResult:
        return cls(False, code, message or domain.REFUSALS.get(code, code), checkpoint)


def refusal_message(code: str, checkpoint: Checkpoint, *, by_ref: str = "") -> str:
    """The refusal's text with its real cause: who cancelled the run and when, when the
    checkpoint expired, how many approvals the quorum counted, who decided it first and
    how (``by_ref``, the person refused, is told when that was themself: another tab)."""
    base = domain.REFUSALS.get(code, code)
    if code in ("already_decided", "quorum_complete"):
        told = _decided_by_message(checkpoint, by_ref=by_ref)
        if told:
            return told
    if code == "run_cancelled":
        cancelled = run_services.cancelled_by(checkpoint.run_id)
        if cancelled:
            return (
                f"The run was cancelled by {cancelled}; nothing will be dispatched and no "
                "decision is recorded."
            )
        run = checkpoint.run
        if run.state != State.CANCELLED.value:
            # The run ended another way (its dispatch denied at a closed effect gate, a
            # failure, its deadline): the checkpoint closed with it; nobody cancelled it.
            why = f"{run.state}: {run.terminal_reason}" if run.terminal_reason else run.state
            return (
                f"The run ended ({why}) before this proposal was dispatched; nothing will be "
                "dispatched and no decision is recorded."
            )
    if code == "checkpoint_expired":
        at = checkpoint.expires_at.strftime("%Y-%m-%d %H:%M:%S")
        counted = checkpoint.votes.count()
        extra = (
            f" {counted} of the {checkpoint.quorum} approvals it needed had been given; "
            "the expiry covers the whole quorum."
            if checkpoint.quorum > 1
            else ""
        )
        return f"This checkpoint expired at {at} UTC, before your decision.{extra}"
    return base


_DECIDED_AS = {
    Decision.Verdict.APPROVE: "approved",
    Decision.Verdict.DECLINE: "declined",
    Decision.Verdict.ANSWER: "answered",
}


def _decided_by_message(checkpoint: Checkpoint, *, by_ref: str) -> str:
    """Who decided ``checkpoint`` before this attempt, how, when and why (the decision
    that won a race, or one made earlier): '' when no decision is recorded."""
    decision = (
        Decision.objects.filter(checkpoint_id=checkpoint.pk)
        .values("verdict", "decided_by_ref", "approvers", "reason", "answer", "created_at")
        .first()
    )
    if decision is None:
        return ""
    refs = decision["approvers"] or [decision["decided_by_ref"]]
    who = ", ".join(f"you ({ref})" if ref == by_ref else ref for ref in refs)
    at = decision["created_at"].strftime("%Y-%m-%d %H:%M:%S")
    how = _DECIDED_AS.get(decision["verdict"], decision["verdict"].lower())
    if decision["verdict"] == Decision.Verdict.ANSWER:
        return (
            f"This question was already answered by {who} at {at} UTC (“{decision['answer']}”); "
            "an answer is single use and yours was not recorded."
        )
    if checkpoint.quorum > 1 and decision["verdict"] == Decision.Verdict.APPROVE:
        return (
            f"The approvals this checkpoint needed are complete: approved by {who}, granted at "
            f"{at} UTC (“{decision['reason']}”); your approval is not needed and was not counted."
        )
    return (
        f"This checkpoint was already {how} by {who} at {at} UTC (“{decision['reason']}”); "
        "a decision is single use and yours was not recorded."
    )


def _refuse(
    checkpoint: Checkpoint, user: Any, code: str, seen_hash: str, message: str = ""
) -> DecisionResult:
    """Record a refused decision attempt. Late ones append ``late_approval.rejected`` and
    other refusals of someone with standing ``decision.refused`` to the run's timeline;
    refusals of someone without standing stay in the refusal log only (an outsider must not
    be able to grow a run's history). ``message`` replaces the code's usual text."""
    DecisionRefusal.objects.create(
        checkpoint=checkpoint,
        run=checkpoint.run,
        user=user,
        code=code,
        seen_hash=seen_hash[: domain.MAX_HASH_CHARS],
        created_at=clock.now(),
    )
    control = (
        EventType.LATE_APPROVAL_REJECTED
        if code in domain.LATE_REFUSALS
        else None
        if code in domain.AUTHORITY_REFUSALS | domain.WRONG_KIND_REFUSALS or code == "busy"
        else EventType.DECISION_REFUSED
    )
    if control is not None:
        authority.append_control(
            run_id=str(checkpoint.run_id),
            type=control,
            actor=Actor.HARNESS,
            reason_code=code,
            refs={"checkpoint": checkpoint.pk},
            payload={"by": principal_ref_of(user), "seen_hash": seen_hash[: domain.MAX_HASH_CHARS]},
        )
    told = message or refusal_message(code, checkpoint, by_ref=principal_ref_of(user))
    return DecisionResult.refused(code, checkpoint, told)


def is_eligible(user: Any, checkpoint: Checkpoint) -> bool:
    """True when ``user`` may decide ``checkpoint`` under the policy it recorded."""
    return has_role(user, APPROVER) and checkpoint.eligibility.admits(
        username=user.get_username(), groups=roles_of(user)
    )


def approvers_so_far(checkpoint: Checkpoint) -> list[str]:
    return rows.approvers_so_far(checkpoint.pk)


@telemetry.traced_decision("approve")
def approval_decide(
    *,
    checkpoint_id: str,
    user: Any,
    approve: bool,
    seen_hash: str,
    reason: str,
    requested_change: Mapping[str, Any] | None = None,
    repeated_field: str | None = None,
) -> DecisionResult:
    """Approve or decline an approval checkpoint exactly as seen; refuse otherwise.

    ``repeated_field`` names a form field the decision was sent with more than once (the
    view reads none of that form's values then): refused and recorded as
    ``repeated_field``, after the authority checks, like every input refusal.

    The caller has already checked the checkpoint's tenant (objects of other tenants are
    404 in views). ``requested_change`` (decline only) names proposal fields to change; it
    becomes a new proposal that needs its own approval, never a silent edit. A location it
    names must be one the run's scope delegates (``location_out_of_scope``, recorded).

    A checkpoint whose policy needs a quorum of N counts each distinct eligible approver's
    approval of the same hash (``approval.counted``); the N-th grants it (the decision names
    every approver), any decline declines it. Every count and the grant compare-and-set the
    run's revision, so two approvals racing for the last slot cannot both count.
    """
    seen_hash = (seen_hash or "").strip()
    # A form sends each line break as CRLF; the browser counted it as one character
    # against the textarea's maxlength, and so does the limit (domain.MAX_REASON_CHARS).
    reason = (reason or "").replace("\r\n", "\n").strip()
    change = {k: v for k, v in (requested_change or {}).items() if v not in (None, "")}

    def attempt() -> DecisionResult | None:
        checkpoint = rows.checkpoint_with_run(checkpoint_id)
        if checkpoint.kind != Checkpoint.Kind.APPROVAL:
            return _refuse(checkpoint, user, "not_an_approval", seen_hash)
        run = checkpoint.run
        # Votes are recorded only below a quorum of two or more: a checkpoint of quorum 1
        # is granted (and closed) by its first approval, so it never has one to read.
        votes = approvers_so_far(checkpoint) if checkpoint.quorum > 1 else []
        me = principal_ref_of(user)
        refusal = domain.decision_refusal(
            domain.DecisionAttempt(
                seen_hash=seen_hash,
                checkpoint_hash=checkpoint.proposal_hash,
                checkpoint_status=checkpoint.status,
                expired=checkpoint.expires_at <= clock.now(),
                run_waiting_here=run.state == State.WAITING_HUMAN.value
                and run.waiting_checkpoint == checkpoint.pk,
                run_cancelled=run.state == State.CANCELLED.value,
                approver_ref=me,
                requester_ref=run.principal_ref,
                approver_has_role=has_role(user, APPROVER),
                reason=reason,
                approve=approve,
                eligible=is_eligible(user, checkpoint),
                quorum=checkpoint.quorum,
                approved_by=tuple(votes),
                # Only a hash that differs from the checkpoint's is looked up among the
                # run's other proposals (a changed proposal apart from an altered page).
                other_proposal_hashes=(
                    rows.other_proposal_hashes(run.pk, checkpoint.pk)
                    if seen_hash != checkpoint.proposal_hash
                    else frozenset()
                ),
                requested_change=change,
                repeated_field=repeated_field,
                allowed_locations=delegated_locations(run.scope),
            )
        )
        if refusal is not None:
            told = ""
            if refusal == "repeated_field" and repeated_field is not None:
                told = domain.repeated_field_message(repeated_field)
            elif refusal == "input_too_large":
                told = domain.too_large_message(reason=reason, seen_hash=seen_hash, change=change)
            elif refusal == "bidi_control":
                told = domain.bidi_control_message(reason)
            elif refusal == "invalid_requested_change" and change:
                told = domain.requested_quantity_problem(change)
            elif refusal == "location_out_of_scope":
                told = domain.location_out_of_scope_message(
                    change["location_id"], delegated_locations(run.scope)
                )
            return _refuse(checkpoint, user, refusal, seen_hash, told)
        granted = approve and domain.quorum_met(quorum=checkpoint.quorum, approvals=len(votes) + 1)
        approvers = [*votes, me] if approve else []

        def within(run_row: Run, event: Any, checkpoint: Checkpoint = checkpoint) -> None:
            now = clock.now()
            if now >= checkpoint.expires_at:
                # The expiry passed between the read and this write (the moment it
                # expires): the decision is late, and nothing of it is written.
                raise _ExpiredMeanwhile
            if approve:
                sql.insert(
                    ApprovalVote(
                        checkpoint=checkpoint,
                        user=user,
                        by_ref=me,
                        seen_hash=seen_hash,
                        reason=reason,
                        created_at=now,
                    )
                )
            if approve and not granted:
                return
            decision = Decision(
                checkpoint=checkpoint,
                verdict=Decision.Verdict.APPROVE if approve else Decision.Verdict.DECLINE,
                decided_by=user,
                decided_by_ref=me,
                seen_hash=seen_hash,
                reason=reason,
                requested_change=change if not approve else {},
                approvers=approvers,
                created_at=now,
            )
            sql.insert(decision)
            status = Checkpoint.Status.APPROVED if approve else Checkpoint.Status.DECLINED
            rows.close(checkpoint.pk, status=status.value, at=now)
            checkpoint.status = status
            notify.checkpoint_notify(checkpoint=checkpoint, event="decided")

        # A drill point between the read and the compare-and-set: the fault lab's race of
        # two approvals for the last slot lands the other approval exactly here.
        points.reach("approvals.before_decision_append", str(run.pk))
        try:
            if approve and not granted:
                result = authority.append(
                    run_id=str(run.pk),
                    expected_revision=run.revision,
                    expected_epoch=None,
                    type=EventType.APPROVAL_COUNTED,
                    actor=Actor.HUMAN_PRINCIPAL,
                    reason_code="approval_counted",
                    refs={"checkpoint": checkpoint.pk},
                    payload={
                        "by": me,
                        "proposal_hash": seen_hash,
                        "reason": reason[:300],
                        "approvals": len(approvers),
                        "quorum": checkpoint.quorum,
                    },
                    within=within,
                    run=run,  # read with the checkpoint at expected_revision: the CAS proves it
                )
            else:
                result = authority.append(
                    run_id=str(run.pk),
                    expected_revision=run.revision,
                    expected_epoch=None,
                    type=EventType.APPROVAL_GRANTED if approve else EventType.APPROVAL_DECLINED,
                    actor=Actor.HUMAN_PRINCIPAL,
                    reason_code="approved" if approve else "declined",
                    refs={"checkpoint": checkpoint.pk, "approval": checkpoint.pk},
                    payload={
                        "by": me,
                        "proposal_hash": seen_hash,
                        "reason": reason[:300],
                        "requested_change": change if not approve else {},
                        **({"approvers": approvers} if approve else {}),
                    },
                    within=within,
                    advance_after=True,
                    run=run,  # read with the checkpoint at expected_revision: the CAS proves it
                )
        except _ExpiredMeanwhile:
            return _refuse(checkpoint, user, "checkpoint_expired", seen_hash)
        if result.applied:
            rows.refresh(checkpoint)
            return DecisionResult(True, checkpoint=checkpoint, counted=approve and not granted)
        if result.busy:
            return DecisionResult.refused("busy", checkpoint)
        if not result.conflict:
            return DecisionResult.refused("run_not_waiting", checkpoint)
        return None

    outcome = retry.until_settled(attempt, what=f"decide checkpoint {checkpoint_id}")
    if isinstance(outcome, DecisionResult):
        return outcome
    return DecisionResult.refused("busy", None)


class _ExpiredMeanwhile(Exception):
    """A checkpoint's expiry passed between a decision's read and its write: the write's
    transaction is rolled back and the decision refused as expired."""


@telemetry.traced_decision("answer")
def clarification_answer(
    *, checkpoint_id: str, user: Any, answer: str, repeated_field: str | None = None
) -> DecisionResult:
    """Record the requester's trusted answer; the run returns to OBSERVING.

    ``repeated_field`` names a form field sent more than once: the requester's answer is
    refused and recorded as ``repeated_field`` (nothing of the form is read)."""
    answer = (answer or "").replace("\r\n", "\n").strip()  # line breaks as counted

    def attempt() -> DecisionResult | None:
        checkpoint = Checkpoint.objects.select_related("run").get(pk=checkpoint_id)
        run = checkpoint.run
        if checkpoint.kind != Checkpoint.Kind.CLARIFICATION:
            return _refuse(checkpoint, user, "not_a_question", "")
        if principal_ref_of(user) != run.principal_ref:
            return _refuse(checkpoint, user, "not_requester", "")
        if repeated_field is not None:
            told = domain.repeated_field_message(repeated_field, what="the answer form")
            return _refuse(checkpoint, user, "repeated_field", "", told)
        if shows_nothing(answer):
            return _refuse(checkpoint, user, "answer_required", "")
        if len(answer) > domain.MAX_ANSWER_CHARS:
            told = domain.answer_too_large_message(answer)
            return _refuse(checkpoint, user, "input_too_large", "", told)
        if bidi_control_refusal(answer):
            told = domain.bidi_control_message(answer, what="an answer")
            return _refuse(checkpoint, user, "bidi_control", "", told)
        late = _answer_too_late(checkpoint, run)
        if late is not None:
            return _refuse(checkpoint, user, late, "")
        answer_id = evidence.store(
            run_id=str(run.pk),
            kind="answer",
            content={
                "capability": "answer",
                "ok": True,
                "error": "",
                "data": {"question": checkpoint.question, "answer": answer},
                "observed_at": clock.iso(clock.now()),
            },
        )

        def within(run_row: Run, event: Any, checkpoint: Checkpoint = checkpoint) -> None:
            if clock.now() >= checkpoint.expires_at:
                raise _ExpiredMeanwhile  # as a decision's (approval_decide)
            Decision.objects.create(
                checkpoint=checkpoint,
                verdict=Decision.Verdict.ANSWER,
                decided_by=user,
                decided_by_ref=principal_ref_of(user),
                reason="answered",
                answer=answer,
                created_at=clock.now(),
            )
            Checkpoint.objects.filter(pk=checkpoint.pk).update(
                status=Checkpoint.Status.ANSWERED, closed_at=clock.now()
            )

        # A drill point between the read and the compare-and-set (two tabs answering at
        # once, a cancel committing meanwhile).
        points.reach("approvals.before_answer_append", str(run.pk))
        try:
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
        except _ExpiredMeanwhile:
            return _refuse(checkpoint, user, "checkpoint_expired", "")
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


def _answer_too_late(checkpoint: Checkpoint, run: Run) -> str | None:
    """Why an answer to ``checkpoint`` can no longer be recorded, each cause its own code
    (the message then names who answered it, who cancelled the run, when it expired), or
    None while the run waits for it."""
    if checkpoint.status == Checkpoint.Status.ANSWERED:
        return "already_decided"
    if checkpoint.status == Checkpoint.Status.CANCELLED or run.state == State.CANCELLED.value:
        return "run_cancelled"
    if checkpoint.status == Checkpoint.Status.EXPIRED or checkpoint.expires_at <= clock.now():
        return "checkpoint_expired"
    if checkpoint.status != Checkpoint.Status.PENDING or run.waiting_checkpoint != checkpoint.pk:
        return "run_not_waiting"
    return None


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
    if result.applied:
        checkpoint.refresh_from_db()
        notify.checkpoint_notify(checkpoint=checkpoint, event="expired")
    return result.applied


def checkpoints_close(run: Run, event: Any) -> list[dict[str, str]]:
    """Close the run's open checkpoints with its terminal event (same transaction): an
    expiry expires them, anything else cancels them. Return them as unresolved items.

    Open means pending, or approved and never consumed: a run that ended between the
    approval and its dispatch can no longer use it (the decision row keeps the verdict and
    shows it unconsumed), so it must not stay APPROVED as if it were still live."""
    return checkpoints_close_many([(run, event)])[str(run.pk)]


def checkpoints_close_many(closing: Sequence[tuple[Run, Any]]) -> dict[str, list[dict[str, str]]]:
    """``checkpoints_close`` for many runs with their terminal events (a bulk operation's
    batch), in at most three statements; return each run's closed checkpoints by run id."""
    expiring = {str(run.pk) for run, event in closing if event.type is EventType.APPROVAL_EXPIRED}
    still_open: dict[str, list[str]] = {str(run.pk): [] for run, _ in closing}
    for run_id, checkpoint_id in rows.open_of_runs([run.pk for run, _ in closing]):
        still_open[str(run_id)].append(checkpoint_id)
    now = clock.now()
    for status, ids in (
        (
            Checkpoint.Status.EXPIRED,
            [c for r, cs in still_open.items() if r in expiring for c in cs],
        ),
        (
            Checkpoint.Status.CANCELLED,
            [c for r, cs in still_open.items() if r not in expiring for c in cs],
        ),
    ):
        if ids:
            rows.close_many(ids, status=status.value, at=now)
    return {run_id: [{"checkpoint": c} for c in ids] for run_id, ids in still_open.items()}


def approval_consume(*, run: Run, proposal_hash: str, attempt_id: str) -> str:
    """Consume the approval of ``proposal_hash`` for the dispatch ``attempt_id``; return the
    checkpoint's id. Call inside the transaction that records the dispatch (proposal.allowed).

    A live approval is used exactly once (SPEC §4): its decision is marked consumed by the
    attempt and the checkpoint becomes USED. A checkpoint already USED (a same-key
    redispatch after a proven absence) is returned as it is. Raise ApprovalNotConsumable
    when no checkpoint binds the hash, the approval was consumed meanwhile, or the checkpoint
    is neither APPROVED nor USED.
    """
    found = rows.to_consume(run, proposal_hash)
    if found is None:
        raise ApprovalNotConsumable("effect admitted without a checkpoint for its hash")
    checkpoint_id, status = found
    if status == Checkpoint.Status.APPROVED:
        consumed = rows.consume(checkpoint_id, attempt_id=attempt_id, at=clock.now())
        if consumed != 1:
            raise ApprovalNotConsumable("the approval was already consumed")
        rows.set_status(checkpoint_id, Checkpoint.Status.USED.value)
    elif status != Checkpoint.Status.USED:
        # Validation admits an effect only with a live approval, and the run's row lock
        # keeps the checkpoint as validation saw it: reaching here is a defect, and no
        # dispatch may be recorded on a checkpoint nobody approved.
        raise ApprovalNotConsumable(f"the checkpoint is {status}, not approved")
    return str(checkpoint_id)


def approvers_of(checkpoint_id: str) -> list[str]:
    """Every approver whose approval made up the consumed decision of ``checkpoint_id`` (a
    quorum names all of them, in the order they approved), for the effect's record."""
    found = rows.approval_approvers(checkpoint_id)
    if found is None:
        return []
    approvers, decided_by_ref = found
    return approvers or [decided_by_ref]


class ApprovalNotConsumable(RuntimeError):
    """The dispatch record cannot consume an approval: an integrity failure, never routine."""
