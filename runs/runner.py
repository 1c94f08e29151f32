"""One owner advancing one run: ask the policy, validate, dispatch, record.

``advance`` claims the run (new owner epoch), then performs one step per state until the
run waits or ends. Every step does its I/O first (policy call, capability call, ledger
read), outside any database transaction, and then asks the authority to append exactly
one event with the revision and epoch it started from. Cancellation is checked at the
safe points of SPEC §1: before model dispatch, after the model answers, before
capability admission, and immediately before effect dispatch.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, transaction

from approvals.models import Checkpoint, Decision
from capabilities import ports, registry, reserve_part, visibility
from capabilities.base import Invocation, Outcome
from capabilities.ports import WorldPort
from fieldops import points
from fieldops.db import lock_wait_failed
from kernel import clock
from runs import attempts, authority, context, evidence, ownership, rules
from runs.authority import Result, new_id
from runs.domain import completion, effects, safepoints, validation
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.effects import AttemptStatus
from runs.domain.proposals import ActionIntent, ObserveIntent, Proposal, to_dict
from runs.domain.states import Actor, EventType, State, is_terminal, is_waiting
from runs.models import Correlation, EffectAttempt, Evidence, Run

log = logging.getLogger("fieldops.runner")

MAX_STEPS = 400


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Owner:
    """The claim this runner holds, plus the hooks the fault lab and tests may set."""

    claim: ownership.Claim
    # The run's fault plan (part of its configuration): the cancellations it schedules at
    # safe points fire once per advance.
    plan: tuple[Mapping[str, Any], ...]
    fired: set[str]
    # Set when an append found the run held by another transaction past the lock
    # timeout: the owner stops and the sweeper re-drives the run.
    busy: bool = False

    @property
    def run_id(self) -> str:
        return self.claim.run_id

    @property
    def epoch(self) -> int:
        return self.claim.epoch


def _point(owner: Owner, name: str) -> None:
    points.reach(name, owner.run_id)


# A step returns PAUSE when the run must wait for something outside it before it can move
# (a commit of its effect still in progress elsewhere): the owner stops and releases the
# run, and the sweeper re-drives it later.
PAUSE = "pause"


def advance(run_id: str, *, worker: str | None = None, max_steps: int = MAX_STEPS) -> str:
    """Advance ``run_id`` until it waits, ends, pauses or ownership is lost; return its state.

    A run that cannot be claimed (owned, waiting, ended, or locked by a stalled
    transaction) is left alone: the refusal is logged and the run's state returned.
    """
    claim = ownership.claim(run_id, worker or worker_name())
    if not isinstance(claim, ownership.Claim):
        log.info("claim refused: %s", claim.reason, extra={"run_id": run_id})
        run = Run.objects.filter(pk=run_id).only("state").first()
        return run.state if run else "MISSING"
    run = Run.objects.get(pk=run_id)
    owner = Owner(claim=claim, plan=tuple(run.fault_plan), fired=set())
    try:
        _point(owner, "after_claim")
        _loop(owner, max_steps)
    except points.WorkerKilled:
        # The process "died" (a drill): its lease stays until it expires, like after SIGKILL.
        raise
    except BaseException:
        ownership.release(owner.claim)
        raise
    ownership.release(owner.claim)
    return Run.objects.get(pk=run_id).state


def _loop(owner: Owner, max_steps: int) -> None:
    renewed_at = clock.now()
    for _ in range(max_steps):
        run = Run.objects.get(pk=owner.run_id)
        if run.owner_epoch != owner.epoch or is_terminal(run.state) or is_waiting(run.state):
            return
        if clock.now() > run.deadline:
            _append(
                owner,
                run,
                EventType.RUN_FAILED,
                Actor.CLOCK,
                exhausted_reason(Budget.ELAPSED_MS),
            )
            continue
        if STEPS[State(run.state)](owner, run) == PAUSE or owner.busy:
            return
        # Renew once a third of the lease has passed, not after every step (a commit
        # each). Ownership is still checked every step: the re-read above stops at an
        # epoch change, and nobody can claim while the lease is unexpired.
        if clock.now() - renewed_at >= ownership.lease_length() / 3:
            if not ownership.renew(owner.claim):
                return
            renewed_at = clock.now()


# -- helpers -----------------------------------------------------------------------------
def _append(
    owner: Owner, run: Run, type: EventType, actor: Actor, reason: str = "", **kw: Any
) -> Result:
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=owner.epoch,
        type=type,
        actor=actor,
        reason_code=reason,
        run=run,  # the row this step read: the authority's CAS proves it current
        **kw,
    )
    if result.busy:
        owner.busy = True
    return result


def _inject_cancel(owner: Owner, point: str) -> None:
    """Fire a cancellation the fault plan scheduled at ``point`` (once per advance)."""
    if point in owner.fired or not safepoints.cancellation_scheduled(owner.plan, point):
        return
    owner.fired.add(point)
    from runs import services

    services.run_cancel(
        run_id=owner.run_id, by_ref="faultlab:scheduled", reason=f"fault lab: cancellation {point}"
    )


def _safe_point(owner: Owner, point: str) -> Run | None:
    """Inject a scheduled cancellation at ``point``, then re-read: None if we must stop."""
    _inject_cancel(owner, point)
    run = Run.objects.get(pk=owner.run_id)
    if is_terminal(run.state) or run.owner_epoch != owner.epoch:
        return None
    return run


def _world(run: Run) -> WorldPort:
    return ports.for_run(run.namespace, str(run.pk), run.fault_plan)


def _observation(capability: str, args: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    return {
        "capability": capability,
        "args": args,
        "ok": outcome.ok,
        "data": dict(outcome.data),
        "error": outcome.error,
        "stage": outcome.stage,
        "detail": outcome.detail[:500],
        "attempts": outcome.attempts,
        "observed_at": clock.iso(clock.now()),
    }


# -- CREATED -----------------------------------------------------------------------------
def step_created(owner: Owner, run: Run) -> None:
    from runs.domain.budgets import validate_limits
    from runs.services import CONTRACT_VERSION

    problem = validate_limits(run.limits)
    if run.contract_version != CONTRACT_VERSION:
        problem = problem or "contract_version_unknown"
    if not run.components:
        problem = problem or "no_capabilities_pinned"
    if problem:
        _append(owner, run, EventType.RUN_FAILED, Actor.HARNESS, problem)
        return
    _append(
        owner,
        run,
        EventType.RUN_STARTED,
        Actor.HARNESS,
        "contract_valid",
        refs={"observation": request_evidence_id(run)},
    )


def request_evidence_id(run: Run) -> str:
    return f"rq-{run.pk.hex[:20]}"


# -- OBSERVING ---------------------------------------------------------------------------
def step_observing(owner: Owner, run: Run) -> None:
    ref = run.pending_observation
    found = evidence.get(ref) if ref else None
    if found is None or str(found.run_id) != str(run.pk):
        _append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            "observation_evidence_missing",
            payload={"observation": ref},
        )
        return
    _append(
        owner,
        run,
        EventType.OBSERVATION_RECORDED,
        Actor.HARNESS,
        "admitted",
        refs={"observation": ref},
        payload={"kind": found.kind, "content_hash": found.content_hash},
    )


# -- DECIDING ----------------------------------------------------------------------------
def step_deciding(owner: Owner, run: Run) -> None:
    from runs.policies import boundary, resolve

    live = _safe_point(owner, "before_model_dispatch")
    if live is None:
        return
    run = live
    # A turn is a model call, counted at dispatch (SPEC §1, Budgets). The context is stored
    # before the call as its dispatch record, so a call whose worker died before the
    # proposal was recorded is charged too: on the next recorded proposal, or on the
    # failure that ends the run for want of turns.
    uncharged = uncharged_turns(run)
    for budget in (Budget.TURNS, Budget.PROPOSALS):
        used = run.counters.get(budget, 0) + (uncharged if budget is Budget.TURNS else 0)
        if used >= run.budget_limits.get(budget, 0):
            delta = {Budget.TURNS: uncharged} if uncharged else None
            _append(
                owner,
                run,
                EventType.RUN_FAILED,
                Actor.HARNESS,
                exhausted_reason(budget),
                counters_delta=delta,
            )
            return
    policy, vocabulary = resolve(run)
    projection = context.build(run, uncharged_turns=uncharged)
    projection_hash = context.projection_hash(projection)
    context_id = evidence.store(run_id=str(run.pk), kind="context", content=projection)
    # Nothing a model sends may stop the run (issue 14 item 8): a raising policy is a
    # provider failure, the raw output is stored (bounded) before it is parsed, and any
    # adapter failure is a typed rejection. See runs/policies/boundary.py.
    output = boundary.call_policy(policy, projection)
    _point(owner, "after_model_response")
    raw_id = evidence.store(
        run_id=str(run.pk),
        kind="raw_output",
        content=boundary.raw_evidence(
            output,
            adapter_version=vocabulary.adapter_version,
            policy_version=policy.version,
            input_context_hash=projection_hash,
        ),
    )
    kinds = {cid: c.kind.value for cid, c in registry.ALL_CONTRACTS.items()}
    reading = boundary.read_output(vocabulary, output, kinds)
    proposal: Proposal = reading.proposal
    refs = {"proposal": "", "raw_output": raw_id, "observation": context_id}
    if reading.commentary:
        # The preamble rule: text beside the call is evidence on the timeline, not authority.
        refs["commentary"] = evidence.store(
            run_id=str(run.pk),
            kind="commentary",
            content=boundary.commentary_evidence(reading, output, raw_id),
        )
    refs["proposal"] = evidence.store(
        run_id=str(run.pk), kind="proposal", content=to_dict(proposal)
    )
    live = _safe_point(owner, "after_model_response")
    target = live or Run.objects.get(pk=owner.run_id)
    result = _append(
        owner,
        target,
        EventType.PROPOSAL_EMITTED,
        Actor.MODEL,
        proposal.kind,
        refs=refs,
        payload={
            "kind": proposal.kind,
            "context_hash": projection_hash,
            "provider": output.provider,
            "model": output.model,
            "adapter_version": vocabulary.adapter_version,
            "visible": [c["name"] for c in projection["capabilities"]],
            "exposure": visibility.exposure_record(run, projection["capabilities"]),
            **({"uncharged_turns": uncharged} if uncharged else {}),
        },
        counters_delta={Budget.TURNS: 1 + uncharged, Budget.PROPOSALS: 1},
    )
    if not result.applied:
        log.info("proposal not admitted: %s", result.refusal, extra={"run_id": owner.run_id})


def uncharged_turns(run: Run) -> int:
    """Model calls made for ``run`` whose turn is not on its counter yet.

    Every call stores its context first (one ``context`` evidence row per call) and the
    proposal event charges the turn, so the difference is the calls whose worker died in
    between.
    """
    calls = Evidence.objects.filter(run_id=run.pk, kind="context").count()
    return max(0, calls - run.counters.get(Budget.TURNS, 0))


def _provider_failure(error: str) -> Proposal:
    from runs.domain.proposals import InvalidProposal

    return InvalidProposal(f"provider_error:{error}", "the provider call failed")


# -- VALIDATING --------------------------------------------------------------------------
def step_validating(owner: Owner, run: Run) -> None:
    live = _safe_point(owner, "before_capability_admission")
    if live is None:
        return
    run = live
    proposal = rules.proposal_of(run)
    ctx = rules.validation_context(run)
    decision = validation.validate(ctx, proposal)
    payload: dict[str, Any] = {**decision.as_payload(), "proposal_kind": proposal.kind}
    if isinstance(proposal, (ObserveIntent, ActionIntent)):
        payload["capability"] = proposal.capability
        payload["args_digest"] = validation.request_digest(ctx, proposal)
    refs = {"proposal": run.current_proposal}
    outcome = decision.outcome
    if outcome is validation.Outcome.FAIL:
        _append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            decision.reason,
            refs=refs,
            payload=payload,
        )
        return
    charge = decision.charge
    if charge is not None and not ctx.budgets.available(charge):
        _append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            exhausted_reason(charge),
            refs=refs,
            payload=payload,
        )
        return
    delta = {charge.value: 1} if charge is not None else {}
    event = validation.OUTCOME_EVENT[outcome]
    within = None
    if (
        outcome is validation.Outcome.EXECUTE
        and isinstance(proposal, ActionIntent)
        and (registry.ALL_CONTRACTS[proposal.capability].requires_approval)
    ):
        attempt_id = new_id("at")
        refs["attempt"] = attempt_id
        within = _record_dispatch(owner, ctx, attempt_id)
    elif outcome is validation.Outcome.APPROVAL:
        checkpoint_id = new_id("cp")
        refs["checkpoint"] = checkpoint_id
        within = _open_approval(run, ctx, checkpoint_id)
    elif outcome is validation.Outcome.CLARIFY:
        checkpoint_id = new_id("cp")
        refs["checkpoint"] = checkpoint_id
        within = _open_clarification(run, proposal, checkpoint_id)
    elif outcome is validation.Outcome.WAIT:
        correlation_id = new_id("co")
        refs["correlation"] = correlation_id
        within = _open_correlation(owner, run, proposal, correlation_id)
    if outcome is validation.Outcome.ESCALATE:
        payload["owner"] = "operator"
    _append(
        owner,
        run,
        event,
        Actor.HARNESS,
        decision.reason,
        refs=refs,
        payload=payload,
        counters_delta=delta,
        within=within,
    )


def _record_dispatch(
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
        checkpoint = (
            Checkpoint.objects.select_for_update()
            .filter(run=run, kind=Checkpoint.Kind.APPROVAL, proposal_hash=ctx.canonical_hash)
            .order_by("-created_at")
            .first()
        )
        assert checkpoint is not None, "effect admitted without a checkpoint"
        if checkpoint.status == Checkpoint.Status.APPROVED:
            consumed = Decision.objects.filter(
                checkpoint=checkpoint, verdict=Decision.Verdict.APPROVE, consumed_at__isnull=True
            ).update(consumed_at=clock.now(), consumed_by_attempt=attempt_id)
            if consumed != 1:
                raise RuntimeError("approval already consumed")
            Checkpoint.objects.filter(pk=checkpoint.pk).update(status=Checkpoint.Status.USED)
        EffectAttempt.objects.create(
            id=attempt_id,
            run=run,
            idempotency_key=key,
            proposal_hash=ctx.canonical_hash,
            checkpoint_id=checkpoint.pk,
            attempt=run.attempt,
            owner_epoch=owner.epoch,
            dispatch_sequence=event.sequence,
            status=EffectAttempt.Status.DISPATCH_RECORDED,
            created_at=clock.now(),
        )

    return within


def _open_approval(
    run: Run, ctx: validation.ValidationContext, checkpoint_id: str
) -> authority.Within:
    from approvals import services as approvals

    observations = ctx.observations

    def within(run: Run, event: Any) -> None:
        approvals.checkpoint_open_approval(
            run=run,
            checkpoint_id=checkpoint_id,
            opened_sequence=event.sequence,
            proposal=ctx.canonical_proposal or {},
            proposal_hash=ctx.canonical_hash,
            observations=observations,
        )

    return within


def _open_clarification(run: Run, proposal: Proposal, checkpoint_id: str) -> authority.Within:
    from approvals import services as approvals

    def within(run: Run, event: Any) -> None:
        approvals.checkpoint_open_clarification(
            run=run,
            checkpoint_id=checkpoint_id,
            opened_sequence=event.sequence,
            question=getattr(proposal, "question", ""),
        )

    return within


def _open_correlation(
    owner: Owner, run: Run, proposal: Proposal, correlation_id: str
) -> authority.Within:
    from django.conf import settings

    def within(run: Run, event: Any) -> None:
        Correlation.objects.create(
            id=correlation_id,
            run=run,
            attempt=run.attempt,
            owner_epoch=owner.epoch,
            dispatch_sequence=event.sequence,
            expected_response_type=getattr(proposal, "expected_event", "external"),
            deadline=clock.now() + dt.timedelta(seconds=settings.FIELDOPS_EXTERNAL_WAIT_SECONDS),
            allowed_states=[State.WAITING_EXTERNAL.value],
            status="OPEN",
            created_at=clock.now(),
        )

    return within


# -- EXECUTING ---------------------------------------------------------------------------
def _invocation(
    run: Run,
    proposal: ObserveIntent | ActionIntent,
    observations: dict[str, Any] | None = None,
    *,
    fencing_token: int = 0,
) -> Invocation:
    observations = (
        observations if observations is not None else (evidence.admitted_observations(str(run.pk)))
    )
    canonical, canonical_hash = rules.canonical_proposal(observations)
    return Invocation(
        capability=proposal.capability,
        args=dict(proposal.args),
        run_id=str(run.pk),
        task_id=run.task_id,
        tenant=run.tenant,
        principal_ref=run.principal_ref,
        scope=tuple(s for s in run.scope if not s.startswith("effect:")),
        request_id=new_id("rq"),
        deadline=registry.default_deadline(),
        proposal_hash=canonical_hash,
        observations=observations,
        canonical_proposal=canonical,
        fencing_token=fencing_token,
    )


def step_executing(owner: Owner, run: Run) -> None:
    proposal = rules.proposal_of(run)
    if not isinstance(proposal, (ObserveIntent, ActionIntent)):
        _append(owner, run, EventType.RUN_FAILED, Actor.HARNESS, "executing_without_request")
        return
    contract = registry.ALL_CONTRACTS.get(proposal.capability)
    if contract is not None and contract.requires_approval:
        _execute_effect(owner, run, proposal)
        return
    live = _safe_point(owner, "before_capability_admission")
    if live is None:
        return
    outcome = registry.dispatch(_invocation(live, proposal), _world(live))
    _point(owner, "after_capability_result")
    content = _observation(proposal.capability, dict(proposal.args), outcome)
    refs = {"observation": evidence.store(run_id=str(run.pk), kind="observation", content=content)}
    if outcome.quarantined:
        refs["validation"] = evidence.store(
            run_id=str(run.pk),
            kind="quarantine",
            content=dict(outcome.quarantined),
            redaction_class="quarantined",
        )
    _append_fact(
        owner,
        EventType.OBSERVATION_RECEIVED,
        Actor.CAPABILITY_ADAPTER,
        outcome.error or "ok",
        refs=refs,
        payload={
            "capability": proposal.capability,
            "stage": outcome.stage,
            "attempts": outcome.attempts,
        },
    )


def _append_fact(
    owner: Owner,
    type: EventType,
    actor: Actor,
    reason: str,
    *,
    expected_state: State = State.EXECUTING,
    **kw: Any,
) -> Result | None:
    """Append the result of I/O that already happened, riding out unrelated races."""
    for _ in range(20):
        run = Run.objects.get(pk=owner.run_id)
        if run.owner_epoch != owner.epoch or run.state != expected_state.value:
            return _append(owner, run, type, actor, reason, **kw)
        result = _append(owner, run, type, actor, reason, **kw)
        if not result.conflict:
            return result
    return None


def _execute_effect(owner: Owner, run: Run, proposal: ActionIntent) -> str | None:
    attempt = (
        EffectAttempt.objects.filter(run=run).order_by("-dispatch_sequence", "-created_at").first()
    )
    status = AttemptStatus(attempt.status) if attempt is not None else None
    if attempt is None or status not in effects.RECONCILABLE:
        # The dispatch record is written with proposal.allowed, and every later status
        # commits with the event that leaves EXECUTING: this is an integrity failure.
        _append(
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
        _record_resolution(owner, attempt, resolution, refs={"attempt": attempt.pk})
        return None
    _point(owner, "after_dispatch_record")
    _inject_cancel(owner, "before_effect_dispatch")
    live = _send_gate(owner, attempt)
    if live is None:
        return None
    _point(owner, "after_send_gate")
    invocation = _invocation(live, proposal, fencing_token=attempt.dispatch_sequence)
    outcome = registry.dispatch(invocation, _world(live))
    _point(owner, "after_effect_committed")
    _inject_cancel(owner, "after_effect_dispatch")
    _record_effect_outcome(owner, attempt, proposal, outcome)
    return None


def _send_gate(owner: Owner, attempt: EffectAttempt) -> Run | None:
    """The last cancellation check before the effect leaves: mark the attempt SENDING.

    It locks the dispatch record, as ``run_cancel`` does, so a cancellation either commits
    first (the attempt is then NOT_SENT and nothing is sent) or sees SENDING and qualifies
    itself as ``cancelled_effect_unknown``.
    """
    try:
        with transaction.atomic():
            locked = (
                EffectAttempt.objects.select_for_update()
                .filter(pk=attempt.pk, status=AttemptStatus.DISPATCH_RECORDED)
                .first()
            )
            run = Run.objects.get(pk=owner.run_id)
            if locked is None or is_terminal(run.state) or run.owner_epoch != owner.epoch:
                return None
            EffectAttempt.objects.filter(pk=attempt.pk).update(status=AttemptStatus.SENDING)
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        # Someone else holds the dispatch record (a takeover settling it): send nothing.
        owner.busy = True
        return None
    attempt.status = AttemptStatus.SENDING
    return run


def _record_effect_outcome(
    owner: Owner, attempt: EffectAttempt, proposal: ActionIntent, outcome: Outcome
) -> None:
    """Record what the dispatch answered, as the effect table says (runs/domain/effects.py).

    The attempt's new status commits with the run event that records it. If the run ended
    meanwhile (a cancellation won), the event is refused and the outcome is settled from
    the ledger as ``effect.reconciled`` instead: an effect is never left off the record.
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
        content = _observation(proposal.capability, dict(proposal.args), outcome)
        content["proposal_hash"] = attempt.proposal_hash
        refs["observation"] = evidence.store(run_id=run_id, kind="observation", content=content)
    if outcome.quarantined:
        refs["validation"] = evidence.store(
            run_id=run_id,
            kind="quarantine",
            content=dict(outcome.quarantined),
            redaction_class="quarantined",
        )
    result = _record_resolution(
        owner,
        attempt,
        resolution,
        refs=refs,
        payload={"stage": outcome.stage, "detail": outcome.detail[:300]},
        detail=outcome.detail,
        error=outcome.error,
        answer=outcome.error if outcome.stage == "definite" else "",
        effect_id=refs.get("effect", ""),
    )
    if result is not None and not result.applied and result.snapshot.terminal:
        _record_after_terminal(attempt)


