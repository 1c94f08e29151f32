"""Two operators cancel the same run at the same moment: one cancellation is recorded, and
the other operator is told who cancelled it, when and why, not only that the run 'is
CANCELLED and cannot be cancelled now'."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from runs.models import Event
from tests.conftest import make_user
from tests.runs.console.conftest import client_for


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_cancelling_one_run_at_once(
    world: None, operator: Any, waiting_run: Any
) -> None:
    other = make_user("operator-2", "north", "operator")
    url = reverse("runs-cancel", args=[waiting_run.pk])
    people = {"operator": client_for(operator), "operator-2": client_for(other)}
    barrier = threading.Barrier(2, timeout=10)
    answers: dict[str, Any] = {}

    def cancel(name: str) -> None:
        try:
            barrier.wait()
            answers[name] = people[name].post(url, {"reason": f"duplicate order seen by {name}"})
        finally:
            connection.close()

    threads = [threading.Thread(target=cancel, args=(name,)) for name in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (cancelled,) = Event.objects.filter(run=waiting_run, type="run.cancelled")
    by = cancelled.payload["by"]
    late = "operator-2" if by == "user:operator" else "operator"
    assert answers["operator" if late == "operator-2" else "operator-2"].status_code == 302
    told = answers[late].content.decode()
    assert answers[late].status_code == 409, told
    assert f"The run was already cancelled by {by} at " in told, told
    assert f"(duplicate order seen by {by.removeprefix('user:')})" in told, told
    assert "your cancellation was not recorded" in told, told
    # The late attempt is on the run's record once, as a rejected transition.
    assert Event.objects.filter(run=waiting_run, type="transition.rejected").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_bulk_cancel_and_a_single_cancel_of_one_run_at_once(
    world: None, operator: Any, waiting_run: Any
) -> None:
    """Each run is cancelled once; whichever came second names the first (the bulk result
    row of a run someone cancelled first said only ``run_terminal``)."""
    other = make_user("operator-2", "north", "operator")
    barrier = threading.Barrier(2, timeout=10)
    answers: dict[str, Any] = {}
    single, bulk = client_for(other), client_for(operator)

    def one() -> None:
        try:
            barrier.wait()
            answers["single"] = single.post(
                reverse("runs-cancel", args=[waiting_run.pk]), {"reason": "single: wrong part"}
            )
        finally:
            connection.close()

    def many() -> None:
        try:
            barrier.wait()
            answers["bulk"] = bulk.post(
                reverse("runs-bulk-cancel"),
                {"run": [str(waiting_run.pk)], "reason": "bulk: supplier outage"},
                follow=True,
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=one), threading.Thread(target=many)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (cancelled,) = Event.objects.filter(run=waiting_run, type="run.cancelled")
    result_page = answers["bulk"].content.decode()
    if cancelled.payload["by"] == "user:operator-2":  # the single cancel came first
        assert answers["single"].status_code == 302
        assert "refused" in result_page
        assert "already cancelled by user:operator-2 at " in result_page, result_page
        assert "(single: wrong part)" in result_page
    else:
        assert answers["single"].status_code == 409
        told = answers["single"].content.decode()
        assert "The run was already cancelled by user:operator at " in told, told
        assert "(bulk: supplier outage)" in told
