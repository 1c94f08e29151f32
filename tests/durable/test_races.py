"""Approve/cancel races on separate PostgreSQL connections: exactly one winner per pair."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.db import connection

from approvals import services as approvals
from approvals.models import Checkpoint
from runs import authority, services
from runs.domain.effects import AttemptStatus
from runs.domain.states import Actor, EventType
from runs.engine import attempts
from runs.models import EffectAttempt, Event
from tests.helpers import make_run
from tests.operations.test_batch_cancel import dispatch_recorded

pytestmark = pytest.mark.postgres


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pair", range(6))
def test_approve_and_cancel_race_has_exactly_one_winner(world, approver, monkeypatch, pair):
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    seen_revision = run.revision
    barrier = threading.Barrier(2, timeout=10)
    real_store = authority._store

    def racing_store(*args, **kwargs):
        if args[3] == seen_revision:  # both first attempts meet here, then race
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return real_store(*args, **kwargs)

    monkeypatch.setattr(authority, "_store", racing_store)
    out = {}

    def approve():
        try:
            out["approve"] = approvals.approval_decide(
                checkpoint_id=checkpoint.pk,
                user=approver,
                approve=True,
                seen_hash=checkpoint.proposal_hash,
                reason="race",
            )
        finally:
            connection.close()

    def cancel():
        try:
            out["cancel"] = services.run_cancel(
                run_id=str(run.pk),
                by_ref="user:operator",
                reason="race",
                expected_revision=seen_revision,
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=approve), threading.Thread(target=cancel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    approved, cancelled = out["approve"].recorded, out["cancel"].applied
    assert approved != cancelled, "exactly one of the pair wins"
    run.refresh_from_db()
    types = set(Event.objects.filter(run=run).values_list("type", flat=True))
    if approved:
        assert out["cancel"].refusal == "revision_conflict"
        assert "run.cancelled" not in types and run.state != "CANCELLED"
    else:
        assert out["approve"].refusal in ("run_not_waiting", "run_cancelled")
        assert out["approve"].message
        assert run.state == "CANCELLED" and "approval.granted" not in types


@pytest.mark.django_db(transaction=True)
def test_a_cancel_and_a_worker_moving_the_dispatch_record_never_deadlock(
    world, approver, monkeypatch, settings
):
    """A worker's event transaction takes the run's row (its compare-and-set), then the
    dispatch record it moves; a cancellation meeting it in between must queue behind it,
    not take the record first and then wait for the run (a deadlock: HTTP 500)."""
    settings.FIELDOPS_EXECUTION = "deferred"  # the test moves the run itself
    run = dispatch_recorded(approver=approver)
    attempt = EffectAttempt.objects.get(run=run)
    locked = threading.Event()
    real_qualification = services.cancel_qualification

    def qualification_then_pause(run_row, statuses=None):
        locked.set()  # the cancellation holds its locks here, before its compare-and-set
        time.sleep(0.5)  # the worker's transaction meets them meanwhile
        return real_qualification(run_row, statuses)

    monkeypatch.setattr(services, "cancel_qualification", qualification_then_pause)
    out: dict[str, object] = {}

    def cancel():
        try:
            out["cancel"] = services.run_cancel(
                run_id=str(run.pk), by_ref="user:operator", reason="race"
            )
        except Exception as exc:
            out["cancel"] = exc
        finally:
            connection.close()

    def worker():
        # A new owner's move of a dispatch record it cannot trust (the takeover's path).
        def move(row, event):
            attempts.attempt_move(
                attempt_id=attempt.pk,
                source=AttemptStatus.DISPATCH_RECORDED,
                target=AttemptStatus.AMBIGUOUS,
                detail="owner_changed_after_dispatch_record",
            )

        try:
            assert locked.wait(10)
            out["worker"] = authority.append(
                run_id=str(run.pk),
                expected_revision=run.revision,
                expected_epoch=run.owner_epoch,
                type=EventType.EFFECT_AMBIGUOUS,
                actor=Actor.CAPABILITY_ADAPTER,
                reason_code="owner_changed_after_dispatch_record",
                refs={"attempt": attempt.pk},
                within=move,
            )
        except Exception as exc:
            out["worker"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=cancel), threading.Thread(target=worker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not isinstance(out["cancel"], Exception), out["cancel"]
    assert not isinstance(out["worker"], Exception), out["worker"]
    assert out["cancel"].applied  # it came first; the worker's compare-and-set then lost
    assert not out["worker"].applied
    run.refresh_from_db()
    attempt.refresh_from_db()
    assert run.state == "CANCELLED" and run.terminal_reason == "cancelled_no_dispatch"
    assert attempt.status == AttemptStatus.NOT_SENT
