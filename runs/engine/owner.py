"""What every step of one owner shares: the claim it holds, and the one way it appends.

A step does its I/O first (policy call, capability call, ledger read), outside any
database transaction, and then appends exactly one event through ``append`` with the
revision and owner epoch it started from. Safe points re-check cancellation (SPEC §1).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capabilities import ports
from capabilities.base import CallOutcome
from capabilities.ports import WorldPort
from fieldops import points
from kernel import clock, retry
from runs import authority, readcache, rows
from runs.authority import Result
from runs.domain import safepoints
from runs.domain.states import Actor, EventType, State, is_terminal
from runs.engine import liveness, ownership
from runs.models import Run

log = logging.getLogger("fieldops.runner")


def worker_name() -> str:
    """This process as a lease owner: ``host:pid`` and when the process started
    (``liveness.owner_name``), so a lease left by a process that died can be told from one
    held by a later process that got the same pid."""
    return liveness.owner_name()


@dataclass
class Owner:
    """The claim this runner holds, plus the hooks the fault lab and tests may set."""

    claim: ownership.Claim
    # The run's fault plan (part of its configuration): the cancellations it schedules at
    # safe points fire once per advance.
    plan: tuple[Mapping[str, Any], ...]
    fired: set[str]
    # Set when an append found the run held by another transaction past the lock
    # timeout: the owner stops and the sweeper re-drives the run.
    busy: bool = False
    # The run row as the last applied ``append`` left it (brought up to date in place by
    # the authority, its compare-and-set proving it current), or None when the last
    # append did not leave a current copy: the runner then reads the row again.
    row: Run | None = None
    # The copy ``take_row`` last handed to a step (or the claim's row), while no safe
    # point has used it, and when: the compare-and-set of this owner's own event (or the
    # claim) proved it current (revision and owner epoch) a moment ago, with no I/O since,
    # so the step's first safe point need not read the row again (see ``safe_point``).
    confirmed: Run | None = None
    confirmed_at: float = 0.0

    def take_row(self) -> Run | None:
        row, self.row = self.row, None
        self.confirm(row)
        return row

    def confirm(self, row: Run | None) -> None:
        """``row`` was shown current just now (this owner's compare-and-set, or its claim)."""
        self.confirmed, self.confirmed_at = row, time.monotonic()

    @property
    def run_id(self) -> str:
        return self.claim.run_id

    @property
    def epoch(self) -> int:
        return self.claim.epoch


def reach_point(owner: Owner, name: str) -> None:
    points.reach(name, owner.run_id)
    if points.HOOK is not None:
        # A drill acted here (it may have handed the run over): nothing stands confirmed.
        owner.confirmed = None


# A step returns PAUSE when the run must wait for something outside it before it can move
# (a commit of its effect still in progress elsewhere): the owner stops and releases the
# run, and the sweeper re-drives it later.
PAUSE = "pause"


def append(
    owner: Owner, run: Run, type: EventType, actor: Actor, reason: str = "", **kw: Any
) -> Result:
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=owner.epoch,
        type=type,
        actor=actor,
        reason_code=reason,
        run=run,  # the row this step read: the authority's CAS proves it current
        **kw,
    )
    if result.busy:
        owner.busy = True
    stored = result.event if result.applied else result.control
    if stored is not None:
        readcache.roll(stored)
    # The caller's copy is current only if the authority decided from it and stored the
    # event (it then applies the event to the copy in place): its revision is the result's.
    current = (
        result.applied
        and result.event is not None
        and run.revision == result.snapshot.revision == result.event.sequence
        and run.owner_epoch == owner.epoch
    )
    owner.row = run if current else None
    return result


