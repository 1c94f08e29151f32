"""Where run advancement happens: in this process (embedded default) or on Celery workers.

Both paths run the same ``runner.advance``. Work is only ever enqueued from the durable
outbox (committed with the transition that needs it), so a lost message or a crashed
process loses nothing: the sweeper re-drives whatever the outbox and the leases say.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db.models import F

from fieldops import clock
from runs.models import Outbox

log = logging.getLogger("fieldops.executor")
_local = threading.local()


def mode() -> str:
    return settings.FIELDOPS_EXECUTION


def enqueue_advance(run_id: str) -> None:
    """Hand ``run_id`` to the configured executor and mark its outbox rows dispatched.

    In ``deferred`` mode nothing is handed over and the outbox rows stay pending: whoever
    set it (the effect explorer) advances runs itself, step by step.
    """
    if mode() == "deferred":
        return
    Outbox.objects.filter(run_id=run_id, dispatched_at__isnull=True).update(
        dispatched_at=clock.now(), attempts=F("attempts") + 1
    )
    if mode() == "celery":
        from runs import tasks

        tasks.run_advance.apply_async(args=[run_id])
        return
    _advance_inline(run_id)


def _advance_inline(run_id: str) -> None:
    """Advance now in this thread; a nested request (a step that enqueues) runs after."""
    from runs import runner

    pending = getattr(_local, "pending", None)
    if pending is not None:
        pending.append(run_id)
        return
    _local.pending = [run_id]
    try:
        while _local.pending:
            runner.advance(_local.pending.pop(0), worker="inprocess")
    finally:
        _local.pending = None
