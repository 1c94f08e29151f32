"""The step of each state but the effect's: CREATED, OBSERVING, DECIDING, VALIDATING,
EXECUTING (reads), VERIFYING. Each does its I/O, then appends one event.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

from capabilities import registry
from kernel import clock
from runs import authority, evidence
from runs.authority import new_id
from runs.domain import completion, validation
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.proposals import ActionIntent, ObserveIntent, Proposal, to_dict
from runs.domain.states import Actor, EventType, State
from runs.domain.task import CONTRACT_VERSION
from runs.engine import context, inputs, visibility
from runs.engine import effects as effect_steps
from runs.engine.owner import (
    Owner,
    append,
    append_fact,
    inject_cancel,
    log,
    observation_content,
    reach_point,
    safe_point,
    world_of,
)
from runs.models import Correlation, Run


def step_created(owner: Owner, run: Run) -> None:
    from runs.domain.budgets import validate_limits

    problem = validate_limits(run.limits)
    if run.contract_version != CONTRACT_VERSION:
        problem = problem or "contract_version_unknown"
    if not run.components:
        problem = problem or "no_capabilities_pinned"
    if problem:
        append(owner, run, EventType.RUN_FAILED, Actor.HARNESS, problem)
        return
    append(
        owner,
        run,
        EventType.RUN_STARTED,
        Actor.HARNESS,
        "contract_valid",
        refs={"observation": request_evidence_id(run)},
        # The exact capability versions this run pinned: it dispatches these until it ends.
        payload={"components": dict(run.components)},
    )


def request_evidence_id(run: Run) -> str:
    return f"rq-{run.pk.hex[:20]}"


def step_observing(owner: Owner, run: Run) -> None:
    ref = run.pending_observation
    found = evidence.get(ref) if ref else None
    if found is None or str(found.run_id) != str(run.pk):
        append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            "observation_evidence_missing",
            payload={"observation": ref},
        )
        return
    append(
        owner,
        run,
        EventType.OBSERVATION_RECORDED,
        Actor.HARNESS,
        "admitted",
        refs={"observation": ref},
        payload={"kind": found.kind, "content_hash": found.content_hash},
    )


def step_deciding(owner: Owner, run: Run) -> None:
    from runs.policies import boundary, resolve

    live = safe_point(owner, "before_model_dispatch", run)
    if live is None:
        return
    run = live
    policy, vocabulary = resolve(run)
    dispatched = dispatch_record(owner, run)
    if dispatched is None:
        return  # the run failed for want of turns
    projection, projection_hash, context_id, uncharged = dispatched
    # Nothing a model sends may stop the run (issue 14 item 8): a raising policy is a
    # provider failure, the raw output is stored (bounded) before it is parsed, and any
    # adapter failure is a typed rejection. See runs/policies/boundary.py.
    output = boundary.call_policy(policy, projection)
    reach_point(owner, "after_model_response")
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
    reading = boundary.read_output(vocabulary, output, kinds, projection)
    proposal: Proposal = reading.proposal
    refs = {"proposal": "", "raw_output": raw_id, "observation": context_id}
    # Written with the proposal's event (the context and the raw output are on record
    # already: before the call, and before the output was parsed).
    made: list[evidence.Made] = []
    if reading.commentary:
        # The preamble rule: text beside the call is evidence on the timeline, not authority.
        made.append(
            evidence.make(
                run_id=str(run.pk),
                kind="commentary",
                content=boundary.commentary_evidence(reading, output, raw_id),
            )
        )
        refs["commentary"] = made[-1].id
    made.append(evidence.make(run_id=str(run.pk), kind="proposal", content=to_dict(proposal)))
    refs["proposal"] = made[-1].id
    # The safe point after the model's answer is the proposal's own compare-and-set: it
    # decides from the copy read before the call, and if anything moved meanwhile (a
    # cancellation, a takeover) it fails, the row is read again and the authority records
    # why the proposal is refused (``append_fact``), as a re-read here would have shown.
    inject_cancel(owner, "after_model_response")
    result = append_fact(
        owner,
        EventType.PROPOSAL_EMITTED,
        Actor.MODEL,
        proposal.kind,
        expected_state=State.DECIDING,
        run=run,
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
        evidence=made,
    )
    if result is not None and not result.applied:
        log.info("proposal not admitted: %s", result.refusal, extra={"run_id": owner.run_id})


class DispatchRecord(NamedTuple):
    projection: dict[str, Any]
    projection_hash: str
    context_id: str
    uncharged: int


def dispatch_record(owner: Owner, run: Run) -> DispatchRecord | None:
    """Store the model call's context, its dispatch record; None when the run failed for
    want of turns instead.

    A turn is a model call, counted at dispatch (SPEC §1, Budgets). The context is stored
    before the call, so a call whose worker died before the proposal was recorded is
    charged too: on the next recorded proposal, or on the failure that ends the run for
    want of turns. Usually every call made so far is charged (as many contexts as turns
    counted): the context is then stored on that condition, which the insert's own
    statement checks, and the calls are not counted separately. Only when it fails (a
    dead worker's call) or a budget looks spent are the calls counted first.
    """
    if _spent(run, uncharged=0) is None:
        stored = _store_context(run, uncharged=0, stored_so_far=run.counters.get(Budget.TURNS, 0))
        if stored is not None:
            return stored
    uncharged = uncharged_turns(run)
    spent = _spent(run, uncharged)
    if spent is not None:
        delta = {Budget.TURNS: uncharged} if uncharged else None
        append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            exhausted_reason(spent),
            counters_delta=delta,
        )
        return None
    stored = _store_context(run, uncharged)
    assert stored is not None  # stored unconditionally
    return stored


def _spent(run: Run, uncharged: int) -> Budget | None:
    """The first of turns and proposals ``run`` has used up, with ``uncharged`` calls."""
    for budget in (Budget.TURNS, Budget.PROPOSALS):
        used = run.counters.get(budget, 0) + (uncharged if budget is Budget.TURNS else 0)
        if used >= run.budget_limits.get(budget, 0):
            return budget
    return None


def _store_context(
    run: Run, uncharged: int, *, stored_so_far: int | None = None
) -> DispatchRecord | None:
    """Store the context a call with ``uncharged`` calls before it is shown; with
    ``stored_so_far``, only while the run has exactly that many (None if not: nothing
    is stored)."""
    projection = context.build(run, uncharged_turns=uncharged)
    # One canonical text of the projection: the decision's context hash and the stored
    # context's content hash are both its sha256 (a projection holds only JSON values).
    text = context.projection_text(projection)
    context_id = evidence.store_if_count(
        run_id=str(run.pk), kind="context", content=projection, canonical=text, count=stored_so_far
    )
    if context_id is None:
        return None
    return DispatchRecord(projection, context.text_hash(text), context_id, uncharged)


def uncharged_turns(run: Run) -> int:
    """Model calls made for ``run`` whose turn is not on its counter yet.

    Every call stores its context first (one ``context`` evidence row per call) and the
    proposal event charges the turn, so the difference is the calls whose worker died in
    between.
    """
    calls = evidence.count(str(run.pk), "context")
    return max(0, calls - run.counters.get(Budget.TURNS, 0))


def step_validating(owner: Owner, run: Run) -> None:
    live = safe_point(owner, "before_capability_admission", run)
    if live is None:
        return
    run = live
    proposal = inputs.proposal_of(run)
    ctx = inputs.validation_context(run)
    decision = validation.validate(ctx, proposal)
    payload: dict[str, Any] = {**decision.as_payload(), "proposal_kind": proposal.kind}
    if isinstance(proposal, (ObserveIntent, ActionIntent)):
        payload["capability"] = proposal.capability
        payload["args_digest"] = validation.request_digest(ctx, proposal)
    refs = {"proposal": run.current_proposal}
    outcome = decision.outcome
    if outcome is validation.ValidationOutcome.FAIL:
        append(
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
        append(
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
        outcome is validation.ValidationOutcome.EXECUTE
        and isinstance(proposal, ActionIntent)
        and (registry.ALL_CONTRACTS[proposal.capability].requires_approval)
    ):
        attempt_id = new_id("at")
        refs["attempt"] = attempt_id
        within = effect_steps.record_dispatch(owner, ctx, attempt_id)
    elif outcome is validation.ValidationOutcome.APPROVAL:
        checkpoint_id = new_id("cp")
        refs["checkpoint"] = checkpoint_id
        within = open_approval(run, ctx, checkpoint_id)
    elif outcome is validation.ValidationOutcome.CLARIFY:
        checkpoint_id = new_id("cp")
        refs["checkpoint"] = checkpoint_id
        within = open_clarification(run, proposal, checkpoint_id)
    elif outcome is validation.ValidationOutcome.WAIT:
        correlation_id = new_id("co")
        refs["correlation"] = correlation_id
        within = open_correlation(owner, run, proposal, correlation_id)
    if outcome is validation.ValidationOutcome.ESCALATE:
        payload["owner"] = "operator"
    append(
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


def open_approval(
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


def open_clarification(run: Run, proposal: Proposal, checkpoint_id: str) -> authority.Within:
    from approvals import services as approvals

    def within(run: Run, event: Any) -> None:
        approvals.checkpoint_open_clarification(
            run=run,
            checkpoint_id=checkpoint_id,
            opened_sequence=event.sequence,
            question=getattr(proposal, "question", ""),
        )

    return within


def open_correlation(
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


def step_executing(owner: Owner, run: Run) -> None:
    proposal = inputs.proposal_of(run)
    if not isinstance(proposal, (ObserveIntent, ActionIntent)):
        append(owner, run, EventType.RUN_FAILED, Actor.HARNESS, "executing_without_request")
        return
    contract = inputs.pinned_contract(run, proposal.capability)
    if contract is not None and contract.requires_approval:
        effect_steps.execute_effect(owner, run, proposal)
        return
    live = safe_point(owner, "before_capability_admission", run)
    if live is None:
        return
    outcome = registry.dispatch(effect_steps.invocation_for(live, proposal), world_of(live))
    reach_point(owner, "after_capability_result")
    content = observation_content(proposal.capability, dict(proposal.args), outcome)
    # Written with the event that records the result (a retry offers them again).
    made = [evidence.make(run_id=str(run.pk), kind="observation", content=content)]
    refs = {"observation": made[0].id}
    if outcome.quarantined:
        made.append(
            evidence.make(
                run_id=str(run.pk),
                kind="quarantine",
                content=dict(outcome.quarantined),
                redaction_class="quarantined",
            )
        )
        refs["validation"] = made[-1].id
    append_fact(
        owner,
        EventType.OBSERVATION_RECEIVED,
        Actor.CAPABILITY_ADAPTER,
        outcome.error or "ok",
        run=live,
        refs=refs,
        payload={
            "capability": proposal.capability,
            "stage": outcome.stage,
            "attempts": outcome.attempts,
        },
        evidence=made,
    )


def step_verifying(owner: Owner, run: Run) -> None:
    assessment = completion.verify(inputs.completion_inputs(run))
    # The assessment (and the artifact) are written with the event that records the verdict.
    made = [
        evidence.make(
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
    ]
    refs = {"completion": made[0].id}
    payload = {"verdict": assessment.verdict.value, "reasons": assessment.reasons[:8]}
    if assessment.verdict is completion.Verdict.VERIFIED:
        assert assessment.artifact is not None
        made.append(
            evidence.make(run_id=str(run.pk), kind="artifact", content=dict(assessment.artifact))
        )
        refs["artifact"] = made[-1].id
        refs["effect"] = assessment.artifact["effect_id"]
        append(
            owner,
            run,
            EventType.COMPLETION_VERIFIED,
            Actor.HARNESS,
            "all_predicates_pass",
            refs=refs,
            payload=payload,
            evidence=made,
        )
    elif assessment.verdict is completion.Verdict.MISMATCH:
        payload["owner"] = "operator"
        append(
            owner,
            run,
            EventType.VERIFICATION_MISMATCH,
            Actor.HARNESS,
            "authoritative_state_contradicts_effect",
            refs=refs,
            payload=payload,
            evidence=made,
        )
    elif run.counters.get(Budget.CORRECTIONS, 0) < run.budget_limits.get(Budget.CORRECTIONS, 0):
        append(
            owner,
            run,
            EventType.COMPLETION_REJECTED,
            Actor.HARNESS,
            "completion_insufficient",
            refs=refs,
            payload=payload,
            counters_delta={Budget.CORRECTIONS: 1},
            evidence=made,
        )
    else:
        append(
            owner,
            run,
            EventType.RUN_FAILED,
            Actor.HARNESS,
            "completion_evidence_missing",
            refs=refs,
            payload=payload,
            evidence=made,
        )
