"""Post-approval fast path: the decision's commit hands the run over at once.

No poll and no sweep is needed between an approval and COMPLETED: the approval's
transition puts the run in the outbox with the event, and the relay runs it after commit
(in this process in embedded mode; a published task on Celery: tests/durable/test_worker.py).
The sweeper is replaced by one that fails the test if anything calls it.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from runs.engine import runner, sweeper
from runs.models import Event, Outbox
from tests.helpers import approve, make_run


@pytest.fixture
def no_sweeper(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the fast path must not need a sweep")

    monkeypatch.setattr(sweeper, "sweep", refuse)


@pytest.fixture
def counted_advances(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = runner.advance

    def advance(run_id: str, **kwargs: object) -> str:
        calls.append(run_id)
        return real(run_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "advance", advance)
    return calls


def test_an_approval_completes_the_run_on_commit_without_a_sweep(
    world, approver, no_sweeper, counted_advances, django_capture_on_commit_callbacks
):
    run = make_run()
    assert run.state == "WAITING_HUMAN"
    counted_advances.clear()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = approve(run, approver, advance=False)
    assert result.recorded
    assert len(callbacks) >= 1  # the outbox relay, registered with the approval's event
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    assert counted_advances == [str(run.pk)]  # one hand-over, by the relay, not a poll
    assert not Outbox.objects.filter(run=run, dispatched_at__isnull=True).exists()
    types = list(Event.objects.filter(run=run).order_by("sequence").values_list("type", flat=True))
    assert types[-4:] == [
        "approval.granted",
        "proposal.allowed",
        "effect.recorded",
        "completion.verified",
    ]


def test_the_approve_button_returns_with_the_run_completed(
    world, approver, no_sweeper, django_capture_on_commit_callbacks
):
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    client = Client()
    client.force_login(approver)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("approvals-decide", args=[checkpoint.pk]),
            {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
        )
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == "COMPLETED"


def test_without_the_commit_nothing_moves(world, approver, no_sweeper, counted_advances):
    """The relay waits for the commit: inside the (test's) open transaction the run is
    approved but not advanced, so a rolled-back decision can never start the effect."""
    run = make_run()
    counted_advances.clear()
    assert approve(run, approver, advance=False).recorded
    run.refresh_from_db()
    assert run.state == "VALIDATING" and counted_advances == []
    assert Outbox.objects.filter(run=run, dispatched_at__isnull=True).exists()


@pytest.fixture
def published(settings, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Celery hand-overs, captured instead of published: (run id, priority)."""
    from runs.engine import executor

    settings.FIELDOPS_EXECUTION = "celery"
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(
        executor, "_publish", lambda run_id, priority: sent.append((run_id, priority)) or True
    )
    return sent


def test_on_celery_an_answered_run_is_handed_over_ahead_of_queued_advances(
    world, approver, published, django_capture_on_commit_callbacks
):
    """The approval's hand-over is published at the broker's first priority, a new run's
    at a lower one: the next free worker takes the run an approver is waiting on before
    the queued starts (the order itself, on a real worker and broker:
    tests/durable/test_worker.py)."""
    from runs import services
    from runs.engine import executor

    waiting = make_run()
    with django_capture_on_commit_callbacks(execute=True):
        started = services.run_create(
            scenario="reservation",
            tenant="north",
            principal_ref="user:operator",
            namespace="faultlab",
        )
        assert approve(waiting, approver, advance=False).recorded
    assert published == [
        (str(started.pk), executor.ADVANCE_PRIORITY),
        (str(waiting.pk), executor.RESUME_PRIORITY),
    ]
    assert executor.RESUME_PRIORITY < executor.ADVANCE_PRIORITY  # Redis serves 0 first
    assert Outbox.objects.get(run=waiting).kind == "resume"
    assert Outbox.objects.get(run=started).kind == "advance"


def test_a_re_armed_resume_keeps_its_priority(world, approver, published):
    """A resume whose row is still pending (its hand-over never happened: here the
    decision's commit never ran its relay) is re-published by the sweeper's re-arm at
    the resume's priority; a run with no resume pending, at the advances'."""
    from runs import outbox
    from runs.engine import executor

    waiting = make_run()
    assert approve(waiting, approver, advance=False).recorded
    other = make_run(advance=False)
    outbox.rearm(str(waiting.pk))
    outbox.rearm(str(other.pk))
    assert published == [
        (str(waiting.pk), executor.RESUME_PRIORITY),
        (str(other.pk), executor.ADVANCE_PRIORITY),
    ]
