"""Ownership leases: one worker advances a run at a time; stale workers are fenced.

Claiming increments the owner epoch (compare-and-set), so every write a previous owner
attempts afterwards fails the epoch check and is recorded as ``stale_owner.rejected``.
Taking over an expired lease is a recovery: the attempt number increases and a
``run.recovered`` control event records it. A lease whose owner is provably gone (a
process on this host that died: ``liveness.gone``) counts as expired at once, here and in
``end_gone_leases`` (the sweeper's and a starting process's), so a worker or server
killed and started again does not leave its runs waiting out the lease.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import OperationalError, connection, transaction

from fieldops.db import lock_wait_failed
from fieldops.sql import Statement, param
from kernel import clock
from runs import authority, rows
from runs.domain.states import (
    TERMINAL_STATES,
    WAITING_STATES,
    Actor,
    EventType,
    State,
    is_terminal,
    is_waiting,
)
from runs.engine import liveness
from runs.models import Run

log = logging.getLogger("fieldops.runner")


@dataclass(frozen=True)
class Claim:
    run_id: str
    epoch: int
    attempt: int
    worker: str
    recovered: bool
    # The run row as this claim left it (None when a recovery event changed it since): the
    # runner's first step starts from it instead of reading the row again.
    row: Run | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class NotClaimed:
    """Why a claim was not taken (falsy). ``busy``: another transaction holds the run's row
    (a stalled worker, say): the claim skips it instead of waiting behind it."""

    run_id: str
    reason: str  # missing | ended | waiting | held | busy | raced | attempts_exhausted

    def __bool__(self) -> bool:
        return False


# The lease statements: compare-and-set on the owner epoch (and the worker, for renewals
# and releases), prepared once per connection (fieldops/sql.py).
_LEASE_EXPIRES = Run._meta.get_field("lease_expires_at")
_TAKE = Statement(
    "UPDATE runs_run SET owner_epoch = owner_epoch + 1, attempt = %s, lease_owner = %s, "
    "lease_expires_at = %s WHERE id = %s AND owner_epoch = %s"
)
_RENEW = Statement(
    "UPDATE runs_run SET lease_expires_at = %s "
    "WHERE id = %s AND owner_epoch = %s AND lease_owner = %s"
)
# Ending the lease of an owner found gone: a compare-and-set on the owner and its epoch
# (and on the lease still running), so an owner that released, or a recoverer that took
# the run meanwhile, makes it change nothing.
_END = Statement(
    "UPDATE runs_run SET lease_expires_at = %s "
    "WHERE id = %s AND owner_epoch = %s AND lease_owner = %s AND lease_expires_at > %s"
)
_RELEASE = Statement(
    "UPDATE runs_run SET lease_owner = '', lease_expires_at = NULL "
    "WHERE id = %s AND owner_epoch = %s AND lease_owner = %s RETURNING state"
)


# The usual claim as one statement (PostgreSQL): a run that is neither ended nor waiting,
# whose lease is free (never taken, or released) and which is not held by another
# transaction (SKIP LOCKED: never wait), taken with the owner epoch's increment, its row
# returned for the first step. Anything else (no row comes back) takes ``claim``'s
# transaction below, which says why, or recovers an expired lease. Constants only.
_NOT_CLAIMABLE = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL_STATES | WAITING_STATES))
_TAKE_FREE = Statement(
    "UPDATE runs_run SET owner_epoch = owner_epoch + 1, lease_owner = %s, lease_expires_at = %s "  # noqa: S608  # nosec B608
    "WHERE id = (SELECT id FROM runs_run WHERE id = %s FOR NO KEY UPDATE SKIP LOCKED) "
    f"AND state NOT IN ({_NOT_CLAIMABLE}) AND (lease_owner = '' OR lease_expires_at IS NULL) "
    f"AND attempt <= %s RETURNING {rows.RUN_COLUMNS}"
)


def lease_length() -> dt.timedelta:
    return dt.timedelta(seconds=settings.FIELDOPS_LEASE_SECONDS)


def claim(run_id: str, worker: str) -> Claim | NotClaimed:
    """Take ownership of an advanceable run, or say why not (never waits on a lock)."""
    now = clock.now()
    if connection.vendor == "postgresql":
        taken = _TAKE_FREE.one(
            [
                worker,
                param(_LEASE_EXPIRES, now + lease_length()),
                rows.run_pk(run_id),
                settings.FIELDOPS_MAX_ATTEMPTS,
            ]
        )
        if taken is not None:
            row = rows.load_run(taken)
            return Claim(
                run_id=run_id,
                epoch=row.owner_epoch,
                attempt=row.attempt,
                worker=worker,
                recovered=False,
                row=row,
            )
    with transaction.atomic():
        # SKIP LOCKED: a row locked by another transaction reads as absent here. NO KEY:
        # rows that merely reference the run (evidence, attempts) can still be inserted.
        run = rows.run_row_locked(run_id)
        if run is None:
            reason = "busy" if Run.objects.filter(pk=run_id).exists() else "missing"
            return NotClaimed(run_id, reason)
        if is_terminal(run.state):
            return NotClaimed(run_id, "ended")
        if is_waiting(run.state):
            return NotClaimed(run_id, "waiting")
        held = bool(run.lease_owner) and run.lease_expires_at is not None
        if held and run.lease_expires_at > now:  # type: ignore[operator]
            if not liveness.gone(run.lease_owner):
                return NotClaimed(run_id, "held")
            # Its owner died on this host: the lease is over (the compare-and-set on the
            # owner epoch below still decides the takeover).
            log.warning(
                "lease of a dead owner ended early",
                extra={"run_id": run_id, "worker": run.lease_owner, "owner_epoch": run.owner_epoch},
            )
        recovered = held  # a lease that expired (or lost its owner) without release
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
        updated = _TAKE.write(
            [
                new_attempt,
                worker,
                param(_LEASE_EXPIRES, now + lease_length()),
                rows.run_pk(run_id),
                run.owner_epoch,
            ]
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
    row: Run | None = None
    if not recovered:
        # Exactly what the compare-and-set above wrote, on the row read under its lock.
        run.owner_epoch, run.attempt = epoch, new_attempt
        run.lease_owner, run.lease_expires_at = worker, now + lease_length()
        row = run
    return Claim(
        run_id=run_id,
        epoch=epoch,
        attempt=new_attempt,
        worker=worker,
        recovered=recovered,
        row=row,
    )


def renew(c: Claim) -> bool:
    """Extend the lease; False if ownership was lost or the run is held by another
    transaction past the lock timeout (either way the caller must stop)."""
    try:
        renewed = _RENEW.write(
            [
                param(_LEASE_EXPIRES, clock.now() + lease_length()),
                rows.run_pk(c.run_id),
                c.epoch,
                c.worker,
            ]
        )
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        return False
    return renewed == 1


def release(c: Claim) -> str | None:
    """Give the run back and return its state as released (None when it was no longer
    ours; if another transaction holds it, the lease simply expires)."""
    try:
        released = _RELEASE.one([rows.run_pk(c.run_id), c.epoch, c.worker])
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        return None
    return released[0] if released is not None else None


# States a lease can be held in (an ended run's lease went with its terminal event).
_LEASABLE = [s.value for s in State if s not in TERMINAL_STATES]


def end_gone_leases(*, now: dt.datetime | None = None, limit: int = 200) -> list[str]:
    """End at once every running lease whose owner is provably gone (``liveness.gone``: a
    process of this host that died), and return those runs: the caller re-drives them,
    and their next claim takes them over as after any expired lease (``run.recovered``,
    the attempt number up). Every sweep calls this (the embedded server sweeps as soon as
    it starts), and so does a Celery worker as it starts.

    Each lease is ended by a compare-and-set on its owner and owner epoch: an owner that
    released meanwhile, or another sweeper or claim that took the run first, leaves it
    unchanged. Leases of other hosts are never looked at (they are waited out). A run
    whose row a stalled transaction holds is skipped (the next sweep sees it again)."""
    me = liveness.current()
    if me is None:
        return []
    now = now or clock.now()
    leased = Run.objects.filter(
        state__in=_LEASABLE, lease_expires_at__gt=now, lease_owner__contains=f"{me.host}:"
    ).values_list("id", "owner_epoch", "lease_owner")
    ended = []
    for pk, epoch, owner in leased[:limit]:
        if not liveness.gone(owner):
            continue
        expires = param(_LEASE_EXPIRES, now)
        try:
            changed = _END.write([expires, rows.run_pk(pk), epoch, owner, expires])
        except OperationalError as exc:
            if not lock_wait_failed(exc):
                raise
            continue
        if changed == 1:
            log.warning(
                "lease of a dead owner ended early",
                extra={"run_id": str(pk), "worker": owner, "owner_epoch": epoch},
            )
            ended.append(str(pk))
    return ended
