"""A bulk cancel processed by a real Celery worker process that is killed mid-batch: the
operation resumes and every item is acted on exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from operations import services
from operations.models import ItemResult, Operation, OperationItem, Status
from runs.domain.states import EventType, State
from runs.models import Event, Run
from tests.helpers import make_run

pytestmark = [pytest.mark.celery, pytest.mark.postgres]

RUNS = 20
KILL_AFTER = 7  # items the worker processes before it dies inside the 8th item's transaction


def wait_finished(operation: Operation, *, timeout: float = 60.0) -> Operation:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation.refresh_from_db()
        if operation.status != Status.RUNNING:
            return operation
        services.operation_sweep()  # the beat's job: re-hand a stalled operation
        time.sleep(0.3)
    raise AssertionError(f"operation stayed {operation.status}: {operation.processed} processed")


def test_a_worker_killed_mid_batch_resumes_and_acts_on_every_item_exactly_once(cluster, settings):
    settings.FIELDOPS_OPERATION_STALE_SECONDS = 2
    worker = cluster.start_worker(
        FIELDOPS_CRASH_AT=services.ITEM_POINT, FIELDOPS_CRASH_AFTER=str(KILL_AFTER)
    )
    runs = [make_run(advance=False) for _ in range(RUNS)]
    operation = services.operation_start_cancel(
        tenant="north",
        by_ref="user:operator",
        query={"world": "faultlab"},
        reason="drill: kill the worker mid-batch",
        confirm=RUNS,
    )
    assert services.BATCH_SIZE > KILL_AFTER + 1  # the kill lands inside one batch

    operation = wait_finished(operation)

    # The worker's child was killed (SIGKILL) at the drill point, once for this operation.
    marker = Path(cluster.drill_dir) / "drills" / f"{operation.pk}-{services.ITEM_POINT}"
    assert marker.exists()
    assert worker.poll() is None  # the prefork parent lived on and redelivered the batch
    assert operation.status == Status.FINISHED
    assert (operation.total, operation.done, operation.refused) == (RUNS, RUNS, 0)
    items = list(OperationItem.objects.filter(operation=operation))
    assert len(items) == RUNS
    assert {i.result for i in items} == {ItemResult.DONE}
    for run in runs:
        assert Run.objects.get(pk=run.pk).state == State.CANCELLED.value
        cancels = Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value).count()
        assert cancels == 1, f"run {run.pk} was cancelled {cancels} times"
    # Nothing of the killed item's transaction survived: no rejected second cancel anywhere.
    assert not Event.objects.filter(run__in=runs, type=EventType.TRANSITION_REJECTED.value).exists()
