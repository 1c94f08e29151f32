"""Thin Celery wrappers around catalog services: ids in, one service call.

``catalog_rediscover_all`` is the beat entry (``fieldops/celery.py``): it enqueues one
``tool_server_discover`` per scheduled server, so each discovery runs within its own
time limit and one slow server does not delay the others.
"""

from __future__ import annotations

from celery import shared_task

from catalog import servers
from catalog.models import ToolServer


@shared_task(name="catalog.tasks.tool_server_discover", acks_late=True)
def tool_server_discover(server_id: int, trigger: str = "schedule") -> str:
    run = servers.tool_server_discover(server_id=server_id, trigger=trigger)
    return f"{run.outcome}: {run.message}"


@shared_task(name="catalog.tasks.catalog_rediscover_all", acks_late=True)
def catalog_rediscover_all() -> int:
    ids = list(ToolServer.objects.filter(scheduled=True).values_list("pk", flat=True))
    for server_id in ids:
        tool_server_discover.delay(server_id, "schedule")
    return len(ids)
