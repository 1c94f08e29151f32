"""The conflict reviews are found by their item's target through an index on it.

``operations.reviews.conflict_reviews`` looks up finished review items by target (the
attempt id) for a run's page and before every new review. Without an index on
``OperationItem.target`` that lookup reads every item of every operation: a bulk cancel
of 10,000 runs leaves 10,000 of them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from operations.models import ItemResult, Kind, Operation, OperationItem, Status
from operations.reviews import conflict_reviews
from tests.helpers import make_run

pytestmark = pytest.mark.django_db

INDEX = "op_item_target"
AT = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)


def operation(kind: str, reason: str = "test") -> Operation:
    return Operation.objects.create(
        tenant="north",
        kind=kind,
        status=Status.FINISHED,
        created_by="user:op",
        created_at=AT,
        reason=reason,
    )


@pytest.fixture
def items(world: None) -> None:
    """A bulk cancel of 3,000 items (no target), a reconciliation of 500 attempts and 200
    reviewed conflicts, each review its own operation of one item (as recorded)."""
    run = make_run(advance=False)
    cancel, reconcile = operation(Kind.CANCEL), operation(Kind.RECONCILE)
    rows = [
        OperationItem(operation=cancel, position=i, run=run, result=ItemResult.DONE)
        for i in range(3000)
    ]
    rows += [
        OperationItem(operation=reconcile, position=i, run=run, target=f"at-r{i}")
        for i in range(500)
    ]
    rows += [
        OperationItem(
            operation=operation(Kind.REVIEW, f"review {i}"),
            position=0,
            run=run,
            target=f"at-v{i}",
            result=ItemResult.DONE,
        )
        for i in range(200)
    ]
    OperationItem.objects.bulk_create(rows)


def test_the_item_target_is_indexed_in_the_model_and_in_the_database() -> None:
    by_name = {index.name: index for index in OperationItem._meta.indexes}
    assert INDEX in by_name and by_name[INDEX].fields == ["target"]
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, OperationItem._meta.db_table)
    assert found[INDEX]["index"] and found[INDEX]["columns"] == ["target"]


def test_the_reviews_of_some_attempts_are_one_query(items: Any) -> None:
    with CaptureQueriesContext(connection) as captured:
        found = conflict_reviews(attempt_ids=["at-v7", "at-v150", "at-r3", "at-none"])
        reasons = {target: item.operation.reason for target, item in found.items()}
    assert reasons == {"at-v7": "review 7", "at-v150": "review 150"}  # not the reconciled one
    assert len(captured.captured_queries) == 1


def test_the_reviews_are_found_through_the_target_index(items: Any) -> None:
    """Planned with every scan allowed, on PostgreSQL after ANALYZE of the 3,700 items:
    the planner picks the index because it is the cheap way, not because it was forced.
    SQLite plans a partial index only when the query states its condition."""
    postgresql = connection.vendor == "postgresql"
    if postgresql:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE operations_operationitem")
            cursor.execute("ANALYZE operations_operation")
    for attempt_ids in (["at-v7"], ["at-v7", "at-v150", "at-r3"]):
        with CaptureQueriesContext(connection) as captured:
            conflict_reviews(attempt_ids=attempt_ids)
        with connection.cursor() as cursor:
            explain = "EXPLAIN " if postgresql else "EXPLAIN QUERY PLAN "
            cursor.execute(explain + captured.captured_queries[-1]["sql"])
            plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
        assert INDEX in plan, plan
