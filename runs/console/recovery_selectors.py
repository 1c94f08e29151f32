"""Reads for the recovery page: unknown effects, runs that should be moving and are not (with
the sweeper's last report), and the ledger lookup by key, attempt or effect id.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from capabilities import ports
from capabilities.ports import LedgerRecord
from kernel import clock
from runs.console.stalls import Stalled
from runs.domain import effects
from runs.domain.states import TERMINAL_STATES, WAITING_STATES, State
from runs.engine.sweeper import stuck_after
from runs.models import EffectAttempt, Run, WorkerHeartbeat


# -- recovery --------------------------------------------------------------------------
def recovery_attempts(*, tenant: str, limit: int = 200) -> list[EffectAttempt]:
    """Attempts with an unknown or conflicting outcome, and every attempt of an escalated run,
    but a conflict an operator marked reviewed (``operations.services.conflict_review``): its
    obligation is closed, and the page lists it under the reviewed conflicts instead."""
    from operations.reviews import reviewed_conflict_ids

    return list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .filter(Q(status__in=effects.UNRESOLVED) | Q(run__state=State.ESCALATED.value))
        .exclude(pk__in=reviewed_conflict_ids())
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )


# -- runs not moving ---------------------------------------------------------------------
def stalled_runs(*, tenant: str, limit: int = 100) -> list[Stalled]:
    """Runs that should be moving and are not, though the sweeper would have handed them
    over by now: a lease that expired more than "stuck after" ago, or no owner and no change
    for twice that (the sweeper re-drives at once and after "stuck after"; under a working
    sweeper a run stays on this list only while every worker is busy or gone)."""
    now = clock.now()
    after = stuck_after()
    # The states that move by themselves, named (not "all but"): the (tenant, state) index
    # then reads only active runs, however many ended ones the tenant has.
    moving = [s.value for s in State if s not in TERMINAL_STATES | WAITING_STATES]
    movable = Run.objects.filter(tenant=tenant, state__in=moving)
    expired = movable.filter(lease_expires_at__lt=now - after).order_by("lease_expires_at")
    idle = movable.filter(lease_expires_at__isnull=True, updated_at__lt=now - 2 * after)
    found = [Stalled(r, "lease expired", r.lease_expires_at) for r in expired[:limit]]
    found += [
        Stalled(r, "never claimed", r.updated_at) for r in idle.order_by("updated_at")[:limit]
    ]
    return sorted(found, key=lambda s: s.since)[:limit]


def stalled_operations(*, tenant: str, limit: int = 50) -> list[tuple[Any, float]]:
    """The tenant's running bulk operations nobody took a batch of for longer than the
    operation sweep waits before it hands them over again (its hand-over was lost, or its
    worker died), with the seconds since the last batch or hand-over."""
    from operations import services as operations
    from operations.models import Operation, Status

    now = clock.now()
    cutoff = now - operations.stale_after() - dt.timedelta(seconds=30)  # 3 beat periods
    found = (
        Operation.objects.filter(tenant=tenant, status=Status.RUNNING, kicked_at__lt=cutoff)
        .exclude(progressed_at__gte=cutoff)
        .order_by("kicked_at")[:limit]
    )
    return [
        (op, (now - max(op.kicked_at, op.progressed_at or op.kicked_at)).total_seconds())
        for op in found
    ]


@dataclass(frozen=True)
class SweeperReport:
    seen_at: dt.datetime | None
    age_s: float | None
    late: bool  # silent for longer than it may be (or never reported)
    # A sweeper started ``started_s`` ago and has not swept since, its first sweep not yet
    # overdue: neither late nor known to be sweeping.
    starting: bool = False
    started_s: float | None = None


def sweeper_report() -> SweeperReport:
    """When the sweeper (Celery beat's sweep, run by a worker) last finished a sweep. Late
    after 3 intervals, and never before 60 s (the alert docs/observability.md suggests).

    A sweeper that announced its start (``sweeper.sweeper_started``: beat's start, the
    embedded server's) and has not swept since is ``starting`` for that same allowance
    from its start, then late: a fresh start is not reported silent before its first sweep
    is even due, and a sweeper that starts but never sweeps still is."""
    beats: dict[str, dt.datetime] = {}
    rows = WorkerHeartbeat.objects.filter(role__in=WorkerHeartbeat.SWEEPER_ROLES)
    for role, at in rows.values_list("role", "seen_at"):
        beats[role] = max(at, beats.get(role, at))
    seen, started = beats.get(WorkerHeartbeat.SWEEPER), beats.get(WorkerHeartbeat.SWEEPER_START)
    now = clock.now()
    allowed = max(60.0, 3 * settings.FIELDOPS_SWEEP_INTERVAL_SECONDS)
    age = (now - seen).total_seconds() if seen is not None else None
    if started is not None and (seen is None or seen < started):
        started_s = (now - started).total_seconds()
        if started_s <= allowed:
            return SweeperReport(seen, age, False, starting=True, started_s=started_s)
    if seen is None or age is None:
        return SweeperReport(None, None, True)
    return SweeperReport(seen, age, age > allowed)


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
