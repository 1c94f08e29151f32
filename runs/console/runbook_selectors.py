"""The live data incident runbooks show: intents classified by their attempts, effect gates,
recent reasons, stale approvals, fault-lab results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from approvals.models import Checkpoint
from approvals.selectors import EvidenceAge, checkpoint_queue, evidence_ages
from capabilities import ports
from capabilities.ports import LedgerRecord
from capabilities.registry import ALL_CONTRACTS
from catalog.models import CapabilityVersion
from runs.console.filters import DISPOSITIONS
from runs.console.recovery_selectors import recovery_attempts
from runs.domain import effects
from runs.domain.states import EventType, State
from runs.models import EffectAttempt, Event, FaultLabResult, Run

# -- runbooks: live data ----------------------------------------------------------------
INTENT_CLASSES: Mapping[str, str] = {s.value: c for s, c in effects.INTENT_CLASS.items()}


INTENT_CLASS_ORDER = effects.INTENT_CLASS_ORDER


@dataclass(frozen=True)
class IntentRow:
    key: str
    run: Run
    attempts: tuple[EffectAttempt, ...]
    classification: str
    ledger: LedgerRecord | None


def classify_intents(
    attempts: Iterable[EffectAttempt], ledger: Iterable[LedgerRecord]
) -> list[IntentRow]:
    """Group attempts by semantic intent (idempotency key) and classify each intent.

    The worst status wins: conflicting > ambiguous > confirmed > rejected > not dispatched,
    so several spans of one intent count once (effect identity, not call count).
    """
    by_key: dict[str, list[EffectAttempt]] = {}
    for a in attempts:
        by_key.setdefault(a.idempotency_key, []).append(a)
    entries = {e.idempotency_key: e for e in ledger}
    rows = []
    for key, group in by_key.items():
        classes = [INTENT_CLASSES.get(a.status, "ambiguous") for a in group]
        worst = max(classes, key=INTENT_CLASS_ORDER.index)
        rows.append(IntentRow(key, group[0].run, tuple(group), worst, entries.get(key)))
    rows.sort(key=lambda r: (-INTENT_CLASS_ORDER.index(r.classification), r.key))
    return rows


def in_flight_intents(*, tenant: str, limit: int = 200) -> dict[str, Any]:
    """Recent intents of the tenant, classified; plus the counts per class."""
    attempts = list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )
    keys = {a.idempotency_key for a in attempts}
    ledger = ports.world().ledger(tenant=tenant, keys=keys)
    rows = classify_intents(attempts, ledger)
    counts = {c: 0 for c in INTENT_CLASS_ORDER}
    for row in rows:
        counts[row.classification] += 1
    return {"rows": rows, "counts": counts}


def effect_capability_versions(*, tenant: str) -> list[CapabilityVersion]:
    """Stored versions of capabilities that need approval (the effect gates), each with
    ``tenant_open``: the state of ``tenant``'s own gate (the deployment gate is
    ``effect_gate_open``)."""
    from catalog.models import TenantEffectGate

    effect_ids = [c.id for c in ALL_CONTRACTS.values() if c.requires_approval]
    rows = list(CapabilityVersion.objects.filter(capability_id__in=effect_ids))
    closed = set(
        TenantEffectGate.objects.filter(version__in=rows, tenant=tenant, open=False).values_list(
            "version_id", flat=True
        )
    )
    for row in rows:
        row.tenant_open = row.pk not in closed
    return rows


def events_with_reason(
    *, tenant: str, reasons: Iterable[str], types: Iterable[str] = (), limit: int = 50
) -> list[Event]:
    """Recent events of the tenant with one of ``reasons`` (and one of ``types`` if given)."""
    qs = Event.objects.filter(run__tenant=tenant, reason_code__in=list(reasons))
    types = list(types)
    if types:
        qs = qs.filter(type__in=types)
    return list(qs.select_related("run").order_by("-id")[:limit])


def stale_pending_checkpoints(*, tenant: str) -> list[tuple[Checkpoint, list[EvidenceAge]]]:
    """Pending approvals whose evidence has passed its freshness limit while waiting."""
    out = []
    for checkpoint in checkpoint_queue(tenant=tenant):
        ages = evidence_ages(checkpoint)
        if any(a.fresh is False for a in ages):
            out.append((checkpoint, ages))
    return out


def owning_runs(*, tenant: str, limit: int = 100) -> list[Run]:
    """Non-terminal runs that hold an effect attempt (candidates to cancel in an incident)."""
    ids = (
        EffectAttempt.objects.filter(run__tenant=tenant)
        .exclude(run__state__in=[s.value for s in State if s.value in DISPOSITIONS])
        .values("run_id")
    )
    return list(Run.objects.filter(pk__in=ids).order_by("-created_at", "-id")[:limit])


def faultlab_results() -> dict[str, FaultLabResult]:
    return {r.fixture: r for r in FaultLabResult.objects.all()}


def faultlab_result(*, name: str) -> FaultLabResult | None:
    return FaultLabResult.objects.filter(fixture=name).first()


def event_type_values(*types: EventType) -> list[str]:
    return [t.value for t in types]


def _open_tool_drift() -> list[Any]:
    from catalog.selectors import open_drifts

    return open_drifts()


def runbook_blocks(
    *, tenant: str, keys: Iterable[str], fixtures: Iterable[str] = ()
) -> dict[str, Any]:
    """The live data each named runbook block needs (one or two queries per block)."""
    from runs.runbooks import fixture_info

    fixtures = list(fixtures)
    results = {r.fixture: r for r in FaultLabResult.objects.filter(fixture__in=fixtures)}
    producers: dict[str, Any] = {
        "effect_gates": lambda: effect_capability_versions(tenant=tenant),
        "intents": lambda: in_flight_intents(tenant=tenant),
        "owning_runs": lambda: owning_runs(tenant=tenant),
        "unresolved_attempts": lambda: [
            a for a in recovery_attempts(tenant=tenant) if a.status in effects.UNRESOLVED
        ],
        "malformed": lambda: events_with_reason(tenant=tenant, reasons=["MALFORMED_RESULT"]),
        "stale_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["evidence_stale", "STALE", "CONFLICT"],
            types=event_type_values(EventType.PROPOSAL_DENIED, EventType.EFFECT_REJECTED),
        ),
        "stale_checkpoints": lambda: stale_pending_checkpoints(tenant=tenant),
        "repeated_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["repeated_denial", "retry_budget_exhausted"],
            types=event_type_values(EventType.ESCALATION_ADMITTED),
        ),
        "scope_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["scope_denied"],
            types=event_type_values(EventType.PROPOSAL_DENIED),
        ),
        "ledger_outage": lambda: events_with_reason(
            tenant=tenant,
            reasons=["ledger_unavailable"],
            types=event_type_values(EventType.RECONCILIATION_UNRESOLVED),
        ),
        "fixtures": lambda: [(fixture_info(name), results.get(name)) for name in fixtures],
        "tool_drift": _open_tool_drift,
    }
    return {key: producers[key]() for key in keys}
