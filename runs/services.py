"""Run writes used by the console, commands and workers: create, cancel, change budget,
start a follow-up, record effect obligations. Each is one service call ending in an event.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, OperationalError, transaction

from capabilities import common, ports, registry
from catalog.domain import versions
from catalog.models import Lifecycle, Source
from fieldops import sql
from fieldops.db import lock_wait_failed
from fieldops.sql import Statement
from kernel import clock, retry
from kernel.canonical import digest
from kernel.text import (
    bidi_control_refusal,
    nothing_shown_note,
    quoted_shortly,
    shows_nothing,
)
from runs import authority, authority_batch, outbox, policies, terminal
from runs.domain import effects
from runs.domain.budgets import DEFAULT_LIMITS, Budget, validate_limits
from runs.domain.effects import AttemptStatus
from runs.domain.events import RunConfig
from runs.domain.states import Actor, EventType, State, is_terminal
from runs.domain.task import CONTRACT_VERSION, POLICY_VERSION
from runs.engine.inputs import pinned_ref
from runs.models import EffectAttempt, Event, Evidence, Run, RunStartKey
from runs.policies import vocabularies

DEFAULT_OBJECTIVE = (
    "Diagnose the seal weep on {equipment} and reserve one compatible spare part at {location}."
)


class RunInputError(ValueError):
    """Bad input to a run service: nothing was written. ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


# The most a person may write as the reason of a cancellation or a budget change (the
# console's forms declare it as their maxlength). A longer reason is refused, never cut:
# what the person wrote is recorded whole or not at all.
REASON_MAX = 500
# The largest limit an operator may record for a budget (about 11.6 days of elapsed_ms);
# a limit is shown on the run page and copied into every later event's budget snapshot.
BUDGET_LIMIT_MAX = 1_000_000_000


def clean_reason(reason: str, *, what: str) -> str:
    """Return the reason of ``what`` ("a cancellation") as it will be recorded: stripped,
    line breaks as a browser counts them (a form sends CRLF for each). Raise RunInputError
    on ``reason`` when it is empty, longer than REASON_MAX or holds a bidirectional control
    character (``kernel.text``); nothing is written then."""
    reason = (reason or "").replace("\r\n", "\n").strip()
    if shows_nothing(reason):
        raise RunInputError("reason", f"{what} needs a reason{nothing_shown_note(reason)}")
    if len(reason) > REASON_MAX:
        raise RunInputError(
            "reason",
            f"a reason may be at most {REASON_MAX} characters and this one has "
            f"{len(reason)}; nothing was changed. Shorten it and send it again",
        )
    refused = bidi_control_refusal(reason)
    if refused:
        raise RunInputError(
            "reason", f"{refused}; nothing was changed. Remove it and send it again"
        )
    return reason


# The versions a new run may pin, in the model's order (CapabilityVersion.Meta.ordering).
_ADMITTED_REVIEWED = Statement(
    "SELECT capability_id, version, digest, lifecycle FROM catalog_capabilityversion "
    "WHERE lifecycle = %s AND source = %s ORDER BY capability_id, version"
)


def pinned_components(components: Mapping[str, str] | None = None) -> dict[str, str]:
    """Pin, per capability, the newest ADMITTED reviewed version the code can dispatch
    (``version#digest``): the pinning rule of ``catalog.domain.versions``.

    DEPRECATED versions serve only runs already pinned to them; retired, rejected,
    deferred and discovered versions never enter a new run.
    """
    if components is not None:
        return dict(components)
    found = _ADMITTED_REVIEWED.rows([Lifecycle.ADMITTED.value, Source.REVIEWED.value])
    offered = [
        versions.Offer(capability_id, version, digest_, lifecycle)
        for capability_id, version, digest_, lifecycle in found
        if registry.contract_for(capability_id, version) is not None
    ]
    return {
        cid: pinned_ref(offer.version, offer.digest)
        for cid, offer in versions.newest_admitted(offered).items()
    }


