"""Runs advanced by real Celery worker processes on Redis and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import signal
import time
from pathlib import Path

import pytest
import redis

from approvals import services as approvals
from approvals.models import Checkpoint
from runs import services
from runs.models import Event, Evidence, Run
from runs.replay.audit import audit_replay
from sim.world.models import LedgerEntry
from tests.durable.conftest import REDIS_URL
from tests.durable.helpers import wait_for

pytestmark = [pytest.mark.celery, pytest.mark.postgres]


def start(scenario="reservation", **kw):
    return services.run_create(
        scenario=scenario, tenant="north", principal_ref="user:operator", namespace="faultlab", **kw
    )


def approve(run, user):
    run.refresh_from_db()
    cp = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    return approvals.approval_decide(
        checkpoint_id=cp.pk,
        user=user,
        approve=True,
        seen_hash=cp.proposal_hash,
        reason="worker test",
    )


def assert_sound(run):
    run.refresh_from_db()
    sequences = list(
        Event.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, run.revision + 1)), "event sequence is not dense"
    _, findings = audit_replay(run)
    assert findings == []
    effects = LedgerEntry.objects.filter(run_id=str(run.pk)).count()
    assert effects <= 1, "duplicate effect"
    recovered = Event.objects.filter(run=run, type="run.recovered").count()
    assert run.attempt == 1 + recovered, "attempt must grow exactly once per takeover"
    calls = Evidence.objects.filter(run=run, kind="context").count()  # one per model call
    assert run.counters.get("turns", 0) == calls, "every model call is a turn, even a killed one"
    return effects


def test_the_reservation_walkthrough_through_a_worker(cluster, approver):
    cluster.start_worker()
    run = wait_for(start(), ["WAITING_HUMAN"], sweep=False)
    assert approve(run, approver).recorded
    run = wait_for(run, ["COMPLETED"], sweep=False)
    types = list(Event.objects.filter(run=run).order_by("sequence").values_list("type", flat=True))
    assert types[-4:] == [
        "approval.granted",
        "proposal.allowed",
        "effect.recorded",
        "completion.verified",
    ]
    epochs = sorted(set(Event.objects.filter(run=run).values_list("owner_epoch", flat=True)))
    assert epochs == [1, 2]  # two claims: before and after the approval
    assert assert_sound(run) == 1


def test_an_approved_run_goes_ahead_of_the_queued_starts(cluster, approver):
    """The approver's wait under load is one task's, not the queue's: with six new runs'
    advances queued on the broker before the approval's, the one worker that comes up
    next finishes the approved run before it starts any of them (Redis priorities: the
    resume is published at priority 0, the starts at 6; runs/engine/executor.py)."""
    worker = cluster.start_worker()
    waiting = wait_for(start(), ["WAITING_HUMAN"], sweep=False)
    cluster.stop(worker)  # nobody consumes: everything published now queues up
    queued = [start() for _ in range(6)]
    assert approve(waiting, approver).recorded  # published last
    assert all(Run.objects.get(pk=r.pk).state == "CREATED" for r in queued)
    cluster.start_worker()
    waiting = wait_for(waiting, ["COMPLETED"], sweep=False)
    for run in queued:
        wait_for(run, ["WAITING_HUMAN"], sweep=False)
    finished = _at(Event.objects.get(run=waiting, type="completion.verified").occurred_at)
    first_starts = [_at(Event.objects.get(run=r, sequence=1).occurred_at) for r in queued]
    assert finished < min(first_starts)


def _at(occurred_at: str) -> dt.datetime:
    return dt.datetime.fromisoformat(occurred_at)


CRASH_POINTS = [
    "after_claim",
    "after_model_response",
    "after_dispatch_record",
    "after_effect_committed",
    "before_ack",
]


@pytest.mark.parametrize(("point", "repeat"), list(itertools.product(CRASH_POINTS, range(2))))
def test_crash_matrix_sigkill_at_each_point(cluster, approver, point, repeat):
    """SIGKILL the worker child at a named point; the run recovers with one effect."""
    cluster.start_worker(FIELDOPS_CRASH_AT=point)
    run = wait_for(start(), ["WAITING_HUMAN"])
    assert approve(run, approver).recorded
    run = wait_for(run, ["COMPLETED", "ESCALATED", "FAILED"])
    assert run.state == "COMPLETED", run.terminal_reason
    assert assert_sound(run) == 1
    assert (Path(cluster.drill_dir) / "drills" / f"{run.pk}-{point}").exists(), (
        "the worker never reached the crash point"
    )
    if point in (
        "after_claim",
        "after_model_response",
        "after_dispatch_record",
        "after_effect_committed",
    ):
        assert run.attempt == 2, "the crash must be recovered by exactly one takeover"
    if point == "after_effect_committed":
        # The effect committed but the dying worker never recorded it: the new owner
        # reconciled by the same key instead of sending again.
        reasons = list(Event.objects.filter(run=run).values_list("type", flat=True))
        assert "effect.ambiguous" in reasons and "reconciliation.matched" in reasons


def test_a_paused_stale_worker_is_fenced_on_every_write(cluster):
    # The pause outlasts the second worker's start, the 3 s lease and the takeover with a
    # wide margin on a loaded host: a pause of 7 s sometimes ended first (the first worker
    # then simply went on, and nothing was stale).
    cluster.start_worker(FIELDOPS_PAUSE_AT="after_model_response:20")
    run = start()
    # The paused worker holds the first claim; a second worker takes over after the lease.
    time.sleep(1.0)
    cluster.start_worker()
    run = wait_for(run, ["WAITING_HUMAN"])
    stale = Event.objects.filter(run=run, type="stale_owner.rejected")
    deadline = time.monotonic() + 40
    while not stale.exists() and time.monotonic() < deadline:
        time.sleep(0.5)  # the stale worker wakes up and tries to write
    assert stale.exists()
    assert all(e.payload["attempted_epoch"] < e.payload["current_epoch"] for e in stale)
    run.refresh_from_db()
    assert run.state == "WAITING_HUMAN" and run.attempt == 2
    assert_sound(run)


def test_broker_loss_is_recovered_by_the_sweeper(cluster):
    runs = [start() for _ in range(3)]  # enqueued while no worker listens
    redis.Redis.from_url(REDIS_URL).flushdb()  # Redis loses everything
    cluster.start_worker(concurrency=2)
    for run in runs:
        wait_for(run, ["WAITING_HUMAN"])
        assert_sound(run)
    assert Run.objects.filter(pk__in=[r.pk for r in runs], state="WAITING_HUMAN").count() == 3


def _sessions_and_open_connections() -> tuple[int, int]:
    """Sessions ever established to the test database, and those open now (this test's own
    connection excluded)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        (sessions,) = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (open_now,) = cursor.fetchone()
    return int(sessions), int(open_now)


