"""Thin Celery wrappers around the operation services (names match them)."""

from __future__ import annotations

import logging

from celery import shared_task

from fieldops.taskmessages import canonical_id
from operations import services
from operations.models import Status

log = logging.getLogger("fieldops.operations")


@shared_task(name="operations.tasks.operation_advance", acks_late=True, reject_on_worker_lost=True)
def operation_advance(operation_id: str) -> str:
    """One batch; while items remain, the next batch is published as a new task. A batch
    that found nothing to claim (another worker holds the rest) publishes nothing: that
    worker goes on, and the sweep re-hands the operation if it died."""
    canonical = canonical_id(operation_id)
    if canonical is None:
        log.warning("operation_advance refused: %r is not an operation id", str(operation_id)[:80])
        return "missing"
    operation_id = canonical
    step = services.operation_step(operation_id=operation_id)
    if step.status == Status.RUNNING and step.claimed:
        services.handover(operation_id)
    return step.status


@shared_task(name="operations.tasks.operation_sweep")
def operation_sweep() -> list[str]:
    return services.operation_sweep()