def run_create(
    *,
    scenario: str,
    tenant: str,
    principal_ref: str,
    requested_by: Any = None,
    equipment_id: str | None = None,
    location_id: str | None = None,
    quantity: int = 1,
    scope: Sequence[str] | None = None,
    limits: Mapping[str, int] | None = None,
    fault_plan: Sequence[Mapping[str, Any]] | None = None,
    namespace: str | None = None,
    vocabulary: str = "openai",
    adapter_version: str | None = None,
    components: Mapping[str, str] | None = None,
    follows_run: Run | None = None,
    deadline_seconds: int | None = None,
    start: bool = True,
    start_key: StartKey | None = None,
) -> Run:
    """Create a run (CREATED, revision 0) with its request evidence; enqueue it to start.

    The run pins the current adapter of ``vocabulary``, or ``adapter_version`` (an
    installed earlier version of the same vocabulary: a simulation of a recorded run reads
    its outputs as the recording did).
    Raise RunInputError on any invalid input; nothing is written then. With ``start_key``
    the key is recorded with the run in its transaction (``run_start_once``): a second run
    under the same key is an IntegrityError, and nothing of it is written.
    """
    scenario_problem = policies.scenario_problem(scenario, vocabulary)
    if scenario_problem:
        raise RunInputError("scenario", scenario_problem)
    reference = ports.world().reference
    namespace = namespace or reference.live_namespace
    if tenant not in reference.tenants:
        raise RunInputError("tenant", f"unknown tenant {quoted_shortly(tenant)}")
    principal_problem = _principal_problem(principal_ref)
    if principal_problem:
        raise RunInputError("principal_ref", principal_problem)
    tenant_locations = reference.locations_of(tenant)
    if location_id is None:  # not given (an empty one is refused, as equipment's is)
        location_id = tenant_locations[0]
    if location_id not in tenant_locations:
        # Another tenant's location exists, but this tenant's run may not name it.
        raise RunInputError("location_id", f"unknown location {quoted_shortly(location_id)}")
    tenant_equipment = reference.equipment_of(tenant)
    if equipment_id is None and tenant_equipment:
        equipment_id = tenant_equipment[0]
    if equipment_id not in tenant_equipment:
        # Another tenant's equipment too: the world would deny the run every read of it.
        raise RunInputError("equipment_id", f"unknown equipment {quoted_shortly(equipment_id)}")
    if not isinstance(quantity, int) or isinstance(quantity, bool) or not 1 <= quantity <= 50:
        raise RunInputError("quantity", "quantity must be a whole number from 1 to 50")
    merged = {**DEFAULT_LIMITS, **(limits or {})}
    problem = validate_limits(merged)
    if problem:
        raise RunInputError("limits", problem)
    try:
        plan = ports.world().parse_fault_plan(fault_plan)
    except ports.FaultPlanError as exc:
        raise RunInputError("fault_plan", str(exc)) from exc
    try:
        current = vocabularies.get(vocabulary)
        if (
            adapter_version is not None
            and vocabularies.for_version(adapter_version).name != vocabulary
        ):
            raise ValueError(f"adapter {adapter_version!r} does not read {vocabulary!r}")
    except ValueError as exc:
        raise RunInputError("vocabulary", str(exc)) from exc
    adapter_version = adapter_version or current.adapter_version
    pins = pinned_components(components)
    if not pins:
        raise RunInputError("components", "no admitted capability versions to pin")
    now = clock.now()
    run_id = uuid.uuid4()
    granted = list(scope) if scope is not None else [location_id, "effect:reserve_part"]
    limits_out = {k: int(v) for k, v in merged.items()}
    deadline = now + dt.timedelta(seconds=deadline_seconds or limits_out[Budget.ELAPSED_MS] / 1000)
    config = RunConfig(
        run_id=str(run_id),
        task_id=f"task-{run_id.hex[:12]}",
        contract_version=CONTRACT_VERSION,
        policy_version=POLICY_VERSION,
        model_adapter_version=adapter_version,
        component_set=digest(pins)[:16],
        tenant=tenant,
        principal_ref=principal_ref,
        scope=tuple(granted),
        limits=limits_out,
        deadline=clock.iso(deadline),
        created_at=clock.iso(now),
    )
    objective = DEFAULT_OBJECTIVE.format(equipment=equipment_id, location=location_id)
    with transaction.atomic():
        run = Run(
            id=run_id,
            task_id=config.task_id,
            scenario=scenario,
            objective=objective,
            contract_version=config.contract_version,
            policy_version=config.policy_version,
            model_adapter_version=config.model_adapter_version,
            component_set=config.component_set,
            components=pins,
            tenant=tenant,
            principal_ref=principal_ref,
            scope=granted,
            limits=limits_out,
            budget_limits=limits_out,
            counters={b.value: 0 for b in Budget},
            deadline=deadline,
            created_at=now,
            updated_at=now,
            fault_plan=plan,
            namespace=namespace,
            follows_run=follows_run,
            requested_by=requested_by,
            last_hash=config.genesis_hash(),
            state=State.CREATED.value,
        )
        sql.insert(run)
        request = {
            "capability": "request",
            "ok": True,
            "error": "",
            "data": {
                "objective": objective,
                "equipment_id": equipment_id,
                "location_id": location_id,
                "symptom": "seal weep at the impeller housing",
                "quantity": quantity,
                "follows_run": str(follows_run.pk) if follows_run else "",
            },
            "observed_at": clock.iso(now),
        }
        sql.insert(
            Evidence(
                id=f"rq-{run_id.hex[:20]}",
                run=run,
                kind="request",
                content=request,
                content_hash=digest(request),
                size=len(str(request)),
                created_at=now,
            )
        )
        if start_key is not None:
            sql.insert(
                RunStartKey(
                    tenant=tenant,
                    principal_ref=principal_ref,
                    key=start_key.key,
                    request_digest=start_key.request_digest,
                    run=run,
                    created_at=now,
                )
            )
        if start:
            outbox.put(run_id=str(run.pk))
    return run


