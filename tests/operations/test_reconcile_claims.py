"""Bulk reconcile items are claimed by lease: the ledger lookup runs outside any
transaction with no lock on the item, an expired claim is claimable again, and each item's
result is recorded exactly once (a late claimant's result is dropped)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from fieldops import points
from kernel import clock
from operations import services
from operations.models import ItemResult, Operation, OperationItem, Status
from runs.console import operations as console_operations
from runs.domain.states import EventType
from runs.models import EffectAttempt, Event, Run
from tests.operations.test_reconcile_incident import outage_run, version_of

pytestmark = pytest.mark.postgres


@pytest.fixture(autouse=True)
def _deferred(settings: Any) -> None:
    settings.FIELDOPS_EXECUTION = "deferred"  # each test moves its operation itself


def _start(runs: list[Run]) -> Operation:
    return services.operation_start_reconcile(
        tenant="north",
        by_ref="user:operator",
        query={"capability": version_of(runs[0])},
        reason="ledger back",
        confirm=len(runs),
    )


def _reconciled(run: Run) -> int:
    return Event.objects.filter(run=run, type=EventType.EFFECT_RECONCILED.value).count()


def _past_the_lease() -> None:
    clock.advance(services.claim_lease().total_seconds() + 1)


@pytest.mark.django_db(transaction=True)
def test_the_ledger_lookup_runs_outside_any_transaction_and_locks_no_item(world, monkeypatch):
    run = outage_run()
    operation = _start([run])
    item = OperationItem.objects.get(operation=operation)
    seen: dict[str, Any] = {}
    real = console_operations.effect_attempt_reconcile

    def lockable_elsewhere() -> bool:
        """Whether another connection can lock the item row right now (NOWAIT)."""
        out: list[bool] = []

        def probe() -> None:
            try:
                with transaction.atomic():
                    OperationItem.objects.select_for_update(nowait=True).get(pk=item.pk)
                out.append(True)
            except Exception:
                out.append(False)
            finally:
                connection.close()

        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        return out[0]

    def reconcile(**kw: Any) -> Any:
        seen["in_transaction"] = connection.in_atomic_block
        seen["item_lockable"] = lockable_elsewhere()
        seen["claimed"] = OperationItem.objects.values_list("claimed_by", flat=True).get(pk=item.pk)
        return real(**kw)

    monkeypatch.setattr(console_operations, "effect_attempt_reconcile", reconcile)
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    assert seen["in_transaction"] is False
    assert seen["item_lockable"] is True
    assert seen["claimed"]  # the claim was committed before the lookup
    item.refresh_from_db()
    assert (item.result, item.detail) == (ItemResult.DONE, "reconciled: CONFIRMED")
    assert item.claim_expires_at is None


@pytest.mark.django_db
def test_a_live_claim_is_left_alone_and_an_expired_one_is_claimed_again(world):
    run = outage_run()
    operation = _start([run])
    stalled = services._claim(operation)  # a claimant that stalls before its lookup
    assert stalled is not None

    step = services.operation_step(operation_id=operation.pk)
    assert (step.status, step.claimed) == (Status.RUNNING, 0)
    assert _reconciled(run) == 0

    _past_the_lease()
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    item = OperationItem.objects.get(operation=operation)
    assert (item.result, item.detail) == (ItemResult.DONE, "reconciled: CONFIRMED")
    # The stalled claimant wakes up: its result is not recorded over the new claimant's.
    assert services._record_claimed(stalled, (ItemResult.REFUSED, "late")) == 0
    item.refresh_from_db()
    assert (item.result, item.detail) == (ItemResult.DONE, "reconciled: CONFIRMED")
    assert _reconciled(run) == 1


@pytest.mark.django_db
def test_a_claimant_that_reconciled_and_died_before_recording_is_not_reconciled_twice(world):
    runs = [outage_run(), outage_run()]
    operation = _start(runs)

    def die(name: str, operation_id: str) -> None:
        if name == services.ITEM_POINT:
            raise points.WorkerKilled(name)

    previous = points.install(die)
    try:
        with pytest.raises(points.WorkerKilled):
            services.operation_step(operation_id=operation.pk)
    finally:
        points.install(previous)
    first = OperationItem.objects.get(operation=operation, position=0)
    assert first.result == ItemResult.PENDING and first.claimed_by
    assert EffectAttempt.objects.get(pk=first.target).status == "CONFIRMED"

    _past_the_lease()
    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED
    results = list(
        OperationItem.objects.filter(operation=operation)
        .order_by("position")
        .values_list("result", "detail")
    )
    # The second claim finds the attempt resolved by the first: the run's history shows it
    # was this operation's, so the item is done, and the run was reconciled once.
    assert results == [(ItemResult.DONE, "reconciled: CONFIRMED")] * 2
    assert [_reconciled(run) for run in runs] == [1, 1]
    operation.refresh_from_db()
    assert (operation.done, operation.refused) == (2, 0)
