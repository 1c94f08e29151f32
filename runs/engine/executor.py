"""Where run advancement happens: in this process (embedded default) or on Celery workers.

Both paths run the same ``runner.advance``. Work is only ever enqueued from the durable
outbox (committed with the transition that needs it), so a lost message or a crashed
process loses nothing: the sweeper re-drives whatever the outbox and the leases say.

A kick that cannot be published (the broker is down or unreachable) is not an error: the
publish gives up within the bounded retry policy of ``fieldops/settings.py``, the outbox
rows stay undispatched for the sweeper's re-drive, and whoever listens in this thread
(``undelivered_listener``: the web request's note) is told.

On Celery a waiting run that was just answered (an outbox row of kind ``RESUME``: an
approval decided, a clarification answered, a callback correlated) is published at the
broker's first priority, every other advance (a new run, a re-drive) at a lower one, so
the next free worker takes the run somebody is waiting on before the queued starts:
under load the approver's wait is one task's, not the queue's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db.models import F

from fieldops import telemetry
from fieldops.sql import Statement, param
from kernel import clock
from runs import outbox, rows
from runs.models import Outbox

log = logging.getLogger("fieldops.executor")

# Task priorities on the Redis broker, whose transport serves 0 first, then 3, 6 and 9
# (kombu's ``priority_steps``; a task published without one is 0): a resumed run before
# every queued advance, the sweeper's and beat's own tasks alongside it.
RESUME_PRIORITY = 0
ADVANCE_PRIORITY = 6


def broker_lists(queue: str) -> list[str]:
    """The Redis lists that hold ``queue``'s messages, one per priority step, first served
    first (kombu's naming: the queue's own name for 0, then the name, its separator and the
    step): where to look to count or clear what waits on a queue."""
    from kombu.transport.redis import PRIORITY_STEPS, Channel

    return [f"{queue}{Channel.sep}{step}" if step else queue for step in PRIORITY_STEPS]


_local = threading.local()


def mode() -> str:
    return getattr(_local, "mode", None) or settings.FIELDOPS_EXECUTION


@contextmanager
def inline_here() -> Iterator[None]:
    """Advance in this thread every run this thread hands over meanwhile, whatever
    ``FIELDOPS_EXECUTION`` says: for a script that drives its own runs step by step and
    inspects them between steps (the fault lab), which a Celery worker taking the same
    run at the same moment would race (the script's own advance finds the lease held and
    the run not where the script expects it). Other threads and processes are not
    affected."""
    previous = getattr(_local, "mode", None)
    _local.mode = "inprocess"
    try:
        yield
    finally:
        _local.mode = previous


def kick(run_id: str, outbox_row: int | None = None, kind: str | None = None) -> None:
    """Hand a committed run to the executor now; never raise.

    The work is already durable in the outbox, so nothing the hand-over does may turn the
    committed action into an error for its caller: a failure is logged and the sweeper
    re-drives the run (an undispatched outbox row, or an idle run).
    """
    try:
        enqueue_advance(run_id, outbox_row, kind)
    except Exception:
        log.exception(
            "kick failed after commit; the sweeper re-drives the run", extra={"run_id": run_id}
        )


def enqueue_advance(run_id: str, outbox_row: int | None = None, kind: str | None = None) -> bool:
    """Hand ``run_id`` to the configured executor; return whether it was handed over.

    Celery: publish one ``run_advance`` task, then mark as dispatched ``outbox_row`` (the
    row of ``kind`` the transaction that called for this hand-over wrote), or without one
    the run's outbox rows seen before the publish (a row an earlier hand-over failed to
    deliver is left to the sweeper's re-arm, which covers every pending row); at
    ``RESUME_PRIORITY`` when the row, or one of the rows, is a resume. A publish the
    broker did not take returns False, leaves those rows undispatched (only their
    ``attempts`` grows) and tells this thread's ``undelivered_listener``; it never raises.
    In-process: advance now in this thread. Deferred: nothing is handed over and the
    outbox rows stay pending; whoever set it (the effect explorer) advances runs itself,
    step by step.
    """
    if mode() == "deferred":
        return False
    run_pk = rows.run_pk(run_id)
    if mode() != "celery":
        _DISPATCHED_ALL.write([param(_DISPATCHED_AT, clock.now()), run_pk])
        _advance_inline(run_id)
        return True
    # Rows committed after this point belong to a later kick: only these are covered.
    if outbox_row is not None:
        pending, kinds = [outbox_row], {kind}
    else:
        found = _PENDING.rows([run_pk])
        pending, kinds = [row[0] for row in found], {row[1] for row in found}
    priority = RESUME_PRIORITY if outbox.RESUME in kinds else ADVANCE_PRIORITY
    if not _publish(run_id, priority):
        Outbox.objects.filter(pk__in=pending).update(attempts=F("attempts") + 1)
        _tell_listeners(run_id)
        return False
    for pk in pending:  # one row, nearly always
        _DISPATCHED_ONE.write([param(_DISPATCHED_AT, clock.now()), pk])
    return True


# The hand-over's reads and writes of the outbox, at every kick: prepared statements.
_DISPATCHED_AT = Outbox._meta.get_field("dispatched_at")
_PENDING = Statement("SELECT id, kind FROM runs_outbox WHERE run_id = %s AND dispatched_at IS NULL")
_DISPATCHED_ALL = Statement(
    "UPDATE runs_outbox SET dispatched_at = %s, attempts = attempts + 1 "
    "WHERE run_id = %s AND dispatched_at IS NULL"
)
_DISPATCHED_ONE = Statement(
    "UPDATE runs_outbox SET dispatched_at = %s, attempts = attempts + 1 WHERE id = %s"
)


def _publish(run_id: str, priority: int) -> bool:
    """Publish one run_advance task at ``priority`` on the project's app; False when the
    broker refused.

    Retries and connection timeouts are the settings' (``CELERY_TASK_PUBLISH_RETRY_POLICY``,
    ``CELERY_BROKER_CONNECTION_TIMEOUT``, the transport's socket timeouts), so a broker
    that is down costs a bounded fraction of a second, not the request.
    """
    from runs.engine import tasks

    try:
        with telemetry.run_context(run_id):  # the task headers carry the run's trace
            tasks.run_advance.apply_async(args=[run_id], priority=priority)
    except Exception as exc:  # any broker/transport failure: the outbox keeps the work
        log.warning(
            "kick not delivered; the sweeper re-drives the run",
            extra={"run_id": run_id, "error": f"{type(exc).__name__}: {exc}"[:300]},
        )
        return False
    return True


@contextmanager
def undelivered_listener(callback: Callable[[str], None]) -> Iterator[None]:
    """Call ``callback(run_id)`` for every kick this thread fails to deliver meanwhile."""
    listeners: list[Callable[[str], None]] = getattr(_local, "listeners", [])
    _local.listeners = [*listeners, callback]
    try:
        yield
    finally:
        _local.listeners = listeners


def _tell_listeners(run_id: str) -> None:
    for callback in getattr(_local, "listeners", []):
        callback(run_id)


def _advance_inline(run_id: str) -> None:
    """Advance now in this thread; a nested request (a step that enqueues) runs after."""
    from runs.engine import runner

    pending = getattr(_local, "pending", None)
    if pending is not None:
        pending.append(run_id)
        return
    _local.pending = [run_id]
    try:
        while _local.pending:
            runner.advance(_local.pending.pop(0))  # owned by this process (worker_name)
    finally:
        _local.pending = None
