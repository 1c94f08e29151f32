"""The Celery app. Settings come from Django settings (``CELERY_*``); see README."""

from __future__ import annotations

import logging
import os
import signal

from celery import Celery, Task
from celery.signals import (
    beat_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")


class FieldOpsTask(Task):
    """Every task of the project: a worker checks each of its messages before accepting it
    (a malformed one is refused with one log line and dropped: fieldops/taskmessages.py)."""

    Strategy = "fieldops.taskmessages:checked_strategy"


app = Celery("fieldops", task_cls=FieldOpsTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runs.engine", "catalog", "operations"])
app.conf.beat_schedule = {
    "sweep": {
        "task": "runs.tasks.sweep",
        "schedule": float(os.environ.get("FIELDOPS_SWEEP_INTERVAL_SECONDS", "5")),
    },
    "heartbeat": {"task": "runs.tasks.heartbeat", "schedule": 10.0},
    # Bulk operations whose worker died (or whose hand-over was lost) are handed over again.
    "operation-sweep": {"task": "operations.tasks.operation_sweep", "schedule": 10.0},
    # Re-discovery of every scheduled tool server: drift shows on the catalog page and in
    # the runbook "tool definition changed under an admitted mapping".
    "catalog-rediscover": {
        "task": "catalog.tasks.catalog_rediscover_all",
        "schedule": float(os.environ.get("FIELDOPS_REDISCOVER_INTERVAL_SECONDS", "3600")),
    },
}


@worker_init.connect
def _load_urls(**_: object) -> None:
    """Build the URL resolver's reverse index in the worker's main process, before the pool
    forks: otherwise each pool process builds it (importing every view module and compiling
    every route) at its first ``reverse``, which is the notification link of the first
    approval it opens, inside that approval's transaction, holding the run's row lock."""
    from django.urls import get_resolver

    get_resolver().reverse_dict  # noqa: B018  # built on first access, then kept


@worker_ready.connect
def _recover_gone_owners(**_: object) -> None:
    """A worker starting on a host where a worker was killed (a restart after SIGKILL, an
    OOM kill): the runs whose lease a dead process of this host still holds are handed over
    now, not after the lease runs out (``sweeper.recover_gone_owners``). Never fatal: the
    sweeper does the same every sweep, and the leases expire anyway."""
    from django.db import connections

    from runs.engine import sweeper

    log = logging.getLogger("fieldops.worker")
    try:
        ended = sweeper.recover_gone_owners()
        if ended:
            log.warning("runs of a dead worker handed over at start: %s", ", ".join(ended))
    except Exception:
        log.exception("runs of a dead worker not handed over at start; the sweeper will")
    finally:
        connections.close_all()  # this process advances nothing: it holds no connection


@beat_init.connect
def _sweeper_started(**_: object) -> None:
    """Beat is the sweeper: its start is recorded, so /healthz and the recovery page say
    "starting" (not "silent") until its first sweep is due."""
    from runs.engine import sweeper

    try:
        sweeper.sweeper_started()
    except Exception:
        logging.getLogger("fieldops.sweeper").exception("the sweeper's start not recorded")


@worker_process_init.connect
def _install_drills(**_: object) -> None:
    """Crash/pause drills for the durability tests (inert unless their variables are set)."""
    from sim import crashpoints

    crashpoints.install_from_env()


# -- database connections of a worker process ---------------------------------------------
# A pool process keeps its connection from one task to the next (CELERY_DB_REUSE_MAX stops
# Celery's Django fix-up from closing it around every task). Before each task Django's own
# rule applies, as at the start of a web request: a connection older than
# FIELDOPS_WORKER_CONN_MAX_AGE or left unusable is closed, and a kept one is health-checked
# before its first use. After each task a timer is armed: when no task came for
# FIELDOPS_WORKER_IDLE_DISCONNECT_S the connection is closed, so an idle worker (every run
# waiting) holds none. The timer's signal is handled in the process's main thread while it
# waits for work (a task disarms the timer before it starts), so no query is in flight.
_pool_process = False


@worker_process_init.connect
def _keep_connections(**_: object) -> None:
    global _pool_process
    from django.conf import settings
    from django.db import connections

    for alias in connections:
        connections[alias].settings_dict["CONN_MAX_AGE"] = settings.FIELDOPS_WORKER_CONN_MAX_AGE
    signal.signal(signal.SIGALRM, _disconnect_idle)
    _pool_process = True


def _disconnect_idle(_signum: int, _frame: object) -> None:
    from django.db import connections

    try:
        connections.close_all()
    except Exception:  # a failed close must not kill the idle process; the next task reconnects
        logging.getLogger("fieldops.worker").warning("idle disconnect failed", exc_info=True)


@task_prerun.connect
def _task_starts(**_: object) -> None:
    if not _pool_process:
        return
    from django.db import connections

    signal.setitimer(signal.ITIMER_REAL, 0)
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


@task_postrun.connect
def _task_ended(**_: object) -> None:
    if _pool_process:
        from django.conf import settings

        signal.setitimer(signal.ITIMER_REAL, settings.FIELDOPS_WORKER_IDLE_DISCONNECT_S)