@dataclass(frozen=True)
class StartKey:
    """A start request's key and the digest of what it asked (see ``RunStartKey``)."""

    key: str
    request_digest: str


@dataclass(frozen=True)
class StartResult:
    run: Run
    created: bool  # False: an earlier request with the same key started ``run``


START_KEY_MAX = 64


def run_start_once(
    *,
    key: str,
    scenario: str,
    tenant: str,
    principal_ref: str,
    requested_by: Any = None,
    equipment_id: str | None = None,
    location_id: str | None = None,
    quantity: int = 1,
    follows_run: Run | None = None,
    namespace: str | None = None,
) -> StartResult:
    """Start a run once per ``key`` of this principal: the same key again (a double click,
    a client retrying after a lost response) answers the run the first request started,
    even when both arrive at the same moment. Raise RunInputError for a malformed key, or
    a key already used for a different request (nothing is written then)."""
    if not 1 <= len(key) <= START_KEY_MAX or not (key.isascii() and key.isprintable()):
        raise RunInputError(
            "start_key", f"a start key is 1 to {START_KEY_MAX} printable ASCII characters"
        )
    asked = {
        "scenario": scenario,
        "equipment_id": equipment_id or "",
        "location_id": location_id or "",
        "quantity": quantity,
    }
    if follows_run is not None:  # a follow-up's key is no key for another run's follow-up
        asked["follows_run"] = str(follows_run.pk)
    wanted = StartKey(key, digest(asked))

    def started() -> StartResult | None:
        found = (
            RunStartKey.objects.select_related("run")
            .filter(tenant=tenant, principal_ref=principal_ref, key=key)
            .first()
        )
        if found is None:
            return None
        if found.request_digest != wanted.request_digest:
            raise RunInputError(
                "start_key_reused",
                f"the key {key!r} already started run {found.run.short_id} with a different "
                "request; use a new key for a new run",
            )
        return StartResult(found.run, created=False)

    earlier = started()
    if earlier is not None:
        return earlier
    try:
        run = run_create(
            scenario=scenario,
            tenant=tenant,
            principal_ref=principal_ref,
            requested_by=requested_by,
            equipment_id=equipment_id,
            location_id=location_id,
            quantity=quantity,
            namespace=namespace,
            follows_run=follows_run,
            start_key=wanted,
        )
    except IntegrityError:
        # Another request with this key committed its run first: answer that one.
        earlier = started()
        if earlier is None:
            raise
        return earlier
    return StartResult(run, created=True)


# The capability contracts carry the run's principal to every tool; a run whose principal
# they would refuse could never call one, so it is refused before it is created.
PRINCIPAL_MAX = int(common.TRUSTED_READ_FIELDS["principal_ref"]["maxLength"])
# A user's reference (access.roles.principal_ref_of): "user:" and a Django user name.
USER_REF = re.compile(r"user:[\w.@+-]+")


