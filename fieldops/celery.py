"""The Celery app. Settings come from Django settings (``CELERY_*``); see README."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")

app = Celery("fieldops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runs"])
app.conf.beat_schedule = {
    "sweep": {
        "task": "runs.tasks.sweep",
        "schedule": float(os.environ.get("FIELDOPS_SWEEP_INTERVAL_SECONDS", "5")),
    },
    "heartbeat": {"task": "runs.tasks.heartbeat", "schedule": 10.0},
}
