"""Operator actions the console composes from the run services.

Each is one call for a view: bulk cancellation (one ``run_cancel`` per run, each its own
event), fault-lab fixture runs whose latest result is kept for the review packet, and the
reconciliation of an effect attempt (ledger query for ended runs, a re-drive of the owner
for runs still RECOVERING).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kernel import clock
from runs import outbox, services
from runs.domain.effects import AttemptStatus
from runs.domain.states import EventType, State, is_terminal
from runs.engine import effects as effect_steps
from runs.models import EffectAttempt, Event, Run

BULK_CANCEL_LIMIT = 100


@dataclass(frozen=True)
class BulkCancelRow:
    run_id: str
    applied: bool
    qualification: str
    refusal: str
    state: str
    # For a run someone cancelled first: who, when and why (services.cancelled_by).
    note: str = ""


def run_cancel_many(
    *, tenant: str, run_ids: Iterable[str], by_ref: str, reason: str
) -> list[BulkCancelRow]:
    """Cancel each of the tenant's ``run_ids`` with one reason; report each run's result.

    Ids of other tenants or of no run are reported as ``not_found`` (never disclosed).
    Raise RunInputError when the reason is empty or too long (``services.clean_reason``) or
    no run is selected; no run is cancelled then.
    """
    reason = services.clean_reason(reason, what="a cancellation")
    # Each id in its canonical spelling: the lookup below reads any spelling uuid.UUID
    # does (upper case, no dashes), and the result is reported under the run's own id.
    wanted = list(dict.fromkeys(_canonical_id(str(r)) for r in run_ids))[:BULK_CANCEL_LIMIT]
    if not wanted:
        raise services.RunInputError("runs", "select at least one run")
    owned = {
        str(pk)
        for pk in Run.objects.filter(pk__in=_valid_uuids(wanted), tenant=tenant).values_list(
            "pk", flat=True
        )
    }
    rows = []
    for run_id in wanted:
        if run_id not in owned:
            rows.append(BulkCancelRow(run_id, False, "", "not_found", ""))
            continue
        result = services.run_cancel(run_id=run_id, by_ref=by_ref, reason=reason)
        first = "" if result.applied else services.cancelled_by(run_id)
        rows.append(
            BulkCancelRow(
                run_id,
                result.applied,
                result.qualification if result.applied else "",
                result.refusal,
                result.run.state,
                f"already cancelled by {first}" if first else "",
            )
        )
    return rows


def _canonical_id(value: str) -> str:
    """``value`` as a run id is written (lower case, dashed), or unchanged if it is none."""
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        return value


def _valid_uuids(values: Iterable[str]) -> list[str]:
    import uuid

    out = []
    for value in values:
        try:
            out.append(str(uuid.UUID(value)))
        except ValueError:
            continue
    return out


def _resolved_by(attempt: EffectAttempt) -> str:
    """The refusal of a reconciliation of an attempt already resolved: its outcome, and,
    when a reconciliation resolved it, who recorded it and when; nothing is recorded."""
    event = (
        Event.objects.filter(
            run_id=attempt.run_id,
            type=EventType.EFFECT_RECONCILED.value,
            refs__attempt=attempt.pk,
        )
        .order_by("-sequence")
        .values("payload", "occurred_at")
        .first()
    )
    if event is None:
        return f"already resolved: {attempt.status}; nothing was recorded"
    by = str(event["payload"].get("by", "?"))
    who = "harness (the sweeper)" if by == "harness" else by
    at = clock.parse(event["occurred_at"]).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"already reconciled by {who} at {at} UTC: {attempt.status}"
        + (f" ({attempt.detail})" if attempt.detail else "")
        + "; nothing was recorded"
    )


CONFLICT_IS_FINAL = (
    "a conflict is final: the ledger holds this key with another intent (integrity failure). "
    "Reconciling again cannot change it and no second key is used; the run stays escalated. "
    "Freeze retries and find what failed (runbook: repeated reservation attempts). "
    "Nothing was recorded"
)


@dataclass(frozen=True)
class ReconcileOutcome:
    attempt: EffectAttempt
    action: str  # "reconciled" | "redriven" | "refused"
    detail: str


def effect_attempt_reconcile(*, attempt_id: str, tenant: str, by_ref: str) -> ReconcileOutcome:
    """Resolve one effect attempt of the tenant from the ledger; never dispatch.

    An ended run's obligation is reconciled by a ledger query (effect.reconciled). A run
    still RECOVERING is re-driven, so its owner reconciles under the transition table. A
    run that is otherwise active owns its attempt: the request is refused.
    Raise EffectAttempt.DoesNotExist for another tenant's or an unknown attempt.
    """
    attempt = EffectAttempt.objects.select_related("run").get(pk=attempt_id, run__tenant=tenant)
    run = attempt.run
    if attempt.status == AttemptStatus.CONFLICT.value:
        # Final: the ledger already answered. Reading it again proves nothing new, and
        # saying "reconciled" here would claim an action that did not happen.
        return ReconcileOutcome(attempt, "refused", CONFLICT_IS_FINAL)
    if is_terminal(run.state):
        if not attempt.unresolved:
            return ReconcileOutcome(attempt, "refused", _resolved_by(attempt))
        resolved, recorded = effect_steps.obligation_reconcile_recorded(
            attempt_id=attempt.pk, by_ref=by_ref
        )
        if not recorded and not resolved.unresolved:
            # Someone else recorded it between this read and this record (a colleague, the
            # sweeper): say who, not that this request reconciled it.
            return ReconcileOutcome(resolved, "refused", _resolved_by(resolved))
        return ReconcileOutcome(resolved, "reconciled", resolved.detail or resolved.status)
    if run.state == State.RECOVERING.value:
        outbox.rearm(str(run.pk))
        attempt.refresh_from_db()
        run.refresh_from_db()
        return ReconcileOutcome(
            attempt, "redriven", f"run re-driven; now {run.state}, attempt {attempt.status}"
        )
    return ReconcileOutcome(
        attempt,
        "refused",
        f"the run is {run.state}: its owner reconciles this attempt (the worker running it). "
        "To take it from its owner, cancel the run first (its page, or a runbook's owning "
        "runs step); the attempt it keeps can then be reconciled here. Nothing was recorded",
    )
