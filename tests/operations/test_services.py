"""Bulk cancel by filter: the preview's count is what is acted on, each item once, with its
own result; pause, resume, cancel; never another tenant's run; the audit record."""

from __future__ import annotations

import pytest

from operations import services
from operations.models import ItemResult, Operation, OperationEvent, OperationItem, Status
from runs import services as run_services
from runs.domain.states import EventType, State
from runs.models import Event, Run
from tests.operations.conftest import FAULTLAB, waiting_runs

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _cancel_events(run: Run) -> int:
    return Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value).count()


def _start(
    count: int, query: dict[str, str] | None = None, reason: str = "gate closed"
) -> Operation:
    return services.operation_start_cancel(
        tenant="north",
        by_ref="user:operator",
        query=query or FAULTLAB,
        reason=reason,
        confirm=count,
    )


def test_the_preview_count_is_what_the_operation_acts_on(world):
    north = waiting_runs(7)
    south = waiting_runs(3, tenant="south")
    preview = services.cancel_preview(tenant="north", query=FAULTLAB)
    assert preview.count == 7
    assert {r.pk for r in preview.sample} == {r.pk for r in north}

    operation = _start(preview.count)
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED

    operation.refresh_from_db()
    assert (operation.total, operation.done, operation.refused) == (7, 7, 0)
    items = OperationItem.objects.filter(operation=operation)
    assert sorted(i.run_id for i in items) == sorted(r.pk for r in north)
    assert all(i.result == ItemResult.DONE and i.processed_at for i in items)
    for run in north:
        run.refresh_from_db()
        assert run.state == State.CANCELLED.value
        assert _cancel_events(run) == 1
    for run in south:
        run.refresh_from_db()
        assert run.state == State.CREATED.value
        assert _cancel_events(run) == 0


def test_a_confirmation_that_is_not_the_current_count_writes_nothing(world):
    waiting_runs(3)
    with pytest.raises(services.OperationInputError, match=r"typed \(2\) does not match the 3"):
        _start(2)
    with pytest.raises(services.OperationInputError, match="type the number"):
        _start("three")  # type: ignore[arg-type]
    with pytest.raises(services.OperationInputError, match="reason"):
        _start(3, reason="  ")
    assert not Operation.objects.exists()
    assert not OperationItem.objects.exists()


def test_the_filter_is_applied_as_the_list_applies_it(world):
    runs = waiting_runs(4)
    run_services.run_cancel(run_id=str(runs[0].pk), by_ref="user:operator", reason="early")
    preview = services.cancel_preview(tenant="north", query={**FAULTLAB, "state": "CREATED"})
    assert preview.count == 3
    operation = _start(3, {**FAULTLAB, "state": "CREATED"})
    services.operation_drain(operation_id=operation.pk)
    assert runs[0].pk not in set(OperationItem.objects.values_list("run_id", flat=True))
    assert operation.filter["query"]["state"] == "CREATED"


def test_a_run_that_ended_meanwhile_is_reported_already_terminal_and_not_touched(world):
    runs = waiting_runs(3)
    operation = _start(3)
    run_services.run_cancel(run_id=str(runs[1].pk), by_ref="user:other", reason="by hand")
    services.operation_drain(operation_id=operation.pk)
    item = OperationItem.objects.get(operation=operation, run=runs[1])
    assert (item.result, item.detail) == (ItemResult.ALREADY_TERMINAL, State.CANCELLED.value)
    assert _cancel_events(runs[1]) == 1  # the hand cancel only
    operation.refresh_from_db()
    assert (operation.done, operation.already_terminal) == (2, 1)


def test_a_run_moved_to_another_tenant_is_refused_not_acted_on(world):
    runs = waiting_runs(2)
    operation = _start(2)
    Run.objects.filter(pk=runs[0].pk).update(tenant="south")
    services.operation_drain(operation_id=operation.pk)
    item = OperationItem.objects.get(operation=operation, run=runs[0])
    assert (item.result, item.detail) == (ItemResult.REFUSED, "other_tenant")
    runs[0].refresh_from_db()
    assert runs[0].state == State.CREATED.value


