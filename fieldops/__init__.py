"""FieldOps: an operations console that governs AI-agent runs.

The project's Celery app is loaded with Django (the pattern of Celery's Django guide), so
every process, the web process included, sends ``@shared_task`` calls through it: to the
configured broker and the ``fieldops`` queue the workers consume, never to Celery's default
app and its ``celery`` queue.
"""

from fieldops.celery import app as celery_app

__all__ = ("celery_app",)
