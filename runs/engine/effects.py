"""The effect path: the dispatch record, the send gate, the dispatch, the recording of its
outcome, and reconciliation by the same key (RECOVERING), as the effect attempt lifecycle
of ``runs/domain/effects.py`` says. Every status an attempt takes commits with the run
event that records it; an outcome that arrives after the run ended is settled from the
ledger as ``effect.reconciled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, connection, transaction

from approvals import services as approvals
from capabilities import ports, registry, reserve_part
from capabilities.base import CallOutcome, ErrorCode, Invocation
from fieldops import points, sql
from fieldops.db import lock_wait_failed
from kernel import clock
from runs import authority, evidence, rows
from runs.authority import Result, new_id
from runs.domain import effects, validation
from runs.domain.budgets import Budget
from runs.domain.effects import AttemptStatus
from runs.domain.proposals import ActionIntent, ObserveIntent
from runs.domain.states import Actor, EventType, State, is_terminal
from runs.engine import attempts, inputs
from runs.engine.owner import (
    PAUSE,
    Owner,
    append,
    append_fact,
    inject_cancel,
    log,
    observation_content,
    reach_point,
    world_of,
)
from runs.models import EffectAttempt, Run


def record_dispatch(
    owner: Owner, ctx: validation.ValidationContext, attempt_id: str
) -> authority.Within:
    """The dispatch record and the approval's consumption, in the proposal.allowed txn."""

    def within(run: Run, event: Any) -> None:
        proposal = ctx.canonical_proposal or {}
        key = reserve_part.semantic_key(
            reserve_part.semantic_intent(
                tenant=run.tenant,
                principal_ref=run.principal_ref,
                task_id=run.task_id,
                run_id=str(run.pk),
                proposal_hash=ctx.canonical_hash,
                part_id=proposal["part_id"],
                slot_id=proposal["slot_id"],
                quantity=proposal["quantity"],
            )
        )
        checkpoint_id = approvals.approval_consume(
            run=run, proposal_hash=ctx.canonical_hash, attempt_id=attempt_id
        )
        sql.insert(
            EffectAttempt(
                id=attempt_id,
                run=run,
                idempotency_key=key,
                proposal_hash=ctx.canonical_hash,
                checkpoint_id=checkpoint_id,
                attempt=run.attempt,
                owner_epoch=owner.epoch,
                dispatch_sequence=event.sequence,
                status=EffectAttempt.Status.DISPATCH_RECORDED,
                created_at=clock.now(),
            )
        )

    return within


def invocation_for(
    run: Run,
    proposal: ObserveIntent | ActionIntent,
    observations: dict[str, Any] | None = None,
    *,
    fencing_token: int = 0,
) -> Invocation:
    observations = (
        observations
        if observations is not None
        else evidence.admitted_observations(str(run.pk), revision=run.revision)
    )
    canonical, canonical_hash = inputs.canonical_proposal(observations)
    return Invocation(
        capability=proposal.capability,
        args=dict(proposal.args),
        run_id=str(run.pk),
        task_id=run.task_id,
        tenant=run.tenant,
        principal_ref=run.principal_ref,
        scope=validation.delegated_locations(run.scope),
        request_id=new_id("rq"),
        deadline=registry.default_deadline(),
        proposal_hash=canonical_hash,
        observations=observations,
        canonical_proposal=canonical,
        fencing_token=fencing_token,
        version=inputs.pinned_version(run, proposal.capability),
    )