def append_fact(
    owner: Owner,
    type: EventType,
    actor: Actor,
    reason: str,
    *,
    expected_state: State = State.EXECUTING,
    run: Run | None = None,
    **kw: Any,
) -> Result | None:
    """Append the result of I/O that already happened, riding out unrelated races; None
    when the run kept changing for ``retry.RACE_RETRIES`` attempts (logged).

    ``run``: the row the caller read before the I/O; the first attempt decides from it (a
    compare-and-set that fails on it re-reads, as every later attempt does)."""
    held = [run] if run is not None else []

    def attempt() -> Result | None:
        run = held.pop() if held else rows.run_row(owner.run_id)
        if run is None:
            raise Run.DoesNotExist(owner.run_id)
        if run.owner_epoch != owner.epoch or run.state != expected_state.value:
            # Not ours any more, or not where the fact belongs: the authority records why.
            return append(owner, run, type, actor, reason, **kw)
        result = append(owner, run, type, actor, reason, **kw)
        return None if result.conflict else result

    outcome = retry.until_settled(attempt, what=f"record {type} on {owner.run_id}")
    return outcome if isinstance(outcome, Result) else None


def inject_cancel(owner: Owner, point: str) -> bool:
    """Fire a cancellation the fault plan scheduled at ``point`` (once per advance);
    whether one was fired."""
    if point in owner.fired or not safepoints.cancellation_scheduled(owner.plan, point):
        return False
    owner.fired.add(point)
    from runs import services

    services.run_cancel(
        run_id=owner.run_id, by_ref="faultlab:scheduled", reason=f"fault lab: cancellation {point}"
    )
    return True


# How long a step's own compare-and-set stands for a safe point's read: far longer than
# the computation between a step's start and its first safe point (milliseconds), far
# shorter than a lease (a takeover needs the lease to have expired).
CONFIRMED_FOR = 1.0


def safe_point(owner: Owner, point: str, run: Run) -> Run | None:
    """Inject a scheduled cancellation at ``point``, then re-check the run: None if we must
    stop. ``run`` is the caller's copy; a narrow read of the revision and owner epoch shows
    whether it is still current (every change to the run's columns but the lease is an
    event, so bumps the revision: a cancellation does). Only when it moved is the whole row
    read again, so cancellation is still seen before every model and capability call.

    A step's first safe point, reached with the copy its predecessor's own event left
    current (``Owner.confirmed``; for an advance's first step, the claim's row) and
    nothing but computation since, takes that compare-and-set (or claim) as its read: it
    proved the revision and owner epoch current a moment earlier, exactly what the read
    would check (a cancellation committed in between is seen by the next safe point or
    refused by the next compare-and-set, as one committed just after a read would be).
    Only once: any later safe point, after I/O, reads; and only while that moment is
    recent (``CONFIRMED_FOR``): a process paused in between (a stop signal, a stalled
    host) reads, as a takeover may have happened meanwhile; and never after a drill point
    a drill acted at (``reach_point``)."""
    fired = inject_cancel(owner, point)
    confirmed, owner.confirmed = owner.confirmed, None
    if not fired and confirmed is run and time.monotonic() - owner.confirmed_at <= CONFIRMED_FOR:
        return None if is_terminal(run.state) else run
    found = rows.run_position(owner.run_id)
    if found is None or found[1] != owner.epoch:
        return None
    if found[0] != run.revision or run.owner_epoch != owner.epoch:
        fresh = rows.run_row(owner.run_id)
        if fresh is None:
            return None
        run = fresh
    if is_terminal(run.state) or run.owner_epoch != owner.epoch:
        return None
    return run


def world_of(run: Run) -> WorldPort:
    return ports.for_run(run.namespace, str(run.pk), run.fault_plan)


def observation_content(
    capability: str, args: dict[str, Any], outcome: CallOutcome
) -> dict[str, Any]:
    return {
        "capability": capability,
        "args": args,
        "ok": outcome.ok,
        "data": dict(outcome.data),
        "error": outcome.error,
        "stage": outcome.stage,
        "detail": outcome.detail[:500],
        "attempts": outcome.attempts,
        "observed_at": clock.iso(clock.now()),
    }