def _record_resolution(
    owner: Owner,
    attempt: EffectAttempt,
    resolution: effects.Resolution,
    *,
    refs: dict[str, str],
    payload: dict[str, Any] | None = None,
    expected_state: State = State.EXECUTING,
    detail: str = "",
    error: str = "",
    answer: str = "",
    effect_id: str = "",
) -> Result | None:
    """Append ``resolution.event`` and move the attempt to ``resolution.status`` in the same
    transaction; refused (nothing written) if the attempt moved meanwhile."""
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

    result = _append_fact(
        owner,
        resolution.event,
        Actor.CAPABILITY_ADAPTER if expected_state is State.EXECUTING else Actor.HARNESS,
        resolution.reason,
        expected_state=expected_state,
        refs=refs,
        payload=payload or {},
        counters_delta={Budget.EFFECTS: 1} if resolution.effect else None,
        within=within,
    )
    if result is not None and result.applied:
        attempt.status = resolution.status
    return result


def _record_after_terminal(attempt: EffectAttempt) -> None:
    """The run ended (cancelled) while the effect was in flight: the obligation stays, so
    reconcile it against the ledger now and append what the ledger proves."""
    from runs import services

    services.effect_obligation_reconcile(attempt_id=attempt.pk)


# -- RECOVERING --------------------------------------------------------------------------
def step_recovering(owner: Owner, run: Run) -> str | None:
    attempt = (
        EffectAttempt.objects.filter(run=run, status__in=effects.RECONCILABLE)
        .order_by("-dispatch_sequence", "-created_at")
        .first()
    )
    if attempt is None:
        _append(
            owner,
            run,
            EventType.RECONCILIATION_UNRESOLVED,
            Actor.HARNESS,
            "no_attempt_to_reconcile",
            payload={"owner": "operator"},
        )
        return None
    proposal = rules.proposal_of(run)
    assert isinstance(proposal, ActionIntent)
    inv = _invocation(run, proposal)
    found = reserve_part.reconcile(
        key=attempt.idempotency_key,
        intent=reserve_part.intent_for(inv),
        world=_world(run),
        fence=run.revision,
    )
    _point(owner, "after_reconciliation_read")
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
    _record_resolution(
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


# -- VERIFYING ---------------------------------------------------------------------------
def step_verifying(owner: Owner, run: Run) -> None:
    assessment = completion.verify(rules.completion_inputs(run))
    assessment_id = evidence.store(
        run_id=str(run.pk),
        kind="assessment",
        content={
            "capability": "verifier",
            "ok": assessment.verdict is completion.Verdict.VERIFIED,
            "error": ""
            if assessment.verdict is completion.Verdict.VERIFIED
            else "COMPLETION_" + assessment.verdict.value.upper(),
            "data": assessment.as_dict(),
        },
    )
    refs = {"completion": assessment_id}
    payload = {"verdict": assessment.verdict.value, "reasons": assessment.reasons[:8]}
    if assessment.verdict is completion.Verdict.VERIFIED:
        assert assessment.artifact is not None
        refs["artifact"] = evidence.store(
            run_id=str(run.pk), kind="artifact", content=dict(assessment.artifact)
        )
        refs["effect"] = assessment.artifact["effect_id"]
        _append(
            owner,
            run,
            EventType.COMPLETION_VERIFIED,
            Actor.HARNESS,
            "all_predicates_pass",
            refs=refs,
            payload=payload,
        )
    elif assessment.verdict is completion.Verdict.MISMATCH:
        payload["owner"] = "operator"
        _append(
            owner,
            run,
            EventType.VERIFICATION_MISMATCH,
            Actor.HARNESS,
            "authoritative_state_contradicts_effect",
            refs=refs,
            payload=payload,
        )
    elif run.counters.get(Budget.CORRECTIONS, 0) < run.budget_limits.get(Budget.CORRECTIONS, 0):
        _append(
            owner,
            run,
            EventType.COMPLETION_REJECTED,
            Actor.HARNESS,
            "completion_insufficient",
            refs=refs,
            payload=payload,
            counters_delta={Budget.CORRECTIONS: 1},
        )
    else:
        _append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            "completion_evidence_missing",
            refs=refs,
            payload=payload,
        )


STEPS: dict[State, Callable[[Owner, Run], str | None]] = {
    State.CREATED: step_created,
    State.OBSERVING: step_observing,
    State.DECIDING: step_deciding,
    State.VALIDATING: step_validating,
    State.EXECUTING: step_executing,
    State.RECOVERING: step_recovering,
    State.VERIFYING: step_verifying,
}
