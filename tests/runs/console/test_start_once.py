"""A start request with a key starts one run, however often it arrives: the start form's
one-time key (a double click, a resent POST) and the API's ``Idempotency-Key`` (a client's
retry after a lost response), also when the two requests arrive at the same moment."""

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
from runs.models import Run, RunStartKey
from tests.api.test_api import V1, bearer

FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}


def _rendered_key(client: Client) -> str:
    page = client.get(reverse("runs-list")).content.decode()
    match = re.search(r'name="start_key" value="([0-9a-f]{32})"', page)
    assert match, "the start form carries no one-time key"
    return match.group(1)


@pytest.mark.django_db
def test_the_same_start_form_submitted_twice_starts_one_run(as_operator: Client) -> None:
    key = _rendered_key(as_operator)
    assert _rendered_key(as_operator) != key  # every rendering gets its own
    first = as_operator.post(reverse("runs-start"), {**FORM, "start_key": key})
    second = as_operator.post(reverse("runs-start"), {**FORM, "start_key": key})
    run = Run.objects.get()
    assert first["Location"] == second["Location"] == reverse("runs-detail", args=[run.pk])
    said = [str(m) for m in get_messages(second.wsgi_request)]
    assert any("already started run" in m and "not started again" in m for m in said), said
    # Another rendering of the form is another run; a post without a key is one each time.
    as_operator.post(reverse("runs-start"), {**FORM, "start_key": _rendered_key(as_operator)})
    as_operator.post(reverse("runs-start"), FORM)
    assert Run.objects.count() == 3 and RunStartKey.objects.count() == 2


@pytest.mark.django_db
def test_a_key_reused_for_another_request_is_refused(as_operator: Client) -> None:
    key = _rendered_key(as_operator)
    as_operator.post(reverse("runs-start"), {**FORM, "start_key": key})
    other = as_operator.post(
        reverse("runs-start"), {**FORM, "location_id": "LOC-N2", "start_key": key}
    )
    assert other.status_code == 400
    page = other.content.decode()
    assert "already started a run, so nothing was started" in page
    # The choices come back with a new key: the next post starts the run they ask for.
    renewed = re.search(r'name="start_key" value="([0-9a-f]{32})"', page)
    assert renewed and renewed.group(1) != key
    assert 'value="LOC-N2" selected' in page
    assert Run.objects.count() == 1
    bad = as_operator.post(reverse("runs-start"), {**FORM, "start_key": "k\u00e9y"})
    assert bad.status_code == 400 and Run.objects.count() == 1


@pytest.mark.django_db
def test_the_api_answers_a_retried_key_with_the_run_it_started(world: None, operator: Any) -> None:
    client, auth = Client(), bearer(operator)

    def start(body: dict[str, Any], key: str) -> Any:
        return client.post(
            f"{V1}/runs", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key, **auth
        )

    first = start({"equipment_id": "EQ-17"}, "order-4711")
    again = start({"equipment_id": "EQ-17"}, "order-4711")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    changed = start({"equipment_id": "EQ-17", "quantity": 2}, "order-4711")
    assert changed.status_code == 409 and changed.json()["code"] == "idempotency_key_reused"
    too_long = start({}, "k" * 65)
    assert too_long.status_code == 400 and too_long.json()["code"] == "invalid_idempotency_key"
    assert Run.objects.count() == 1
    # Keys belong to their principal: another operator's same key is their own run.
    colleague = bearer(_colleague())
    other = client.post(
        f"{V1}/runs",
        {"equipment_id": "EQ-17"},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="order-4711",
        **colleague,
    )
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def _colleague() -> Any:
    from tests.conftest import make_user

    return make_user("operator-2", "north", "operator")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_requests_with_one_key_at_the_same_moment_start_one_run(world, monkeypatch) -> None:
    """Both requests pass the look-up before either has committed; the unique key lets one
    commit its run and the other answer with that run."""
    barrier = threading.Barrier(2, timeout=10)
    real_create = services.run_create

    def meeting_create(**kwargs: Any) -> Run:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()  # both looked the key up and found nothing
        return real_create(**kwargs)

    monkeypatch.setattr(services, "run_create", meeting_create)
    results: list[services.StartResult] = []

    def start() -> None:
        try:
            results.append(
                services.run_start_once(
                    key="double-click",
                    scenario="reservation",
                    tenant="north",
                    principal_ref="user:operator",
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 2
    assert sorted(r.created for r in results) == [False, True]
    assert results[0].run.pk == results[1].run.pk
    assert Run.objects.count() == 1 and RunStartKey.objects.count() == 1