def _principal_problem(principal_ref: str) -> str:
    if not isinstance(principal_ref, str) or not principal_ref.strip():
        return "a run needs a principal"
    if len(principal_ref) > PRINCIPAL_MAX:
        return (
            f"the principal {principal_ref[:24]!r}... is {len(principal_ref)} characters; a "
            f"run's principal may be at most {PRINCIPAL_MAX} (the capability contracts carry "
            "it to every tool): use a shorter user name"
        )
    if not principal_ref.isprintable():
        return "a run's principal must not contain control characters"
    if not USER_REF.fullmatch(principal_ref):
        # The context a model reads is redacted of the principal by replacing it in every
        # text (runs.engine.context): a bare "-1" made EQ-17 "EQ[principal]7".
        return (
            f"a run's principal is a user reference, user:NAME (e.g. user:operator), not "
            f"{quoted_shortly(principal_ref)}"
        )
    return ""


@dataclass(frozen=True)
class CancelResult:
    applied: bool
    run: Run
    qualification: str
    refusal: str = ""


def cancel_qualification(run: Run, statuses: Sequence[str] | None = None) -> str:
    """Qualify a cancellation from authoritative records (SPEC §1 Cancellation).

    Call with the run's unsent dispatch records locked (see ``run_cancel``): an attempt
    whose request may have left is ``cancelled_effect_unknown``; one only recorded but not
    yet sent will never be sent once the cancellation commits. ``statuses``: the run's
    attempts' statuses when the caller read them already (read here otherwise).
    """
    if statuses is None:
        statuses = list(EffectAttempt.objects.filter(run=run).values_list("status", flat=True))
    return effects.cancel_qualification(
        effects_counted=run.counters.get(Budget.EFFECTS, 0),
        recovering=run.state == State.RECOVERING.value,
        statuses=statuses,
    )


def run_cancel(
    *,
    run_id: str,
    by_ref: str,
    reason: str,
    actor: Actor = Actor.OPERATOR,
    expected_revision: int | None = None,
) -> CancelResult:
    """Cancel a run now; it takes effect for workers at their next safe point.

    With ``expected_revision`` (the revision the operator was looking at) a run that moved
    meanwhile is not cancelled: the result is a ``revision_conflict`` to review first.
    Without it, the cancellation re-reads and retries until it is recorded. A terminal run
    cannot be cancelled: the attempt is recorded as transition.rejected. A run held by a
    stalled transaction (or changing faster than the retries) answers ``busy``, unwritten.
    Raise RunInputError when the reason is empty or too long (``clean_reason``).
    """
    reason = clean_reason(reason, what="a cancellation")

    def attempt() -> CancelResult | None:
        try:
            return _cancel_once(
                run_id=run_id,
                by_ref=by_ref,
                reason=reason,
                actor=actor,
                expected_revision=expected_revision,
            )
        except OperationalError as exc:
            if not lock_wait_failed(exc):
                raise
            # A stalled transaction holds the run: nothing was written; say so.
            return CancelResult(False, Run.objects.get(pk=run_id), "", "busy")

    outcome = retry.until_settled(attempt, what=f"cancel {run_id}")
    if isinstance(outcome, CancelResult):
        return outcome
    return CancelResult(False, Run.objects.get(pk=run_id), "", "busy")


def cancelled_by(run_id: Any) -> str:
    """Who cancelled ``run_id``, when and why ("user:lead at 2026-12-07 01:30:00 UTC
    (customer withdrew)"), read from its ``run.cancelled`` event; '' for a run never
    cancelled. What a later attempt to decide, answer or cancel it is told."""
    cancel = (
        Event.objects.filter(run_id=run_id, type=EventType.RUN_CANCELLED.value)
        .values("payload", "occurred_at")
        .first()
    )
    if cancel is None:
        return ""
    at = clock.parse(cancel["occurred_at"]).strftime("%Y-%m-%d %H:%M:%S")
    why = cancel["payload"].get("reason", "")
    return f"{cancel['payload'].get('by', '?')} at {at} UTC" + (f" ({why})" if why else "")


