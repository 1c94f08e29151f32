"""One owner advancing one run: claim it, then one step per state until it waits or ends.

``advance`` claims the run (new owner epoch), then runs the step of its current state
(``steps.py``; the effect and its reconciliation in ``effects.py``) until the run waits,
ends, pauses, becomes busy or ownership is lost. The lease is renewed as it goes and
released at the end (by the run's own end, when it ended), except when the worker "dies"
(a drill), exactly as after SIGKILL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fieldops import points, telemetry
from kernel import clock
from runs import readcache, rows
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.states import Actor, EventType, State, is_terminal, is_waiting
from runs.engine import effects as effect_steps
from runs.engine import ownership, steps
from runs.engine.owner import PAUSE, Owner, append, reach_point, worker_name
from runs.models import Run

log = logging.getLogger("fieldops.runner")

MAX_STEPS = 400


@telemetry.traced_advance
def advance(run_id: str, *, worker: str | None = None, max_steps: int = MAX_STEPS) -> str:
    """Advance ``run_id`` until it waits, ends, pauses or ownership is lost; return its state.

    A run that cannot be claimed (owned, waiting, ended, or locked by a stalled
    transaction) is left alone: the refusal is logged and the run's state returned.
    """
    claim = ownership.claim(run_id, worker or worker_name())
    if not isinstance(claim, ownership.Claim):
        log.info("claim refused: %s", claim.reason, extra={"run_id": run_id})
        return rows.run_state(run_id) or "MISSING"
    run = claim.row or rows.run_row(run_id)
    if run is None:
        ownership.release(claim)
        return "MISSING"
    owner = Owner(claim=claim, plan=tuple(run.fault_plan), fired=set())
    # The claim's own statement (or the read just after it) showed this copy current with
    # the new owner epoch: the first step's first safe point need not read it again.
    owner.confirm(run)
    try:
        reach_point(owner, "after_claim")
        # Reads made once per advance: the run's recorded history at a revision, evidence
        # rows, the catalog the model is shown (runs/readcache.py).
        with readcache.scope():
            last = _loop(owner, max_steps, run)
    except points.WorkerKilled:
        # The process "died" (a drill): its lease stays until it expires, like after SIGKILL.
        raise
    except BaseException:
        ownership.release(owner.claim)
        raise
    if last is not None and is_terminal(last.state):
        # The run's end released its lease in the same transaction (runs/terminal.py), and
        # an ended run is never claimed again: nothing to give back, nothing to read.
        return last.state
    return ownership.release(owner.claim) or rows.run_state(run_id) or "MISSING"


def _loop(owner: Owner, max_steps: int, first: Run) -> Run | None:
    """Run steps until the run waits, ends, pauses or is no longer ours; return the copy
    of the row that showed it (None when the loop stopped for another reason).

    Each step starts from the row its predecessor's applied append brought up to date in
    place (``owner.row``): the compare-and-set of that event proved the copy current at
    its revision, and every later write by anyone bumps the revision or the owner epoch,
    which the next append's compare-and-set checks. Whenever the last step did not end in
    such an append (a refusal, a lost race, a control event, an append the authority had
    to decide from a fresh read, an append outside ``owner.append``), the row is read
    again. Safe points re-check before a model or capability call (``owner.safe_point``).
    """
    renewed_at = clock.now()
    run: Run | None = first
    for _ in range(max_steps):
        if run is None:
            run = rows.run_row(owner.run_id)
            if run is None:
                return None
        if run.owner_epoch != owner.epoch or is_terminal(run.state) or is_waiting(run.state):
            return run
        if clock.now() > run.deadline:
            append(
                owner,
                run,
                EventType.RUN_FAILED,
                Actor.CLOCK,
                exhausted_reason(Budget.ELAPSED_MS),
            )
            run = owner.take_row()
            continue
        owner.row = None
        if STEP_FOR_STATE[State(run.state)](owner, run) == PAUSE or owner.busy:
            return None
        run = owner.take_row()
        # Renew once a third of the lease has passed, not after every step (a commit
        # each). Ownership is still checked every step: every append compares the owner
        # epoch, a re-read stops at an epoch change, and nobody can claim while the lease
        # is unexpired.
        if clock.now() - renewed_at >= ownership.lease_length() / 3:
            if not ownership.renew(owner.claim):
                return None
            renewed_at = clock.now()
    return None


STEP_FOR_STATE: dict[State, Callable[[Owner, Run], str | None]] = {
    State.CREATED: steps.step_created,
    State.OBSERVING: steps.step_observing,
    State.DECIDING: steps.step_deciding,
    State.VALIDATING: steps.step_validating,
    State.EXECUTING: steps.step_executing,
    State.RECOVERING: effect_steps.step_recovering,
    State.VERIFYING: steps.step_verifying,
}
