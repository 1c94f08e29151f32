"""Thin Celery wrappers: ids in, one service call. Task names match the services."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from fieldops import clock
from runs import runner, sweeper
from runs.models import WorkerHeartbeat


def _worker() -> str:
    return f"celery@{socket.gethostname()}:{os.getpid()}"


@shared_task(name="runs.tasks.run_advance", acks_late=True, reject_on_worker_lost=True)
def run_advance(run_id: str) -> str:
    WorkerHeartbeat.objects.update_or_create(
        worker=_worker(), defaults={"seen_at": clock.now(), "pid": os.getpid()}
    )
    state = runner.advance(run_id, worker=_worker())
    from runs import crashpoints

    if runner.POINT_HOOK is not None:  # drills only: a crash after the work, before the ack
        crashpoints.drill("before_ack", run_id)
    return state


@shared_task(name="runs.tasks.sweep")
def sweep() -> dict[str, list[str]]:
    return sweeper.sweep().as_dict()


@shared_task(name="runs.tasks.heartbeat")
def heartbeat() -> None:
    WorkerHeartbeat.objects.update_or_create(
        worker=_worker(), defaults={"seen_at": clock.now(), "pid": os.getpid()}
    )
