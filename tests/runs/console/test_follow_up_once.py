"""An ended run gets one follow-up at a time: a follow-up reserves what the ended run did
not, so a second one while the first may still reserve (or after it did) would reserve
the same request again. Two operators (or two tabs) starting one at the same moment get
one follow-up and a clear refusal naming it."""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.urls import reverse

from runs import services
from runs.engine import runner
from runs.models import Run
from tests.conftest import make_user
from tests.helpers import approve
from tests.runs.console.conftest import client_for


def _form_key(client: Client, run: Run) -> str:
    page = client.get(reverse("runs-detail", args=[run.pk])).content.decode()
    match = re.search(r'name="start_key" value="([0-9a-f]{32})"', page)
    assert match, "the run page offers no follow-up form"
    return match.group(1)


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_starting_a_follow_up_at_once_start_one(
    waiting_run: Run, operator: Any, approver: Any, monkeypatch: Any
) -> None:
    """Both posts used to pass the checks (the ended run has no effect) and each started a
    follow-up: both were approved and both reserved the part, twice for one request."""
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    other = make_user("operator-2", "north", "operator")
    tabs = [client_for(operator), client_for(other)]
    keys = [_form_key(tab, waiting_run) for tab in tabs]
    barrier = threading.Barrier(2, timeout=3)
    real_create = services.run_create

    def together(**kwargs: Any) -> Run:  # both posts past their checks, if they can be
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        return real_create(**kwargs)

    monkeypatch.setattr(services, "run_create", together)
    answers: dict[int, Any] = {}

    def post(i: int) -> None:
        try:
            url = reverse("runs-follow-up", args=[waiting_run.pk])
            answers[i] = tabs[i].post(url, {"start_key": keys[i]})
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    follow_up = Run.objects.get(follows_run=waiting_run)  # exactly one
    statuses = sorted(a.status_code for a in answers.values())
    assert statuses == [302, 409], statuses
    won = next(a for a in answers.values() if a.status_code == 302)
    assert won["Location"] == reverse("runs-detail", args=[follow_up.pk])
    lost = next(a for a in answers.values() if a.status_code == 409).content.decode()
    assert f"follow-up run {follow_up.short_id} of this run is still" in lost
    assert "a second follow-up would reserve again" in lost


@pytest.mark.django_db
def test_an_ended_run_offers_no_second_follow_up_while_one_may_reserve_or_did(
    waiting_run: Run, as_operator: Client, approver: Any
) -> None:
    """The page offered "Start a follow-up run" again after a follow-up had reserved: a
    second follow-up reserved the same request again. A follow-up that ended without an
    effect (cancelled) leaves the next one free."""
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    url = reverse("runs-follow-up", args=[waiting_run.pk])
    page = reverse("runs-detail", args=[waiting_run.pk])
    first = Run.objects.get(
        pk=as_operator.post(url, {"start_key": _form_key(as_operator, waiting_run)})[
            "Location"
        ].split("/")[-2]
    )
    runner.advance(str(first.pk), worker="test")
    first.refresh_from_db()
    assert first.state == "WAITING_HUMAN"
    # While it runs (waiting for its approval) the ended run offers no second one.
    body = as_operator.get(page).content.decode()
    assert 'name="start_key"' not in body
    assert f"Follow-up run {first.short_id} of this run is still WAITING_HUMAN" in body
    refused = as_operator.post(url, {"start_key": "another-tab"})
    assert refused.status_code == 409
    assert Run.objects.filter(follows_run=waiting_run).count() == 1
    # It ends without an effect: the next follow-up may start (from it or the ended run),
    # and while that one runs, none from the other either.
    services.run_cancel(run_id=str(first.pk), by_ref="user:operator", reason="stop")
    first.refresh_from_db()
    grandchild = services.run_follow_up(run=first, by_ref="user:operator").run
    sibling = as_operator.post(url, {"start_key": "a-sibling"})
    assert sibling.status_code == 409
    assert f"follow-up run {grandchild.short_id} of run {first.short_id}" in (
        sibling.content.decode()
    )
    services.run_cancel(run_id=str(grandchild.pk), by_ref="user:operator", reason="stop")
    second_url = as_operator.post(url, {"start_key": _form_key(as_operator, waiting_run)})
    second = Run.objects.get(pk=second_url["Location"].split("/")[-2])
    runner.advance(str(second.pk), worker="test")
    assert second.follows_run_id == waiting_run.pk and second.pk != first.pk
    # It reserves (approved, completed): none may follow the ended run any more.
    assert approve(second, approver).recorded
    assert second.state == "COMPLETED"
    body = as_operator.get(page).content.decode()
    assert 'name="start_key"' not in body
    assert f"Follow-up run {second.short_id} of this run reserved already" in body
    again = as_operator.post(url, {"start_key": "a-third"})
    assert again.status_code == 409
    assert f"follow-up run {second.short_id} of this run reserved already" in again.content.decode()
    assert Run.objects.filter(follows_run=waiting_run).count() == 2
    from_first = as_operator.post(reverse("runs-follow-up", args=[first.pk]), {"start_key": "k"})
    assert from_first.status_code == 409  # nor from another ended run of the chain
    assert f"follow-up run {second.short_id} of run {waiting_run.short_id}" in (
        from_first.content.decode()
    )
    # The same form sent again still answers the run it started (its key is spent).
    said = as_operator.post(url, {"start_key": "another-tab"})
    assert said.status_code == 409
    repeat = as_operator.post(second_url.wsgi_request.path, second_url.wsgi_request.POST)
    assert repeat.status_code == 302
    assert any("not started again" in str(m) for m in get_messages(repeat.wsgi_request))
