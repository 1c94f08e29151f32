"""Bulk cancel batches against other transactions on separate PostgreSQL connections: a run
(or an unsent dispatch record) another transaction holds is skipped, never waited for and
never refused, and a later batch cancels it; concurrent drainers act on every item once;
a pause waits for the batch in flight and no batch starts after it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from fieldops import points
from operations import services
from operations.models import ItemResult, Operation, OperationItem, Status
from runs.domain.states import EventType, State
from runs.models import EffectAttempt, Event, Run
from tests.operations.conftest import FAULTLAB, waiting_runs
from tests.operations.test_batch_cancel import dispatch_recorded

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _deferred(settings: Any) -> None:
    """Nothing runs on commit (no in-process drain thread, no run advanced by an approval's
    commit): each test moves its operation and runs itself, step by step."""
    settings.FIELDOPS_EXECUTION = "deferred"
    settings.FIELDOPS_OPERATION_RETRY_SECONDS = 0


@contextlib.contextmanager
def held(model: Any, pk: Any) -> Iterator[None]:
    """Hold ``model``'s row ``pk`` FOR UPDATE in another connection's open transaction."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                model.objects.select_for_update().get(pk=pk)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10)
    try:
        yield
    finally:
        release.set()
        thread.join()


def _start(count: int) -> Operation:
    return services.operation_start_cancel(
        tenant="north", by_ref="user:operator", query=FAULTLAB, reason="recall", confirm=count
    )


def _cancels(run: Run) -> int:
    return Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value).count()


def test_a_run_another_transaction_holds_stays_pending_and_a_later_batch_cancels_it(world):
    runs = waiting_runs(4)
    operation = _start(4)
    with held(Run, runs[1].pk):
        step = services.operation_step(operation_id=operation.pk)
        # Not waited for (the holder keeps its lock until after this step): the other three
        # were cancelled in the same batch, this one is left pending, not refused as busy.
        assert (step.status, step.claimed, step.processed) == (Status.RUNNING, 4, 3)
        item = OperationItem.objects.get(operation=operation, run=runs[1])
        assert item.result == ItemResult.PENDING
        assert Run.objects.get(pk=runs[1].pk).state == State.CREATED.value
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    assert set(OperationItem.objects.values_list("result", flat=True)) == {ItemResult.DONE}
    assert [_cancels(run) for run in runs] == [1, 1, 1, 1]


def test_an_unsent_dispatch_record_the_send_gate_holds_leaves_its_run_for_later(world, approver):
    run = dispatch_recorded(approver=approver)
    other = waiting_runs(1)[0]
    operation = _start(2)
    attempt = EffectAttempt.objects.get(run=run)
    with held(EffectAttempt, attempt.pk):
        step = services.operation_step(operation_id=operation.pk)
        assert (step.claimed, step.processed) == (2, 1)
        assert OperationItem.objects.get(run=run).result == ItemResult.PENDING
        assert OperationItem.objects.get(run=other).result == ItemResult.DONE
        assert Run.objects.get(pk=run.pk).state != State.CANCELLED.value
        assert EffectAttempt.objects.get(pk=attempt.pk).status == "DISPATCH_RECORDED"
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    item = OperationItem.objects.get(run=run)
    assert (item.result, item.detail) == (ItemResult.DONE, "cancelled_no_dispatch")
    attempt.refresh_from_db()
    assert (attempt.status, attempt.detail) == ("NOT_SENT", "cancelled before dispatch")
    assert _cancels(run) == 1


def test_two_drainers_share_an_operation_and_act_on_every_item_once(world, settings):
    settings.FIELDOPS_OPERATION_BATCH_SIZE = 4
    runs = waiting_runs(24)
    operation = _start(24)
    statuses: list[str] = []

    def drain() -> None:
        try:
            statuses.append(services.operation_drain(operation_id=operation.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=drain) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    operation.refresh_from_db()
    assert operation.status == Status.FINISHED
    assert (operation.done, operation.refused, operation.already_terminal) == (24, 0, 0)
    assert [_cancels(run) for run in runs] == [1] * 24
    assert not Event.objects.filter(type=EventType.TRANSITION_REJECTED.value).exists()


def _waiting_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_a_pause_waits_for_the_batch_in_flight_and_no_batch_starts_after_it(world, settings):
    settings.FIELDOPS_OPERATION_BATCH_SIZE = 3
    runs = waiting_runs(6)
    operation = _start(6)
    in_batch, release = threading.Event(), threading.Event()

    def hold_the_batch(point: str, operation_id: str) -> None:
        if point == services.BATCH_POINT:
            in_batch.set()
            release.wait(30)

    def step() -> None:
        try:
            services.operation_step(operation_id=operation.pk)
        finally:
            connection.close()

    pausing: dict[str, Any] = {}

    def pause() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pausing["pid"] = cursor.fetchone()[0]
            services.operation_move(
                operation_id=operation.pk, tenant="north", action="pause", by_ref="user:operator"
            )
            pausing["done"] = True
        finally:
            connection.close()

    previous = points.install(hold_the_batch)
    try:
        batch = threading.Thread(target=step)
        batch.start()
        assert in_batch.wait(10)
        mover = threading.Thread(target=pause)
        mover.start()
        for _ in range(200):  # until the pause is seen waiting on the operation's row
            if "pid" in pausing and _waiting_for_a_lock(pausing["pid"]):
                break
            threading.Event().wait(0.05)
        assert "done" not in pausing and _waiting_for_a_lock(pausing["pid"])
        release.set()
        batch.join()
        mover.join()
    finally:
        release.set()
        points.install(previous)
    assert pausing.get("done")
    # The batch in flight finished whole; nothing after the pause.
    assert services.operation_step(operation_id=operation.pk).status == Status.PAUSED
    done = OperationItem.objects.filter(operation=operation, result=ItemResult.DONE).count()
    assert done == 3
    assert sum(_cancels(run) for run in runs) == 3
