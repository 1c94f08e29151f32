"""A lost kick is not an error (issue 14, item 6).

With Celery execution and the broker refusing connections, a committed start, approval or
cancellation answers as usual: no 500, the state is committed, the outbox row that carries
the work stays undispatched for the sweeper, and the page says the run waits for the queue.
Through the Django test client; the same over gunicorn is in test_web_process.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint, Decision
from runs.middleware import UNDELIVERED_NOTE
from runs.models import Outbox, Run
from tests.helpers import make_run, types
from tests.runs.console.conftest import client_for


@pytest.fixture
def live(transactional_db: Any) -> None:
    """Real commits, so on-commit kicks run inside the request as they do in production."""


@pytest.fixture
def waiting_run(live: None, operator: Any) -> Run:
    run = make_run(principal="user:operator", requested_by=operator)
    assert run.state == "WAITING_HUMAN"
    return run


def _timed_post(client: Client, url: str, data: dict[str, str]) -> Any:
    started = time.monotonic()
    response = client.post(url, data)
    elapsed = time.monotonic() - started
    assert elapsed < 1.5, f"the request waited {elapsed:.2f}s for a broker that is down"
    return response


def test_a_start_with_the_broker_down_is_saved_with_a_note(
    live: None, operator: Any, broker_down: str
) -> None:
    client = client_for(operator)
    response = _timed_post(
        client,
        reverse("runs-start"),
        {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"},
    )
    assert response.status_code == 302
    run = Run.objects.get()
    assert response["Location"] == reverse("runs-detail", args=[run.pk])
    page = client.get(response["Location"])
    body = page.content.decode()
    assert f"Run {run.short_id} started" in body and UNDELIVERED_NOTE in body
    assert run.state == "CREATED"
    row = Outbox.objects.get(run=run)
    assert row.dispatched_at is None and row.attempts == 1
    # The note is said once, on the next page only.
    assert UNDELIVERED_NOTE not in client.get(response["Location"]).content.decode()


def test_an_approval_with_the_broker_down_is_recorded_with_a_note(
    waiting_run: Run, approver: Any, broker_down: str
) -> None:
    checkpoint = Checkpoint.objects.get(pk=waiting_run.waiting_checkpoint)
    client = client_for(approver)
    response = _timed_post(
        client,
        reverse("approvals-decide", args=[checkpoint.pk]),
        {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
    )
    assert response.status_code == 302
    body = client.get(response["Location"]).content.decode()
    assert "Approved." in body and UNDELIVERED_NOTE in body
    assert Decision.objects.get(checkpoint=checkpoint).verdict == "APPROVE"
    assert "approval.granted" in types(waiting_run)
    undispatched = Outbox.objects.filter(run=waiting_run, dispatched_at__isnull=True)
    assert undispatched.count() == 1 and undispatched.get().attempts == 1


def test_a_cancellation_with_the_broker_down_is_recorded(
    waiting_run: Run, operator: Any, broker_down: str
) -> None:
    client = client_for(operator)
    response = _timed_post(
        client, reverse("runs-cancel", args=[waiting_run.pk]), {"reason": "wrong site"}
    )
    assert response.status_code == 302
    body = client.get(response["Location"]).content.decode()
    assert "Run cancelled" in body
    # Nothing is handed to a worker for an ended run, so there is nothing to note.
    assert UNDELIVERED_NOTE not in body
    waiting_run.refresh_from_db()
    assert waiting_run.state == "CANCELLED"
