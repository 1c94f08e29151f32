"""A bulk cancel processed by a real Celery worker process that is killed (SIGKILL) inside a
batch's transaction, or right after a batch committed and before the next one starts: the
operation resumes and every item is acted on exactly once, its result consistent with its
run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from operations import services
from operations.models import ItemResult, Operation, OperationItem, Status
from runs.domain.states import EventType, State
from runs.models import Event, Run
from runs.replay.audit import audit_replay
from tests.helpers import make_run

pytestmark = [pytest.mark.celery, pytest.mark.postgres]

RUNS = 20
BATCH = 5  # four batches; the drill passes its point once, so the kill lands in the second


def wait_finished(operation: Operation, *, timeout: float = 60.0) -> Operation:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation.refresh_from_db()
        if operation.status != Status.RUNNING:
            return operation
        services.operation_sweep()  # the beat's job: re-hand a stalled operation
        time.sleep(0.3)
    raise AssertionError(f"operation stayed {operation.status}: {operation.processed} processed")


@pytest.mark.parametrize(
    "point",
    [
        services.BATCH_POINT,  # every write of the batch done, not committed
        services.COMMITTED_POINT,  # the batch committed, the next one not started
    ],
)
def test_a_worker_killed_in_or_after_a_batch_resumes_and_acts_on_every_item_once(
    cluster, settings, point
):
    settings.FIELDOPS_OPERATION_STALE_SECONDS = 2
    worker = cluster.start_worker(
        FIELDOPS_CRASH_AT=point,
        FIELDOPS_CRASH_AFTER="1",
        FIELDOPS_OPERATION_BATCH_SIZE=str(BATCH),
    )
    runs = [make_run(advance=False) for _ in range(RUNS)]
    operation = services.operation_start_cancel(
        tenant="north",
        by_ref="user:operator",
        query={"world": "faultlab"},
        reason=f"drill: kill the worker at {point}",
        confirm=RUNS,
    )

    operation = wait_finished(operation)

    # The worker's child was killed (SIGKILL) at the drill point, once for this operation.
    marker = Path(cluster.drill_dir) / "drills" / f"{operation.pk}-{point}"
    assert marker.exists()
    assert worker.poll() is None  # the prefork parent lived on and redelivered the batch
    assert operation.status == Status.FINISHED
    assert (operation.total, operation.done, operation.refused) == (RUNS, RUNS, 0)
    items = {item.run_id: item for item in OperationItem.objects.filter(operation=operation)}
    assert len(items) == RUNS
    for run in runs:
        run = Run.objects.get(pk=run.pk)
        assert run.state == State.CANCELLED.value
        cancels = list(Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value))
        assert len(cancels) == 1, f"run {run.pk} was cancelled {len(cancels)} times"
        # The item says what happened to its run, and the run's history replays clean.
        item = items[run.pk]
        assert (item.result, item.detail) == (ItemResult.DONE, cancels[0].reason_code)
        assert item.processed_at is not None
        assert audit_replay(run)[1] == []
    # Nothing of a killed batch survived: no rejected second cancel anywhere.
    assert not Event.objects.filter(run__in=runs, type=EventType.TRANSITION_REJECTED.value).exists()
