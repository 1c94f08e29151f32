"""The terminal record of a run, written in the transaction of its terminal event (SPEC §7).

Exactly one per run, never edited: disposition, reason, deciding event, versions, final
counters, cancel revision, what stays unresolved and what may follow. Open waits are closed
with it; apps that keep their own rows for a run close them through ``register_closer``.
"""

from __future__ import annotations

from collections.abc import Callable

from kernel import clock
from runs.domain import effects
from runs.domain.budgets import Budget
from runs.domain.events import EventRecord
from runs.domain.states import Disposition, EventType
from runs.models import Correlation, EffectAttempt, Event, Run, TerminalRecord

# (run, terminal event) -> what that app leaves unresolved, e.g. [{"checkpoint": "cp-..."}]
Closer = Callable[[Run, EventRecord], list[dict[str, str]]]
_CLOSERS: list[Closer] = []


def register_closer(closer: Closer) -> None:
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)


_OWNERS = {
    Disposition.COMPLETED: "none",
    Disposition.FAILED: "operator",
    Disposition.CANCELLED: "operator",
    Disposition.ESCALATED: "operator",
}


def close(run: Run, event: EventRecord) -> None:
    """Write the terminal record and close open waits, in the terminal event's transaction.

    Other apps close what they keep for the run through ``register_closer`` (approvals:
    its pending checkpoints) and name what stays unresolved.
    """
    now = clock.now()
    unresolved_attempts = list(
        EffectAttempt.objects.filter(run=run, status__in=effects.UNRESOLVED).values_list(
            "id", flat=True
        )
    )
    unresolved_elsewhere = [item for closer in _CLOSERS for item in closer(run, event)]
    Correlation.objects.filter(run=run, status="OPEN").update(
        status="EXPIRED" if event.type is EventType.EXTERNAL_EXPIRED else "CLOSED"
    )
    disposition = Disposition(event.next_state.value)
    account = effects.EffectAccount(
        counted_at_end=int(event.budget.get(Budget.EFFECTS, 0)),
        reconciled_after_end=0,
        unresolved=len(unresolved_attempts),
    )
    follow_up = effects.follow_up(completed=disposition is Disposition.COMPLETED, account=account)
    TerminalRecord.objects.create(
        run=run,
        disposition=disposition.value,
        reason_code=event.reason_code,
        deciding_sequence=event.sequence,
        versions={
            "contract": run.contract_version,
            "policy": run.policy_version,
            "model_adapter": run.model_adapter_version,
            "component_set": run.component_set,
            "components": run.components,
        },
        final_counters=dict(event.budget),
        cancel_revision=event.cancel_revision,
        unresolved=[{"attempt": a} for a in unresolved_attempts] + unresolved_elsewhere,
        evidence_complete=True,
        owner=str(event.payload.get("owner") or _OWNERS[disposition]),
        allowed_follow_up=list(follow_up),
        artifact_id=event.refs.get("artifact", ""),
        created_at=now,
    )
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)


def effect_account(run: Run) -> effects.EffectAccount:
    """The effects of an ended run: counted by its terminal record, reconciled since, and
    still unknown (SPEC §7: terminal records are never edited; corrections are appended)."""
    return effect_account_with(run, TerminalRecord.objects.filter(run=run).first())


def effect_account_with(run: Run, record: TerminalRecord | None) -> effects.EffectAccount:
    """``effect_account`` for a caller that has read the run's terminal record (``record``,
    None if it has none). Both reads are served by partial indexes (``event_run_reconciled``,
    ``attempt_run_unresolved``): they cost the same at any history length."""
    counted = int((record.final_counters if record else run.counters).get(Budget.EFFECTS, 0))
    after = record.deciding_sequence if record else run.revision
    reconciled = sum(
        1
        for payload in Event.objects.filter(
            run=run, type=EventType.EFFECT_RECONCILED.value, sequence__gt=after
        ).values_list("payload", flat=True)
        if effects.records_effect(EventType.EFFECT_RECONCILED, payload.get("outcome", ""))
    )
    # Sorted: the exact list of ``attempt_run_unresolved`` (models.UNRESOLVED_STATUSES), which
    # SQLite needs term for term to use the partial index.
    unresolved = EffectAttempt.objects.filter(
        run=run, status__in=sorted(effects.UNRESOLVED)
    ).count()
    return effects.EffectAccount(counted, reconciled, unresolved)
