"""The sweeper: re-drives what must move and enforces deadlines kept in PostgreSQL.

Exactly one sweeper runs (Celery beat in production, a thread in the embedded server).
Every sweep is idempotent: it only acts through the authority's compare-and-set, so two
overlapping sweeps cannot both act on the same run.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, OperationalError
from django.db.models import Q

from approvals import notify
from approvals import services as approvals
from approvals.models import Checkpoint
from fieldops import telemetry
from fieldops.db import lock_wait_failed
from kernel import clock
from runs import authority, outbox
from runs.domain import effects
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.states import TERMINAL_STATES, WAITING_STATES, Actor, EventType, State
from runs.engine import effects as effect_steps
from runs.engine import ownership
from runs.models import Correlation, EffectAttempt, Run, WorkerHeartbeat

log = logging.getLogger("fieldops.sweeper")


# A run that should be moving but shows no owner and no change for this long is re-driven
# (its message was lost, or the process that would advance it died before claiming).
def stuck_after() -> dt.timedelta:
    return dt.timedelta(seconds=settings.FIELDOPS_STUCK_AFTER_SECONDS)


@dataclass
class SweepReport:
    redriven: list[str] = field(default_factory=list)
    expired_checkpoints: list[str] = field(default_factory=list)
    expired_waits: list[str] = field(default_factory=list)
    deadlines: list[str] = field(default_factory=list)
    obligations: list[str] = field(default_factory=list)
    # Runs whose lease was ended early because its owner, a process of this host, is
    # provably gone (also in ``redriven``).
    owners_gone: list[str] = field(default_factory=list)
    # Items skipped because a stalled transaction held their rows (retried next sweep).
    busy: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "redriven": self.redriven,
            "expired_checkpoints": self.expired_checkpoints,
            "expired_waits": self.expired_waits,
            "deadlines": self.deadlines,
            "obligations": self.obligations,
            "owners_gone": self.owners_gone,
            "busy": self.busy,
        }


T = TypeVar("T")


def sweeper_started() -> None:
    """Record that a sweeper starts now (before its first sweep)."""
    WorkerHeartbeat.objects.update_or_create(
        worker="sweeper:start",
        defaults={
            "seen_at": clock.now(),
            "role": WorkerHeartbeat.SWEEPER_START,
            "pid": os.getpid(),
        },
    )


def _bounded(report: SweepReport, item: str, act: Callable[..., T], **kwargs: Any) -> T | None:
    """Run one sweep action, ``act(**kwargs)``; a lock wait that gave up (a stalled
    transaction holds the item's rows) is reported as busy and retried by the next sweep,
    never raised."""
    try:
        return act(**kwargs)
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        log.warning("sweep item busy", extra={"item": item})
        report.busy.append(item)
        return None


@telemetry.traced_sweep
def sweep(*, now: dt.datetime | None = None, limit: int = 200) -> SweepReport:
    now = now or clock.now()
    report = SweepReport()
    _expire_checkpoints(now, limit, report)
    _expire_waits(now, limit, report)
    _enforce_deadlines(now, limit, report)
    _reconcile_obligations(limit, report)
    _redrive(now, limit, report)
    _notify(now)
    WorkerHeartbeat.objects.update_or_create(
        worker="sweeper", defaults={"seen_at": clock.now(), "role": WorkerHeartbeat.SWEEPER}
    )
    return report


def _expire_checkpoints(now: dt.datetime, limit: int, report: SweepReport) -> None:
    for checkpoint_id in Checkpoint.objects.filter(
        status=Checkpoint.Status.PENDING, expires_at__lte=now
    ).values_list("id", flat=True)[:limit]:
        if _bounded(
            report, checkpoint_id, approvals.checkpoint_expire, checkpoint_id=checkpoint_id
        ):
            report.expired_checkpoints.append(checkpoint_id)


def _notify(now: dt.datetime) -> None:
    """Queue "about to expire" notices and attempt due notification deliveries (bounded:
    a slow receiver delays this sweep by at most its timeout per delivery)."""
    try:
        notify.checkpoints_remind(now=now)
        notify.deliveries_send_due(now=now)
    except DatabaseError:
        log.exception("notification deliveries skipped this sweep")


def _expire_waits(now: dt.datetime, limit: int, report: SweepReport) -> None:
    for correlation in Correlation.objects.filter(status="OPEN", deadline__lte=now).select_related(
        "run"
    )[:limit]:
        if _bounded(report, correlation.pk, expire_wait, correlation=correlation, now=now):
            report.expired_waits.append(correlation.pk)


def expire_wait(correlation: Correlation, *, now: dt.datetime | None = None) -> bool:
    """Expire one open wait whose deadline passed: external.expired moves its run to
    ESCALATED. A correlation its run no longer waits on is just closed."""
    if correlation.status != "OPEN" or correlation.deadline > (now or clock.now()):
        return False
    run = correlation.run
    if run.state != State.WAITING_EXTERNAL.value or run.waiting_correlation != correlation.pk:
        Correlation.objects.filter(pk=correlation.pk).update(status="EXPIRED")
        return False
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.EXTERNAL_EXPIRED,
        actor=Actor.CLOCK,
        reason_code="wait_expired",
        refs={"correlation": correlation.pk},
        payload={"owner": "operator"},
    )
    return result.applied


def _enforce_deadlines(now: dt.datetime, limit: int, report: SweepReport) -> None:
    overdue = (
        Run.objects.filter(deadline__lt=now)
        .exclude(state__in=[s.value for s in TERMINAL_STATES])
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
    )
    for run in overdue[:limit]:
        result = _bounded(
            report,
            str(run.pk),
            authority.append,
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=EventType.RUN_FAILED,
            actor=Actor.CLOCK,
            reason_code=exhausted_reason(Budget.ELAPSED_MS),
            payload={"owner": "operator"},
        )
        if result is not None and result.applied:
            report.deadlines.append(str(run.pk))
        elif result is not None and result.busy:
            report.busy.append(str(run.pk))


def _reconcile_obligations(limit: int, report: SweepReport) -> None:
    """Effect attempts left unknown by a run that ended (e.g. cancelled mid-dispatch)."""
    attempts = EffectAttempt.objects.filter(
        status__in=effects.SWEEPER_PICKUP,
        run__state__in=[s.value for s in TERMINAL_STATES],
    ).values_list("pk", flat=True)
    for attempt_id in attempts[:limit]:
        resolved = _bounded(
            report, attempt_id, effect_steps.obligation_reconcile, attempt_id=attempt_id
        )
        if resolved is not None and resolved.status not in effects.SWEEPER_PICKUP:
            report.obligations.append(attempt_id)


def recover_gone_owners() -> list[str]:
    """At a Celery worker's start: re-drive at once the runs whose lease a dead process of
    this host still held (the runs the killed worker this one replaces was advancing), as
    a sweep's re-drive does. (The embedded server sweeps as soon as it starts instead.)"""
    ended = ownership.end_gone_leases()
    for run_id in ended:
        outbox.rearm(run_id)
    return ended


def _redrive(now: dt.datetime, limit: int, report: SweepReport) -> None:
    # A lease whose owner died on this host ends now instead of at its expiry.
    report.owners_gone = ownership.end_gone_leases(now=now, limit=limit)
    candidates = set(report.owners_gone)
    candidates |= set(outbox.pending_run_ids(created_before=now - stuck_after() / 2, limit=limit))
    movable = Run.objects.exclude(state__in=[s.value for s in TERMINAL_STATES | WAITING_STATES])
    expired = movable.filter(lease_expires_at__lt=now)
    idle = movable.filter(lease_expires_at__isnull=True, updated_at__lt=now - stuck_after())
    for run_id in list(expired.values_list("id", flat=True)[:limit]) + list(
        idle.values_list("id", flat=True)[:limit]
    ):
        candidates.add(str(run_id))
    for run_id in sorted(candidates):
        outbox.rearm(run_id)
        report.redriven.append(run_id)
