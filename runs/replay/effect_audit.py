"""The exactly-once audit of one run: is every effect the ledger holds on the run's record?

Checked after every schedule of the effect explorer, after the real-process chaos test,
and available to operators (``manage.py explore_effects`` prints it). Each check reads
authoritative records only (the ledger, the event history, the attempts):

- at most one ledger effect per semantic intent and per run;
- every ledger effect is referenced by exactly one recording event of its run
  (``effect.recorded``, ``reconciliation.matched`` or a matched ``effect.reconciled``),
  and no recording event names an effect the ledger does not hold;
- the run's counters (or its terminal record plus what was reconciled after it) count
  exactly the ledger's effects;
- no unresolved attempt of an ended run is left without an owner: the sweeper picks up
  every reconcilable one, an operator every other one;
- event sequences are dense and audit replay finds nothing.
"""

from __future__ import annotations

from collections import Counter

from capabilities import ports
from runs import terminal
from runs.domain import effects
from runs.domain.budgets import Budget
from runs.domain.effects import AttemptStatus
from runs.domain.states import EventType, is_terminal
from runs.models import EffectAttempt, Event, Run
from runs.replay.audit import audit_replay

RECORDING_TYPES = (
    EventType.EFFECT_RECORDED.value,
    EventType.RECONCILIATION_MATCHED.value,
    EventType.EFFECT_RECONCILED.value,
)


def effect_violations(run: Run, *, swept: bool = True) -> list[str]:
    """Every broken exactly-once promise of ``run``, as readable sentences (empty: sound).

    ``swept``: the sweeper has had its turn since the run ended, so an attempt it would
    reconcile by itself must not be left unresolved.
    """
    run.refresh_from_db()
    problems: list[str] = []
    ledger = ports.world().ledger(namespace=run.namespace, run_id=str(run.pk))
    if len(ledger) > 1:
        problems.append(f"{len(ledger)} ledger effects for one run")
    per_key = Counter(e.idempotency_key for e in ledger)
    problems += [f"{n} effects under key {k[:12]}" for k, n in per_key.items() if n > 1]

    recorded: Counter[str] = Counter()
    for type_, refs, payload in Event.objects.filter(run=run, type__in=RECORDING_TYPES).values_list(
        "type", "refs", "payload"
    ):
        if effects.records_effect(type_, payload.get("outcome", "")) and refs.get("effect"):
            recorded[refs["effect"]] += 1
    held = {e.effect_id for e in ledger}
    for effect_id in sorted(held):
        if recorded[effect_id] != 1:
            problems.append(
                f"ledger effect {effect_id} is referenced by {recorded[effect_id]} recording "
                "events of its run (must be exactly 1)"
            )
    for effect_id in sorted(set(recorded) - held):
        problems.append(f"the run records effect {effect_id}, which the ledger does not hold")

    if is_terminal(run.state):
        account = terminal.effect_account(run)
        if account.total != len(ledger):
            problems.append(
                f"terminal record counts {account.counted_at_end} effect(s) and "
                f"{account.reconciled_after_end} reconciled since; the ledger holds {len(ledger)}"
            )
        left = EffectAttempt.objects.filter(run=run, status__in=effects.UNRESOLVED)
        for attempt in left:
            status = AttemptStatus(attempt.status)
            # UNRESOLVED means the ledger could not answer: the sweeper keeps asking.
            if swept and status in effects.SWEEPER_PICKUP - {AttemptStatus.UNRESOLVED}:
                problems.append(f"attempt {attempt.pk} is still {status} after the sweeper's turn")
            elif status not in effects.SWEEPER_PICKUP | effects.OPERATOR_OWNED:
                problems.append(f"attempt {attempt.pk} ({status}) has no owner")
    elif run.counters.get(Budget.EFFECTS, 0) != sum(recorded.values()):
        problems.append(
            f"counter effects={run.counters.get(Budget.EFFECTS, 0)} but "
            f"{sum(recorded.values())} recording event(s)"
        )

    sequences = list(
        Event.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True)
    )
    if sequences != list(range(1, run.revision + 1)):
        problems.append("event sequences are not dense")
    _, findings = audit_replay(run)
    problems += [f"audit replay: {f.kind}@{f.sequence}: {f.detail}" for f in findings]
    return problems