def test_a_worker_keeps_its_connection_through_a_burst_and_drops_it_when_idle(cluster):
    """Reconnecting for every task costs a server process per task; an idle worker holding
    a connection would make waiting cost something. A pool process does neither."""
    import time

    cluster.start_worker(FIELDOPS_WORKER_IDLE_DISCONNECT_S="1")
    runs = [start() for _ in range(6)]  # 6 tasks, handed to the one pool process in a burst
    for run in runs:
        wait_for(run, ["WAITING_HUMAN"], sweep=False)
    before, _ = _sessions_and_open_connections()
    more = [start() for _ in range(6)]
    for run in more:
        wait_for(run, ["WAITING_HUMAN"], sweep=False)
    during, _ = _sessions_and_open_connections()
    # Six tasks opened at most two sessions (one, plus one if the worker had gone idle
    # between two of them), not six.
    assert during - before <= 2
    deadline = time.monotonic() + 10
    while _sessions_and_open_connections()[1] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sessions_and_open_connections()[1] == 0, "an idle worker still holds a connection"


# -- owners that died on this host: no lease waited out -------------------------------------
# A lease far longer than these tests may take: a run handed over only at its expiry fails.
LONG_LEASE = 300


def _held_by_a_pool_process(run):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.lease_owner:
            return run
        time.sleep(0.1)
    raise AssertionError("no worker claimed the run")


def test_a_pool_process_killed_holding_a_run_is_taken_over_at_once(cluster, settings):
    """A pool process SIGKILLed (an OOM kill) right after it claimed a run: the worker
    replaces it and the message comes back (``task_reject_on_worker_lost``); the claim on
    this host finds the lease's owner gone and recovers the run at once, without a sweep
    and long before the lease expires."""
    cluster.lease_seconds = settings.FIELDOPS_LEASE_SECONDS = LONG_LEASE
    cluster.start_worker(FIELDOPS_CRASH_AT="after_claim")
    run = wait_for(start(), ["WAITING_HUMAN"], sweep=False, timeout=60)
    (recovered,) = Event.objects.filter(run=run, type="run.recovered")
    assert recovered.payload["previous_owner"].startswith("celery@")
    assert recovered.payload["previous_owner"] != recovered.payload["worker"]
    assert run.attempt == 2
    assert_sound(run)


def test_a_worker_killed_and_started_again_hands_its_runs_over_at_start(cluster, settings):
    """A whole worker SIGKILLed while one of its pool processes holds a run (its message
    unacknowledged until Redis's visibility timeout), then started again: the new worker,
    once ready, ends the dead owner's lease and re-drives the run; nothing sweeps here."""
    cluster.lease_seconds = settings.FIELDOPS_LEASE_SECONDS = LONG_LEASE
    worker = cluster.start_worker(FIELDOPS_PAUSE_AT="after_claim:600")
    run = _held_by_a_pool_process(start())
    owner = run.lease_owner
    os.killpg(worker.pid, signal.SIGKILL)  # the parent and its pool processes
    worker.wait(timeout=10)
    cluster.start_worker()
    run = wait_for(run, ["WAITING_HUMAN"], sweep=False, timeout=60)
    (recovered,) = Event.objects.filter(run=run, type="run.recovered")
    assert recovered.payload["previous_owner"] == owner
    assert_sound(run)
