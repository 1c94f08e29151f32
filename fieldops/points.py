"""Named points in the engine and the world double where a drill may stop a worker.

The runner and the world double call ``reach(point, run_id)`` at the boundaries of a step
(after the claim, after the dispatch record, inside the ledger commit, ...). Production
installs no hook and the call costs one comparison; the crash drills of real worker
processes (``runs/crashpoints.py``) and the in-process schedule explorer install one to
kill, pause or hand over a worker at an exact point.
"""

from __future__ import annotations

from collections.abc import Callable

Hook = Callable[[str, str], None]

HOOK: Hook | None = None


def reach(point: str, run_id: str) -> None:
    if HOOK is not None:
        HOOK(point, run_id)


def install(hook: Hook | None) -> Hook | None:
    """Install ``hook`` (None removes it); return the hook it replaces."""
    global HOOK
    previous, HOOK = HOOK, hook
    return previous


class WorkerKilled(BaseException):
    """Raised by a drill hook to model the worker process dying at a point: the runner
    keeps no promise of cleanup (its lease stays until it expires, as after SIGKILL)."""