def test_pause_stops_before_the_next_item_and_resume_finishes_each_item_once(world):
    runs = waiting_runs(6)
    operation = _start(6)
    assert services.operation_advance(operation_id=operation.pk, batch_size=2) == Status.RUNNING
    services.operation_move(
        operation_id=operation.pk, tenant="north", action="pause", by_ref="user:operator"
    )
    assert services.operation_advance(operation_id=operation.pk) == Status.PAUSED
    assert OperationItem.objects.filter(operation=operation, result=ItemResult.PENDING).count() == 4
    with pytest.raises(
        services.OperationInputError,
        match=r"is paused \(paused by user:\w+ at [0-9: -]+ UTC\): cannot pause",
    ):
        services.operation_move(
            operation_id=operation.pk, tenant="north", action="pause", by_ref="x"
        )
    services.operation_move(
        operation_id=operation.pk, tenant="north", action="resume", by_ref="user:operator"
    )
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    assert all(_cancel_events(r) == 1 for r in runs)
    types = list(OperationEvent.objects.filter(operation=operation).values_list("type", "by"))
    assert types == [
        ("started", "user:operator"),
        ("paused", "user:operator"),
        ("resumed", "user:operator"),
        ("finished", "system"),
    ]


def test_a_cancelled_operation_leaves_its_remaining_runs_alone(world):
    runs = waiting_runs(5)
    operation = _start(5)
    services.operation_advance(operation_id=operation.pk, batch_size=2)
    services.operation_move(
        operation_id=operation.pk, tenant="north", action="cancel", by_ref="user:operator"
    )
    assert services.operation_drain(operation_id=operation.pk) == Status.CANCELLED
    states = sorted(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", flat=True))
    assert states == ["CANCELLED", "CANCELLED", "CREATED", "CREATED", "CREATED"]
    with pytest.raises(services.OperationInputError):
        services.operation_move(
            operation_id=operation.pk, tenant="north", action="resume", by_ref="x"
        )


def test_another_tenant_cannot_move_an_operation(world):
    waiting_runs(2)
    operation = _start(2)
    with pytest.raises(Operation.DoesNotExist):
        services.operation_move(
            operation_id=operation.pk, tenant="south", action="cancel", by_ref="x"
        )
    operation.refresh_from_db()
    assert operation.status == Status.RUNNING


def test_the_audit_record_holds_who_when_the_filter_and_the_reason(world):
    waiting_runs(2)
    operation = _start(2, reason="EQ family recall")
    started = OperationEvent.objects.get(operation=operation, type="started")
    assert started.by == "user:operator" and started.detail["total"] == 2
    assert started.detail["filter"] == {"page": "runs", "query": operation.filter["query"]}
    assert operation.filter["query"]["world"] == "faultlab"
    assert (operation.reason, operation.created_by, operation.tenant) == (
        "EQ family recall",
        "user:operator",
        "north",
    )
    services.operation_drain(operation_id=operation.pk)
    event = Event.objects.filter(type=EventType.RUN_CANCELLED.value).first()
    assert event is not None
    assert event.payload["reason"] == f"EQ family recall (operation {operation.short_id})"
    assert event.payload["by"] == "user:operator"


def test_the_sweep_hands_over_a_running_operation_nobody_progressed(world, settings):
    settings.FIELDOPS_EXECUTION = "deferred"  # the hand-over itself is not under test here
    import datetime as dt

    from kernel import clock

    waiting_runs(2)
    operation = _start(2)
    assert services.operation_sweep() == []  # just handed over
    later = clock.now() + dt.timedelta(seconds=settings.FIELDOPS_OPERATION_STALE_SECONDS + 1)
    assert services.operation_sweep(now=later) == [str(operation.pk)]