def execute_effect(owner: Owner, run: Run, proposal: ActionIntent) -> str | None:
    attempt = attempts.latest(run.pk)
    status = AttemptStatus(attempt.status) if attempt is not None else None
    if attempt is None or status not in effects.RECONCILABLE:
        # The dispatch record is written with proposal.allowed, and every later status
        # commits with the event that leaves EXECUTING: this is an integrity failure.
        append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            "dispatch_record_missing",
            payload={"attempt": attempt.pk if attempt else "", "status": status or ""},
        )
        return None
    if attempt.owner_epoch != owner.epoch or status is not AttemptStatus.DISPATCH_RECORDED:
        # A previous owner recorded this dispatch and may have sent it: never resend
        # blindly, reconcile by the same key.
        resolution = effects.Resolution(
            AttemptStatus.AMBIGUOUS,
            EventType.EFFECT_AMBIGUOUS,
            "owner_changed_after_dispatch_record",
        )
        record_resolution(owner, attempt, resolution, refs={"attempt": attempt.pk})
        return None
    reach_point(owner, "after_dispatch_record")
    inject_cancel(owner, "before_effect_dispatch")
    live = send_gate(owner, attempt, proposal.capability)
    if live is None:
        return None
    if isinstance(live, GateClosed):
        # Closed after validation admitted the proposal: nothing leaves, and the attempt
        # ends NOT_SENT as after any refusal before dispatch (``effect.rejected``).
        outcome = CallOutcome.fail(ErrorCode.DENIED, "pre_dispatch", live.why)
        record_effect_outcome(owner, attempt, proposal, outcome, run=live.run)
        return None
    reach_point(owner, "after_send_gate")
    invocation = invocation_for(live, proposal, fencing_token=attempt.dispatch_sequence)
    outcome = registry.dispatch(invocation, world_of(live))
    reach_point(owner, "after_effect_committed")
    inject_cancel(owner, "after_effect_dispatch")
    record_effect_outcome(owner, attempt, proposal, outcome, run=live)
    return None


@dataclass(frozen=True)
class GateClosed:
    """The send gate found the capability's dispatch stopped (an effect gate closed, the
    version retired): ``why`` says which."""

    run: Run
    why: str


def send_gate(owner: Owner, attempt: EffectAttempt, capability: str) -> Run | GateClosed | None:
    """The last cancellation and effect-gate check before the effect leaves: mark the
    attempt SENDING.

    It locks the dispatch record, as ``run_cancel`` does, so a cancellation either commits
    first (the attempt is then NOT_SENT and nothing is sent) or sees SENDING and qualifies
    itself as ``cancelled_effect_unknown``. It reads the effect gates of the run's pinned
    ``capability`` and its lifecycle under the lock their changes take
    (``dispatch_stopped``), so a gate an operator or catalog admin was told is closed, or a
    version they were told is retired, stops every send not yet SENDING: then GateClosed,
    the attempt still DISPATCH_RECORDED for its caller to record as not sent.
    """
    try:
        with transaction.atomic():
            locked = attempts.in_status(attempt.pk, AttemptStatus.DISPATCH_RECORDED, lock=True)
            run = rows.run_row(owner.run_id)
            if run is None:
                raise Run.DoesNotExist(f"no run {owner.run_id}")
            if not locked or is_terminal(run.state) or run.owner_epoch != owner.epoch:
                return None
            why = dispatch_stopped(run, capability)
            if why:
                return GateClosed(run, why)
            attempts.set_status(attempt.pk, AttemptStatus.SENDING)
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        # Someone else holds the dispatch record (a takeover settling it): send nothing.
        owner.busy = True
        return None
    attempt.status = AttemptStatus.SENDING
    return run


# The version's row is read FOR SHARE: a gate change locks it FOR UPDATE, so it either
# committed before this read (and is seen) or waits until this send is SENDING. The tenant
# gate is read after that lock, in a statement of its own: READ COMMITTED gives it a
# snapshot that includes a tenant gate change committed while the first one waited.
_VERSION_GATE_SQL = (
    "SELECT id, effect_gate_open, lifecycle FROM catalog_capabilityversion "
    "WHERE capability_id = %s AND version = %s"
)
_VERSION_GATE = {
    "postgresql": sql.Statement(_VERSION_GATE_SQL + " FOR SHARE"),
    "sqlite": sql.Statement(_VERSION_GATE_SQL),  # one writer at a time: nothing to lock
}
_TENANT_GATE_CLOSED = sql.Statement(
    "SELECT 1 FROM catalog_tenanteffectgate WHERE version_id = %s AND tenant = %s AND NOT open"
)


