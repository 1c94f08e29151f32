"""The Celery app. Settings come from Django settings (``CELERY_*``); see README."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")

app = Celery("fieldops")
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


@worker_process_init.connect
def _install_drills(**_: object) -> None:
    """Crash/pause drills for the durability tests (inert unless their variables are set)."""
    from sim import crashpoints

    crashpoints.install_from_env()
