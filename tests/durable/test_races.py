"""Approve/cancel races on separate PostgreSQL connections: exactly one winner per pair."""

from __future__ import annotations

import contextlib
import threading

import pytest
from django.db import connection

from approvals import services as approvals
from approvals.models import Checkpoint
from runs import authority, services
from runs.models import Event
from tests.helpers import make_run

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
