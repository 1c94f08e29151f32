"""Thin Celery wrappers around catalog services: ids in, one service call.

``catalog_rediscover_all`` is the beat entry (``fieldops/celery.py``): it enqueues one
``tool_server_discover`` per scheduled server, so each discovery runs within its own
time limit and one slow server does not delay the others.
"""

from __future__ import annotations

import logging

from celery import shared_task

from catalog import servers
from catalog.domain.lifecycle import Refusal
from catalog.models import ToolServer

log = logging.getLogger("fieldops.catalog")


@shared_task(name="catalog.tasks.tool_server_discover", acks_late=True)
def tool_server_discover(server_id: int, trigger: str = "schedule") -> str:
    # A message no beat or view wrote (hand-made or corrupted) is refused with one log
    # line, not a failed task with a traceback.
    if not isinstance(server_id, int) or isinstance(server_id, bool):
        log.warning("tool_server_discover refused: %r is not a server id", str(server_id)[:80])
        return "refused: not a server id"
    if trigger not in servers.TRIGGERS:
        log.warning("tool_server_discover refused: unknown trigger %r", str(trigger)[:80])
        return "refused: unknown trigger"
    try:
        run = servers.tool_server_discover(server_id=server_id, trigger=trigger)
    except Refusal as exc:  # the server was deleted after the message was sent
        log.warning("tool_server_discover refused: %s", exc.message, extra={"code": exc.code})
        return f"refused: {exc.code}"
    return f"{run.outcome}: {run.message}"


# Acknowledged late but not redelivered when its worker is lost: a server that kills the
# process discovering it would otherwise kill every worker in turn. The record then stays
# running until its deadline has passed, and the page and the next request close it.
@shared_task(name="catalog.tasks.discovery_continue", acks_late=True)
def discovery_continue(discovery_id: int) -> str:
    """Carry out one discovery an admin asked for (Discover now)."""
    if not isinstance(discovery_id, int) or isinstance(discovery_id, bool):
        log.warning("discovery_continue refused: %r is not a discovery id", str(discovery_id)[:80])
        return "refused: not a discovery id"
    run = servers.discovery_continue(discovery_id=discovery_id)
    return "not running" if run is None else f"{run.outcome}: {run.message}"


@shared_task(name="catalog.tasks.catalog_rediscover_all", acks_late=True)
def catalog_rediscover_all() -> int:
    ids = list(ToolServer.objects.filter(scheduled=True).values_list("pk", flat=True))
    for server_id in ids:
        tool_server_discover.delay(server_id, "schedule")
    return len(ids)