def dispatch_stopped(run: Run, capability: str) -> str:
    """Why new dispatch of the run's pinned ``capability`` is stopped now, in validation's
    words (``capability_retired`` / ``capability_not_admitted``, ``effect_gate_closed``,
    ``tenant_effect_gate_closed``); "" when it may leave. Call it inside the send gate's
    transaction: each of these changes locks the version's row, as this read does."""
    version = inputs.pinned_version(run, capability)
    found = _VERSION_GATE[connection.vendor].rows([capability, version])
    if not found:
        return ""  # not in the catalog: the registry refuses it before dispatch
    version_id, gate_open, lifecycle = found[0]
    if lifecycle not in ("ADMITTED", "DEPRECATED"):
        code = "capability_retired" if lifecycle == "RETIRED" else "capability_not_admitted"
        return (
            f"{code}: {capability}@{version} is {lifecycle} (changed after this proposal "
            "was allowed); nothing was sent"
        )
    if not gate_open:
        return (
            f"effect_gate_closed: new dispatch of {capability}@{version} is stopped for the "
            "whole deployment (closed after this proposal was allowed); nothing was sent"
        )
    if _TENANT_GATE_CLOSED.rows([version_id, run.tenant]):
        return (
            f"tenant_effect_gate_closed: new dispatch of {capability}@{version} is stopped "
            f"for tenant {run.tenant} by its operators (closed after this proposal was "
            "allowed); nothing was sent"
        )
    return ""


def record_effect_outcome(
    owner: Owner,
    attempt: EffectAttempt,
    proposal: ActionIntent,
    outcome: CallOutcome,
    *,
    run: Run | None = None,
) -> None:
    """Record what the dispatch answered, as the effect table says (runs/domain/effects.py).

    The attempt's new status commits with the run event that records it. If the run ended
    meanwhile (a cancellation won), the event is refused and the outcome is settled from
    the ledger as ``effect.reconciled`` instead: an effect is never left off the record.
    ``run``: the row the send gate read before the dispatch; the event's compare-and-set
    decides from it, and anything that moved during the dispatch fails it, so the row is
    read again and the authority decides from that (``append_fact``).
    """
    rule = registry.ALL_CONTRACTS[proposal.capability].error(outcome.error)
    resolution = effects.resolve_dispatch(
        ok=outcome.ok,
        stage=outcome.stage,
        error=outcome.error,
        declared=rule.transition if rule is not None else None,
    )
    run_id = owner.run_id
    refs: dict[str, str] = {"attempt": attempt.pk}
    if resolution.effect:
        refs["effect"] = str(outcome.data["effect_id"])
    if resolution.event is not EventType.EFFECT_AMBIGUOUS:
        content = observation_content(proposal.capability, dict(proposal.args), outcome)
        content["proposal_hash"] = attempt.proposal_hash
        refs["observation"] = evidence.store(run_id=run_id, kind="observation", content=content)
    if outcome.quarantined:
        refs["validation"] = evidence.store(
            run_id=run_id,
            kind="quarantine",
            content=dict(outcome.quarantined),
            redaction_class="quarantined",
        )
    payload: dict[str, Any] = {"stage": outcome.stage, "detail": outcome.detail[:300]}
    if resolution.effect and attempt.checkpoint_id:
        # The effect's record names every person who approved it (a quorum: all of them).
        payload["approvers"] = approvals.approvers_of(attempt.checkpoint_id)
    result = record_resolution(
        owner,
        attempt,
        resolution,
        run=run,
        refs=refs,
        payload=payload,
        detail=outcome.detail,
        error=outcome.error,
        answer=outcome.error if outcome.stage == "definite" else "",
        effect_id=refs.get("effect", ""),
    )
    if result is not None and not result.applied and result.snapshot.terminal:
        record_after_terminal(attempt)


