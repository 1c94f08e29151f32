"""A run that should be moving and is not (its worker's lease expired, or no worker ever
claimed it): the rule the recovery page lists runs by, and the run page's notice.

Apart from ``recovery_selectors`` (which reads operations too) so the run page's reads can
use it without importing the operations app.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from kernel import clock
from runs.domain.states import TERMINAL_STATES, WAITING_STATES
from runs.engine.sweeper import stuck_after
from runs.models import Run


@dataclass(frozen=True)
class Stalled:
    run: Run
    why: str  # "lease expired" (its owner died or froze) or "never claimed" (its kick was lost)
    since: dt.datetime


def run_stalled(run: Run) -> Stalled | None:
    """``run`` as ``recovery_selectors.stalled_runs`` would list it (the same rule, for
    the one run its page shows), or None: the run page says a run no worker moves is not
    moving, instead of showing it "live" beside a state that never changes."""
    if run.state in {s.value for s in TERMINAL_STATES | WAITING_STATES}:
        return None
    now = clock.now()
    after = stuck_after()
    if run.lease_expires_at is not None:
        if run.lease_expires_at < now - after:
            return Stalled(run, "lease expired", run.lease_expires_at)
        return None
    if run.updated_at < now - 2 * after:
        return Stalled(run, "never claimed", run.updated_at)
    return None
