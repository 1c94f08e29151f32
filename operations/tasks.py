"""Thin Celery wrappers around the operation services (names match them)."""

from __future__ import annotations

from celery import shared_task

from operations import services
from operations.models import Status


@shared_task(name="operations.tasks.operation_advance", acks_late=True, reject_on_worker_lost=True)
def operation_advance(operation_id: str) -> str:
    """One batch; while items remain, the next batch is published as a new task."""
    status = services.operation_advance(operation_id=operation_id)
    if status == Status.RUNNING:
        services.handover(operation_id)
    return status


@shared_task(name="operations.tasks.operation_sweep")
def operation_sweep() -> list[str]:
    return services.operation_sweep()