def record_resolution(
    owner: Owner,
    attempt: EffectAttempt,
    resolution: effects.Resolution,
    *,
    run: Run | None = None,
    refs: dict[str, str],
    payload: dict[str, Any] | None = None,
    expected_state: State = State.EXECUTING,
    detail: str = "",
    error: str = "",
    answer: str = "",
    effect_id: str = "",
) -> Result | None:
    """Append ``resolution.event`` and move the attempt to ``resolution.status`` in the same
    transaction; refused (nothing written) if the attempt moved meanwhile. ``run``: the row
    read before the I/O being recorded, if the caller has it (see ``append_fact``)."""
    assert resolution.event is not None
    source = AttemptStatus(attempt.status)

    def within(run: Run, event: Any) -> None:
        attempts.attempt_move(
            attempt_id=attempt.pk,
            source=source,
            target=resolution.status,
            detail=detail or resolution.reason,
            error=error,
            answer=answer,
            effect_id=effect_id,
        )

    result = append_fact(
        owner,
        resolution.event,
        Actor.CAPABILITY_ADAPTER if expected_state is State.EXECUTING else Actor.HARNESS,
        resolution.reason,
        expected_state=expected_state,
        run=run,
        refs=refs,
        payload=payload or {},
        counters_delta={Budget.EFFECTS: 1} if resolution.effect else None,
        within=within,
    )
    if result is not None and result.applied:
        attempt.status = resolution.status
    return result


def record_after_terminal(attempt: EffectAttempt) -> None:
    """The run ended (cancelled) while the effect was in flight: the obligation stays, so
    reconcile it against the ledger now and append what the ledger proves."""
    obligation_reconcile(attempt_id=attempt.pk)


def step_recovering(owner: Owner, run: Run) -> str | None:
    attempt = (
        EffectAttempt.objects.filter(run=run, status__in=effects.RECONCILABLE)
        .order_by("-dispatch_sequence", "-created_at")
        .first()
    )
    if attempt is None:
        append(
            owner,
            run,
            EventType.RECONCILIATION_UNRESOLVED,
            Actor.HARNESS,
            "no_attempt_to_reconcile",
            payload={"owner": "operator"},
        )
        return None
    proposal = inputs.proposal_of(run)
    assert isinstance(proposal, ActionIntent)
    inv = invocation_for(run, proposal)
    found = reserve_part.reconcile(
        key=attempt.idempotency_key,
        intent=reserve_part.intent_for(inv),
        world=world_of(run),
        fence=run.revision,
    )
    reach_point(owner, "after_reconciliation_read")
    resolution = effects.resolve_reconciliation(found.outcome)
    if resolution is None:
        # A commit of this key is still in progress elsewhere (an older owner inside the
        # ledger's transaction): nothing is known yet, so nothing is recorded. Stop; the
        # sweeper re-drives the run and the read is repeated.
        log.info("reconciliation busy: %s", found.detail, extra={"run_id": owner.run_id})
        return PAUSE
    refs = {"attempt": attempt.pk}
    payload: dict[str, Any] = {
        "detail": found.detail,
        "key": attempt.idempotency_key,
        "fence": run.revision,
    }
    if found.effect is not None and resolution.effect:
        refs["effect"] = str(found.effect["effect_id"])
    if resolution.status in effects.UNRESOLVED:
        payload["owner"] = "operator"
    record_resolution(
        owner,
        attempt,
        resolution,
        refs=refs,
        payload=payload,
        expected_state=State.RECOVERING,
        detail=found.detail,
        effect_id=refs.get("effect", ""),
    )
    return None


