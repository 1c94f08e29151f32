"""Ownership leases: one worker advances a run at a time; stale workers are fenced.

Claiming increments the owner epoch (compare-and-set), so every write a previous owner
attempts afterwards fails the epoch check and is recorded as ``stale_owner.rejected``.
Taking over an expired lease is a recovery: the attempt number increases and a
``run.recovered`` control event records it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import F

from fieldops.db import lock_wait_failed
from kernel import clock
from runs import authority
from runs.domain.states import Actor, EventType, is_terminal, is_waiting
from runs.models import Run


@dataclass(frozen=True)
class Claim:
    run_id: str
    epoch: int
    attempt: int
    worker: str
    recovered: bool


@dataclass(frozen=True)
class NotClaimed:
    """Why a claim was not taken (falsy). ``busy``: another transaction holds the run's row
    (a stalled worker, say): the claim skips it instead of waiting behind it."""

    run_id: str
    reason: str  # missing | ended | waiting | held | busy | raced | attempts_exhausted

    def __bool__(self) -> bool:
        return False


def lease_length() -> dt.timedelta:
    return dt.timedelta(seconds=settings.FIELDOPS_LEASE_SECONDS)


def claim(run_id: str, worker: str) -> Claim | NotClaimed:
    """Take ownership of an advanceable run, or say why not (never waits on a lock)."""
    now = clock.now()
    with transaction.atomic():
        # SKIP LOCKED: a row locked by another transaction reads as absent here. NO KEY:
        # rows that merely reference the run (evidence, attempts) can still be inserted.
        run = Run.objects.select_for_update(skip_locked=True, no_key=True).filter(pk=run_id).first()
        if run is None:
            reason = "busy" if Run.objects.filter(pk=run_id).exists() else "missing"
            return NotClaimed(run_id, reason)
        if is_terminal(run.state):
            return NotClaimed(run_id, "ended")
        if is_waiting(run.state):
            return NotClaimed(run_id, "waiting")
        held = bool(run.lease_owner) and run.lease_expires_at is not None
        if held and run.lease_expires_at > now:  # type: ignore[operator]
            return NotClaimed(run_id, "held")
        recovered = held  # a lease that expired without release: the owner failed
        new_attempt = run.attempt + 1 if recovered else run.attempt
        if new_attempt > settings.FIELDOPS_MAX_ATTEMPTS:
            # A run that keeps killing its workers must not loop through redeliveries.
            authority.append(
                run_id=run_id,
                expected_revision=run.revision,
                expected_epoch=None,
                type=EventType.RUN_FAILED,
                actor=Actor.HARNESS,
                reason_code="recovery_attempts_exhausted",
                payload={"attempts": run.attempt, "owner": "operator"},
            )
            return NotClaimed(run_id, "attempts_exhausted")
        updated = Run.objects.filter(pk=run_id, owner_epoch=run.owner_epoch).update(
            owner_epoch=F("owner_epoch") + 1,
            attempt=new_attempt,
            lease_owner=worker,
            lease_expires_at=now + lease_length(),
        )
        if updated != 1:
            return NotClaimed(run_id, "raced")
        epoch = run.owner_epoch + 1
        if recovered:
            authority.append_control(
                run_id=run_id,
                type=EventType.RUN_RECOVERED,
                actor=Actor.HARNESS,
                reason_code="lease_expired",
                payload={
                    "previous_owner": run.lease_owner,
                    "previous_epoch": run.owner_epoch,
                    "new_epoch": epoch,
                    "attempt": new_attempt,
                    "worker": worker,
                },
            )
    return Claim(
        run_id=run_id, epoch=epoch, attempt=new_attempt, worker=worker, recovered=recovered
    )


def renew(c: Claim) -> bool:
    """Extend the lease; False if ownership was lost or the run is held by another
    transaction past the lock timeout (either way the caller must stop)."""
    try:
        renewed = Run.objects.filter(pk=c.run_id, owner_epoch=c.epoch, lease_owner=c.worker).update(
            lease_expires_at=clock.now() + lease_length()
        )
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        return False
    return renewed == 1


def release(c: Claim) -> None:
    """Give the run back; if another transaction holds it, the lease simply expires."""
    try:
        Run.objects.filter(pk=c.run_id, owner_epoch=c.epoch, lease_owner=c.worker).update(
            lease_owner="", lease_expires_at=None
        )
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
