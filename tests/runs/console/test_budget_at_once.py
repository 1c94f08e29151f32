"""Two operators change the same budget of a run at the same moment (or one form is sent
twice): one change is recorded, and the other operator is told the limit moved, to what,
by whom and why, instead of both hearing "Budget change recorded" while the later one
silently replaced the earlier."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from runs.models import Event, Run
from tests.conftest import make_user
from tests.runs.console.conftest import client_for


def _budget_form(client: Client, run: Run) -> dict[str, str]:
    """The hidden fields of the run page's budget form, as a browser sends them."""
    page = client.get(reverse("runs-detail", args=[run.pk])).content.decode()
    form = re.search(r'<form [^>]*class="budget-form".*?</form>', page, re.S)
    assert form, "the run page has no budget form"
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(0)))


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_changing_one_budget_at_once(
    world: None, operator: Any, waiting_run: Run
) -> None:
    other = make_user("operator-2", "north", "operator")
    people = {"operator": client_for(operator), "operator-2": client_for(other)}
    limits = {"operator": "20", "operator-2": "30"}
    forms = {name: _budget_form(client, waiting_run) for name, client in people.items()}
    url = reverse("runs-budget", args=[waiting_run.pk])
    barrier = threading.Barrier(2, timeout=10)
    answers: dict[str, Any] = {}

    def change(name: str) -> None:
        try:
            barrier.wait()
            form = {
                **forms[name],
                "budget": "actions",
                "limit": limits[name],
                "reason": f"long task, says {name}",
            }
            answers[name] = people[name].post(url, form)
        finally:
            connection.close()

    threads = [threading.Thread(target=change, args=(name,)) for name in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (changed,) = Event.objects.filter(run=waiting_run, type="budget.changed")
    winner = changed.payload["by"].removeprefix("user:")
    late = "operator-2" if winner == "operator" else "operator"
    assert answers[winner].status_code == 302
    told = answers[late].content.decode()
    assert answers[late].status_code == 409, told
    assert f"the actions limit is {limits[winner]} now, set by user:{winner} at " in told, told
    assert f"(long task, says {winner})" in told and "Nothing was recorded" in told, told
    waiting_run.refresh_from_db()
    assert waiting_run.budget_limits["actions"] == int(limits[winner])


@pytest.mark.django_db
def test_the_same_budget_form_sent_twice_records_one_change(
    world: None, operator: Any, waiting_run: Run
) -> None:
    client = client_for(operator)
    form = {**_budget_form(client, waiting_run), "budget": "turns", "limit": "12", "reason": "r"}
    url = reverse("runs-budget", args=[waiting_run.pk])
    assert client.post(url, form).status_code == 302
    again = client.post(url, form)
    told = again.content.decode()
    assert again.status_code == 409, told
    assert "the turns limit is 12 now, set by you (user:operator) at " in told, told
    assert Event.objects.filter(run=waiting_run, type="budget.changed").count() == 1
    # The page read again carries the new limit: a further change is recorded.
    form = {**_budget_form(client, waiting_run), "budget": "turns", "limit": "14", "reason": "r"}
    assert client.post(url, form).status_code == 302