# -- effect obligations after a run ended --------------------------------------------------
def obligation_record(
    *,
    attempt: EffectAttempt,
    resolution: effects.Resolution,
    effect: Mapping[str, Any] | None,
    detail: str,
    by_ref: str = "harness",
) -> bool:
    """Append an ended run's obligation outcome as ``effect.reconciled`` and move the
    attempt with it, in one transaction; False when nothing was recorded (the attempt was
    settled by someone else meanwhile, or the run kept changing)."""
    source = AttemptStatus(attempt.status)
    refs = {"attempt": attempt.pk}
    effect_id = str((effect or {}).get("effect_id", ""))
    if effect_id and resolution.effect:
        refs["effect"] = effect_id

    def within(run: Run, event: Any) -> None:
        attempts.attempt_move(
            attempt_id=attempt.pk,
            source=source,
            target=resolution.status,
            detail=detail,
            effect_id=refs.get("effect", ""),
        )

    recorded = authority.append_control(
        run_id=str(attempt.run_id),
        type=EventType.EFFECT_RECONCILED,
        actor=Actor.OPERATOR if by_ref != "harness" else Actor.HARNESS,
        reason_code=f"obligation_{resolution.reconciled}",
        refs=refs,
        payload={
            "detail": detail[:300],
            "by": by_ref,
            "outcome": resolution.reconciled,
            "key": attempt.idempotency_key,
        },
        within=within,
    )
    return recorded is not None


def obligation_reconcile(*, attempt_id: str, by_ref: str = "harness") -> EffectAttempt:
    """Query the ledger by the attempt's key and record what it proves (never dispatch).

    Only for an ended run: the read fences the key at the run's revision, above the token
    of every dispatch the run ever recorded, so "absent" is final. A busy ledger (a commit
    of the key in progress) or a ledger still unavailable records nothing new; the sweeper
    asks again.
    """
    return obligation_reconcile_recorded(attempt_id=attempt_id, by_ref=by_ref)[0]


def obligation_reconcile_recorded(
    *, attempt_id: str, by_ref: str = "harness"
) -> tuple[EffectAttempt, bool]:
    """``obligation_reconcile``, and whether this call recorded the outcome (False when
    the ledger proved nothing new, or someone else recorded it meanwhile: a colleague,
    the sweeper)."""
    attempt = EffectAttempt.objects.select_related("run").get(pk=attempt_id)
    run = attempt.run
    if not is_terminal(run.state) or AttemptStatus(attempt.status) not in effects.RECONCILABLE:
        return attempt, False
    world = ports.for_run(run.namespace, str(run.pk), run.fault_plan)
    found = reserve_part.reconcile(
        key=attempt.idempotency_key,
        intent=_intent_for_attempt(attempt),
        world=world,
        fence=run.revision,
    )
    resolution = effects.resolve_reconciliation(found.outcome)
    if resolution is None or resolution.status.value == attempt.status:
        return attempt, False
    # A drill point between the ledger's answer and its record (two operators at once).
    points.reach("effects.before_obligation_record", str(run.pk))
    recorded = obligation_record(
        attempt=attempt,
        resolution=resolution,
        effect=found.effect,
        detail=found.detail,
        by_ref=by_ref,
    )
    attempt.refresh_from_db()
    return attempt, recorded


def _intent_for_attempt(attempt: EffectAttempt) -> dict[str, Any]:
    from runs import evidence
    from runs.engine.inputs import canonical_proposal

    run = attempt.run
    observations = evidence.admitted_observations(str(run.pk))
    for obs in reversed(list(observations.values())):
        data = obs.get("data") or {}
        if (
            obs.get("capability") == "propose_reservation"
            and data.get("proposal_hash") == attempt.proposal_hash
        ):
            proposal = data["proposal"]
            break
    else:
        proposal, _ = canonical_proposal(observations)
        proposal = proposal or {"part_id": "", "slot_id": "", "quantity": 0}
    return reserve_part.semantic_intent(
        tenant=run.tenant,
        principal_ref=run.principal_ref,
        task_id=run.task_id,
        run_id=str(run.pk),
        proposal_hash=attempt.proposal_hash,
        part_id=proposal["part_id"],
        slot_id=proposal["slot_id"],
        quantity=proposal["quantity"],
    )
