"""Two operators pause (or cancel) the same bulk operation at the same moment: one
change is made, and the other is told who made it and when, not only that the operation
"is paused: cannot pause"."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from operations.models import OperationEvent, Status
from tests.conftest import make_user
from tests.helpers import bulk_cancel_in_progress
from tests.operations.conftest import client_for


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("action", "done"), [("pause", "paused"), ("cancel", "cancelled")])
def test_two_operators_moving_one_operation_at_once(
    world: None, operator: Any, action: str, done: str
) -> None:
    operation = bulk_cancel_in_progress(reason="supplier outage", total=3)
    other = make_user("operator-2", "north", "operator")
    people = {"operator": client_for(operator), "operator-2": client_for(other)}
    url = reverse("operations-move", args=[operation.pk, action])
    barrier = threading.Barrier(2, timeout=10)
    answers: dict[str, Any] = {}

    def move(name: str) -> None:
        try:
            barrier.wait()
            answers[name] = people[name].post(url)
        finally:
            connection.close()

    threads = [threading.Thread(target=move, args=(name,)) for name in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (moved,) = OperationEvent.objects.filter(operation=operation, type=done)
    winner = moved.by.removeprefix("user:")
    late = "operator-2" if winner == "operator" else "operator"
    assert answers[winner].status_code == 302
    told = answers[late].content.decode()
    assert answers[late].status_code == 409, told
    assert f"{done} by user:{winner} at " in told, told
    operation.refresh_from_db()
    assert operation.status == (Status.PAUSED if action == "pause" else Status.CANCELLED)
