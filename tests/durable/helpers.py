from __future__ import annotations

import time
from collections.abc import Iterable

from runs.engine import sweeper
from runs.models import Run


def wait_for(run: Run, states: Iterable[str], *, timeout: float = 40.0, sweep: bool = True) -> Run:
    """Poll until ``run`` reaches one of ``states``; sweep meanwhile (the beat's job)."""
    wanted = set(states)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in wanted:
            return run
        if sweep:
            sweeper.sweep()
        time.sleep(0.3)
    raise AssertionError(f"run {run.pk} stayed {run.state}, wanted {sorted(wanted)}")
