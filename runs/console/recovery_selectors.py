"""Reads for the recovery page: unknown effects and the ledger lookup by key, attempt or effect
id.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from capabilities import ports
from capabilities.ports import LedgerRecord
from runs.domain import effects
from runs.domain.states import State
from runs.models import EffectAttempt


# -- recovery --------------------------------------------------------------------------
def recovery_attempts(*, tenant: str, limit: int = 200) -> list[EffectAttempt]:
    """Attempts with an unknown or conflicting outcome, and every attempt of an escalated run."""
    return list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .filter(Q(status__in=effects.UNRESOLVED) | Q(run__state=State.ESCALATED.value))
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class LedgerLookup:
    query: str
    keys: tuple[str, ...]
    entries: list[LedgerRecord]
    attempts: list[EffectAttempt]


def ledger_lookup(*, tenant: str, query: str) -> LedgerLookup:
    """Find the ledger record and attempts for an idempotency key, attempt id or effect id.

    The ledger is searched in the namespaces of the tenant's runs that used the key.
    """
    query = query.strip()[:64]
    attempts = list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .filter(Q(idempotency_key=query) | Q(pk=query) | Q(effect_id=query))
        .select_related("run")
        .order_by("created_at")[:50]
    )
    keys = tuple(sorted({a.idempotency_key for a in attempts} | {query}))
    more = [
        a
        for a in EffectAttempt.objects.filter(run__tenant=tenant, idempotency_key__in=keys)
        .select_related("run")
        .order_by("created_at")[:50]
    ]
    seen = {a.pk for a in attempts}
    attempts += [a for a in more if a.pk not in seen]
    entries = ports.world().ledger(tenant=tenant, keys=keys, effect_id=query, limit=50)
    return LedgerLookup(query, keys, entries, attempts)