def _cancel_once(
    *, run_id: str, by_ref: str, reason: str, actor: Actor, expected_revision: int | None
) -> CancelResult | None:
    """One try of ``run_cancel``: its result, or None after a lost revision race."""
    with transaction.atomic():
        # The run's row first, then its dispatch records: the order of every event's
        # transaction (the compare-and-set, then the attempt it moves). The other order
        # deadlocked with a worker recording its effect's outcome in between (the
        # cancellation held the attempt and waited for the run, the worker the reverse).
        run = Run.objects.select_for_update(no_key=True).get(pk=run_id)
        # Lock the run's unsent dispatch records: the runner's send gate takes the same
        # lock, so either it sends first (effect unknown) or it sees this cancellation.
        pending = list(
            EffectAttempt.objects.select_for_update()
            .filter(run_id=run_id, status=AttemptStatus.DISPATCH_RECORDED)
            .values_list("id", flat=True)
        )
        if expected_revision is not None and run.revision != expected_revision:
            return CancelResult(False, run, "", "revision_conflict")
        qualification = cancel_qualification(run)
        if pending and not is_terminal(run.state):
            effects.check_move(AttemptStatus.DISPATCH_RECORDED, AttemptStatus.NOT_SENT)
            EffectAttempt.objects.filter(pk__in=pending).update(
                status=AttemptStatus.NOT_SENT,
                detail="cancelled before dispatch",
                resolved_at=clock.now(),
            )
        result = authority.append(
            run_id=run_id,
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.RUN_CANCELLED,
            actor=actor,
            reason_code=qualification,
            payload={"reason": reason, "by": by_ref},
        )
        if result.conflict and expected_revision is not None:
            transaction.set_rollback(True)
            return CancelResult(False, run, qualification, "revision_conflict")
        # Undo the NOT_SENT marks of a cancellation that did not apply; a refusal of an
        # ended run keeps its transition.rejected record (nothing was marked then).
        if not result.applied and (result.conflict or not is_terminal(run.state)):
            transaction.set_rollback(True)
    if result.conflict:
        return None
    run.refresh_from_db()
    return CancelResult(result.applied, run, qualification, result.refusal)


def runs_lock(run_ids: Sequence[Any]) -> dict[str, Run]:
    """Lock the runs of ``run_ids`` that no other transaction holds, in the caller's
    transaction (``FOR UPDATE SKIP LOCKED``); return them by id.

    A run another transaction holds (a worker's step, a stalled transaction) is left out
    instead of waited for: a bulk caller asks for it again later, and never refuses it for
    being busy.
    """
    return {
        str(run.pk): run
        for run in Run.objects.select_for_update(skip_locked=True, of=("self",)).filter(
            pk__in=list(run_ids)
        )
    }


def run_cancel_many(
    *, runs: Sequence[Run], by_ref: str, reason: str, actor: Actor = Actor.OPERATOR
) -> dict[str, CancelResult | None]:
    """Cancel each of ``runs`` as ``run_cancel`` cancels one, all in the caller's transaction.

    ``runs`` are rows the caller's transaction holds (``runs_lock``). Per run this does what
    ``_cancel_once`` does: lock its unsent dispatch records, qualify the cancellation from
    its attempts, mark those records NOT_SENT, append ``run.cancelled`` through the
    authority's own decision (``authority_batch``), close the run (terminal record,
    checkpoints, correlations, lease), and keep a refusal's control event only where
    ``run_cancel`` keeps it (an ended run). The writes go in a few multi-row statements.

    Return each run's CancelResult by id, or None for a run with an unsent dispatch record
    another transaction holds (the runner's send gate): nothing is written for it; ask again.
    Raise RunInputError when the reason is empty. ``reason`` is recorded whole: its caller
    (an operation) refused a person's reason over its limit and appended its own reference.
    """
    reason = (reason or "").strip()
    if not reason:
        raise RunInputError("reason", "a cancellation needs a reason")
    ids = [run.pk for run in runs]
    # The unsent dispatch records, locked without waiting: the send gate takes the same
    # lock, so either it sends first (effect unknown) or it sees this cancellation. One the
    # gate holds now leaves its run for a later try, as a locked run is left.
    unsent = dict(
        EffectAttempt.objects.select_for_update(skip_locked=True)
        .filter(run_id__in=ids, status=AttemptStatus.DISPATCH_RECORDED)
        .values_list("id", "run_id")
    )
    statuses: dict[str, list[str]] = {str(pk): [] for pk in ids}
    held: set[str] = set()
    for run_id, attempt_id, status in EffectAttempt.objects.filter(run_id__in=ids).values_list(
        "run_id", "id", "status"
    ):
        statuses[str(run_id)].append(status)
        if status == AttemptStatus.DISPATCH_RECORDED and attempt_id not in unsent:
            held.add(str(run_id))
    asked = [run for run in runs if str(run.pk) not in held]
    qualifications = {
        str(run.pk): cancel_qualification(run, statuses[str(run.pk)]) for run in asked
    }
    decisions = authority_batch.decide_many(
        [
            authority_batch.Request(
                run=run,
                type=EventType.RUN_CANCELLED,
                actor=actor,
                reason_code=qualifications[str(run.pk)],
                payload={"reason": reason, "by": by_ref},
            )
            for run in asked
        ]
    )
    # run_cancel rolls back a cancellation of a live run that did not apply (its NOT_SENT
    # marks and any control event with it); it keeps the refusal recorded on an ended run.
    kept = [d for d in decisions if d.applied or is_terminal(d.snapshot.state)]
    cancelled = {str(d.request.run.pk) for d in decisions if d.applied}
    marked = [pk for pk, run_id in unsent.items() if str(run_id) in cancelled]
    if marked:
        effects.check_move(AttemptStatus.DISPATCH_RECORDED, AttemptStatus.NOT_SENT)
        EffectAttempt.objects.filter(pk__in=marked).update(
            status=AttemptStatus.NOT_SENT,
            detail="cancelled before dispatch",
            resolved_at=clock.now(),
        )
    authority_batch.store_many(kept)
    out: dict[str, CancelResult | None] = {pk: None for pk in held}
    for decision in decisions:
        run = decision.request.run
        out[str(run.pk)] = CancelResult(
            decision.applied, run, qualifications[str(run.pk)], decision.refusal
        )
    return out


