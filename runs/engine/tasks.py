"""Thin Celery wrappers: ids in, one service call. Task names match the services."""

from __future__ import annotations

import logging
import os
import time

from celery import shared_task

from fieldops import points
from fieldops.taskmessages import canonical_id
from kernel import clock
from runs.engine import liveness, runner, sweeper
from runs.models import WorkerHeartbeat

log = logging.getLogger("fieldops.runner")


def _worker() -> str:
    """This pool process as a lease owner (``celery@host:pid:start:scope``)."""
    return liveness.owner_name("celery@")


# A worker busy with runs reports itself at most this often (each report is a commit).
HEARTBEAT_EVERY_S = 5.0
_last_heartbeat: float | None = None


def _heartbeat_due() -> bool:
    global _last_heartbeat
    now = time.monotonic()  # operational pacing, not a governed decision: the real clock
    if _last_heartbeat is not None and now - _last_heartbeat < HEARTBEAT_EVERY_S:
        return False
    _last_heartbeat = now
    return True


@shared_task(name="runs.tasks.run_advance", acks_late=True, reject_on_worker_lost=True)
def run_advance(run_id: str) -> str:
    canonical = canonical_id(run_id)
    if canonical is None:
        # A message no outbox wrote (a hand-made or corrupted one): nothing to advance,
        # said once, not a traceback and a failed task.
        log.warning("run_advance refused: %r is not a run id", str(run_id)[:80])
        return "MISSING"
    run_id = canonical
    if _heartbeat_due():
        WorkerHeartbeat.objects.update_or_create(
            worker=_worker(), defaults={"seen_at": clock.now(), "pid": os.getpid()}
        )
    state = runner.advance(run_id, worker=_worker())
    points.reach("before_ack", run_id)  # drills only: a crash after the work, before the ack
    return state


@shared_task(name="runs.tasks.sweep")
def sweep() -> dict[str, list[str]]:
    return sweeper.sweep().as_dict()


@shared_task(name="runs.tasks.heartbeat")
def heartbeat() -> None:
    WorkerHeartbeat.objects.update_or_create(
        worker=_worker(), defaults={"seen_at": clock.now(), "pid": os.getpid()}
    )
