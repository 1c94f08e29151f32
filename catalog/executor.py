"""Where a requested discovery (Discover now) is carried out.

Celery (production): one ``discovery_continue`` task on a worker, so a server that is
slow to answer (a launcher fetching it, a probe it never answers: up to the discovery
deadline) holds a worker, not the web request; the discovery's page follows it. In-process
(the embedded default): at once, in the request, as the embedded set-up runs everything.
Deferred (tests and drivers): nothing is handed over.
"""

from __future__ import annotations

import logging

from catalog import servers
from catalog.models import Discovery
from runs.engine import executor as run_executor

log = logging.getLogger("fieldops.catalog")


def hand_over(discovery: Discovery) -> bool:
    """Carry out ``discovery`` (a running record of ``servers.discovery_request``) where
    this deployment runs work; return False when the task queue did not take it."""
    mode = run_executor.mode()
    if mode == "deferred":
        return True
    if mode != "celery":
        servers.discovery_continue(discovery_id=discovery.pk)
        return True
    from catalog import tasks

    try:
        tasks.discovery_continue.apply_async(args=[discovery.pk])
    except Exception:
        log.exception("discovery hand-over failed", extra={"discovery": discovery.pk})
        return False
    return True