def run_budget_change(
    *,
    run_id: str,
    by_ref: str,
    budget: str,
    limit: int,
    reason: str,
    shown_limit: int | None = None,
) -> Run:
    """Record an operator's budget.changed decision (never below what is already used).

    Raise RunInputError on bad input (nothing written) and, with ``field`` ``run``, when the
    run has ended: the authority then recorded the request as ``transition.rejected``
    (a late change is recorded as rejected, as a late cancellation is). ``shown_limit`` is
    the budget's limit the operator's page showed (the run page's form sends it; None binds
    nothing): when the limit is another now (a colleague's change, the same form sent
    twice), nothing is written and the refusal (``field`` ``run``) names who set it.
    """
    reason = clean_reason(reason, what="a budget change")
    if budget not in {b.value for b in Budget}:
        raise RunInputError("budget", f"unknown budget {budget!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= BUDGET_LIMIT_MAX:
        raise RunInputError("limit", f"limit must be a whole number from 0 to {BUDGET_LIMIT_MAX}")

    def attempt() -> Run | None:
        run = Run.objects.get(pk=run_id)
        # An ended run's refusal is the authority's to record (transition.rejected).
        current = int(run.budget_limits.get(budget, 0))
        if shown_limit is not None and current != shown_limit and not is_terminal(run.state):
            raise RunInputError("run", _budget_moved(run, budget, current, shown_limit, by_ref))
        if not is_terminal(run.state) and limit < run.counters.get(budget, 0):
            raise RunInputError("limit", f"{budget} already used {run.counters[budget]}")
        result = authority.append(
            run_id=run_id,
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.BUDGET_CHANGED,
            actor=Actor.OPERATOR,
            reason_code="operator_decision",
            payload={
                "limits": {budget: limit},
                "previous": run.budget_limits.get(budget),
                "reason": reason,
                "by": by_ref,
            },
        )
        if result.applied:
            run.refresh_from_db()
            return run
        if result.busy:
            raise RunInputError("run", "the run is busy (another transaction holds it); try again")
        if result.refusal == "run_terminal":
            raise RunInputError(
                "run",
                f"the run is {result.snapshot.state.value} and its budgets cannot change; the "
                "attempt was recorded as rejected. Start a follow-up run instead",
            )
        if not result.conflict:
            raise RunInputError("run", f"the budget change was refused ({result.refusal})")
        return None

    outcome = retry.until_settled(attempt, what=f"change a budget of {run_id}")
    if isinstance(outcome, Run):
        return outcome
    raise RunInputError("run", "the run kept changing; nothing was recorded, try again")


def _budget_moved(run: Run, budget: str, current: int, shown: int, by_ref: str) -> str:
    """The refusal of a budget change decided on a page that showed ``shown``: the limit
    is ``current`` now, set by whom, when and why (its latest ``budget.changed``)."""
    last = (
        Event.objects.filter(
            run_id=run.pk, type=EventType.BUDGET_CHANGED.value, payload__limits__has_key=budget
        )
        .order_by("-sequence")
        .values("payload", "occurred_at")
        .first()
    )
    by = ""
    if last is not None:
        who = str(last["payload"].get("by", "?"))
        who = f"you ({who})" if who == by_ref else who
        at = clock.parse(last["occurred_at"]).strftime("%Y-%m-%d %H:%M:%S")
        why = last["payload"].get("reason", "")
        by = f", set by {who} at {at} UTC" + (f" ({why})" if why else "")
    return (
        f"the {budget} limit is {current} now{by}; your page showed {shown}. Nothing was "
        "recorded: reload the run to decide on the limit it has now"
    )


def run_follow_up(
    *,
    run: Run,
    by_ref: str,
    requested_by: Any = None,
    scenario: str | None = None,
    key: str | None = None,
) -> StartResult:
    """Start a new governed run that references a terminal one (its own approvals).

    Refused while an effect of the ended run is unknown (reconcile it first), once an
    effect of it exists (a follow-up would reserve again), and while a follow-up in its
    chain is still running or once one has (or may have) reserved
    (``terminal.follow_up_taken``: a second would reserve again). The chain's first run's
    row is locked while this is decided, so two operators starting a follow-up at once
    start one. With ``key`` (the follow-up
    form's one-time key) it starts at most one run, as ``run_start_once``: that form sent
    again answers the run it started.
    """
    if not is_terminal(run.state):
        raise RunInputError("run", "only an ended run can be followed up")
    with transaction.atomic():
        # One follow-up decision at a time per chain of follow-ups (its first run's row),
        # and the ended run's row: a reconciliation appending to it queues behind, so the
        # account read below is the one the follow-up starts on.
        chain = {run.pk, terminal.follow_up_root(run)}
        list(Run.objects.select_for_update(no_key=True).filter(pk__in=chain).order_by("pk"))
        spent = bool(key) and (
            RunStartKey.objects.filter(tenant=run.tenant, principal_ref=by_ref, key=key).exists()
        )
        if not spent:  # a spent key answers (or refuses) as run_start_once says
            _follow_up_allowed(run)
        request = Evidence.objects.get(pk=f"rq-{run.pk.hex[:20]}").content["data"]
        create = {
            "scenario": scenario or run.scenario,
            "tenant": run.tenant,
            "principal_ref": by_ref,
            "requested_by": requested_by,
            "equipment_id": request["equipment_id"],
            "location_id": request["location_id"],
            "quantity": request["quantity"],
            "namespace": run.namespace,
            "follows_run": run,
        }
        if key:
            return run_start_once(key=key, **create)
        return StartResult(run_create(**create), created=True)


CONFLICT_NO_FOLLOW_UP = (
    "a conflict of this run awaits review on Recovery: the ledger holds its key with another "
    "intent (reconciling cannot settle it), so an effect may exist and a follow-up run could "
    "reserve again"
)
REVIEWED_CONFLICT_NO_FOLLOW_UP = (
    "a conflict of this run was reviewed: the ledger holds its key with another intent, so "
    "an effect may exist and a follow-up run could reserve again"
)


def _follow_up_allowed(run: Run) -> None:
    """Raise RunInputError when nothing may follow the ended ``run`` now (see
    ``run_follow_up``)."""
    account = terminal.effect_account(run)
    taken = terminal.follow_up_taken(run)
    allowed = effects.follow_up(
        completed=run.state == State.COMPLETED.value,
        account=account,
        follow_up_taken=taken is not None,
    )
    if "start_follow_up_run" in allowed:
        return
    if account.unresolved > account.conflicts:
        raise RunInputError(
            "run", "an effect of this run is still unknown: reconcile it on Recovery first"
        )
    if account.conflicts and not account.total:
        raise RunInputError(
            "run",
            REVIEWED_CONFLICT_NO_FOLLOW_UP
            if account.conflicts == account.reviewed_conflicts
            else CONFLICT_NO_FOLLOW_UP,
        )
    if taken is not None and not account.total:
        raise RunInputError("run", taken.message)
    raise RunInputError("run", "this run's reservation exists; a follow-up run would reserve again")


# -- effect obligations after a run ended --------------------------------------------------
