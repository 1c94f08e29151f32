"""Crash and pause drills for worker processes (the crash matrix and stale-owner tests).

A worker started with ``FIELDOPS_CRASH_AT=<point>`` SIGKILLs itself the first time any
run reaches that point (a marker file under ``FIELDOPS_DRILL_DIR`` makes it once per run),
exactly like an OOM kill; with ``FIELDOPS_CRASH_AFTER=<n>`` only after passing it n times
in the process. ``FIELDOPS_PAUSE_AT=<point>:<seconds>`` stalls there once instead,
like a long GC pause. Without those variables nothing is installed.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

POINTS = (
    "after_claim",
    "after_model_response",
    "after_dispatch_record",
    "after_send_gate",
    "world.before_commit",
    "world.after_ledger_insert",
    "world.after_commit",
    "after_effect_committed",
    "after_capability_result",
    "before_ack",
    "operation.item_applied",
    "operation.batch_written",
    "operation.batch_committed",
)

# How often each point was reached in this process (FIELDOPS_CRASH_AFTER=<n> lets a drill
# pass a point n times before it kills the worker: mid-batch, not at its first item).
_reached: dict[str, int] = {}


def _once(point: str, run_id: str) -> bool:
    """Return True the first time (point, run) is seen by any drilled process."""
    directory = Path(os.environ.get("FIELDOPS_DRILL_DIR") or tempfile.gettempdir()) / "drills"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        (directory / f"{run_id}-{point}").touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def drill(point: str, run_id: str) -> None:
    crash = os.environ.get("FIELDOPS_CRASH_AT", "")
    if crash == point:
        _reached[point] = _reached.get(point, 0) + 1
    skip = int(os.environ.get("FIELDOPS_CRASH_AFTER", "0") or "0")
    if crash == point and _reached[point] > skip and _once(point, run_id):
        os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get("FIELDOPS_PAUSE_AT", "")
    if pause:
        name, _, seconds = pause.partition(":")
        if name == point and _once(f"pause-{point}", run_id):
            time.sleep(float(seconds or "5"))


def install_from_env() -> bool:
    """Hook the drills into the named points when a drill variable is set; return True if so."""
    if not (os.environ.get("FIELDOPS_CRASH_AT") or os.environ.get("FIELDOPS_PAUSE_AT")):
        return False
    from fieldops import points

    points.install(drill)
    return True
