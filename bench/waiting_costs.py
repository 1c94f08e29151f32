"""Benchmark 5: waiting costs nothing.

1,000 reservation runs are started at once on 2 real Celery workers (prefork, 3 pool
processes each). Each advances through observation, proposals and validation until it waits for a
human approval (WAITING_HUMAN, a pending checkpoint in PostgreSQL). While they are being
driven we sample what the work holds (the baseline); once all of them wait we sample again:
tasks executing on the workers (``inspect().active()``), messages left on the queue, and
client connections open to the database (``pg_stat_activity``, the benchmark's own
connection excluded). Target: 0 workers busy and 0 connections held by the waiting runs.
A few of them are then approved to show the waits are live and resume on the workers.
"""

from __future__ import annotations

import time
from typing import Any

from common import (
    REDIS_URL,
    Summary,
    Workers,
    banner,
    celery_bench,
    connections_to,
    emit,
    make_user,
    parse_args,
    say,
)

DB = "fieldops_bench_waiting"
RESUME = 5


def main() -> None:
    args = parse_args(__doc__ or "")
    count = 60 if args.quick else 1000
    banner(f"5. waiting costs nothing: {count:,} runs waiting for approval")
    with celery_bench(DB, "wait", keep=args.keep) as workers:
        workers.start(2, concurrency=3)
        measure(workers, workers.queue, count)


def _own_pid() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def measure(workers: Workers, queue: str, count: int) -> None:
    import loader
    import redis

    from approvals import services as approvals
    from approvals.models import Checkpoint
    from fieldops.celery import app
    from runs.models import Run

    broker = redis.Redis.from_url(REDIS_URL)
    ids = loader.created_runs("reservation", count)
    started = time.monotonic()
    for run_id in ids:
        app.send_task("runs.tasks.run_advance", args=[run_id])
    busy_active, conns_active = [], []
    deadline = time.monotonic() + 120 + count
    while True:
        waiting = Run.objects.filter(pk__in=ids, state="WAITING_HUMAN").count()
        if waiting == count:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {waiting} of {count} runs reached WAITING_HUMAN")
        busy_active.append(workers.busy())
        conns_active.append(len(connections_to(DB, exclude_pids=[_own_pid()])))
        time.sleep(0.5)
    drive_s = time.monotonic() - started
    say(f"{count:,} runs reached WAITING_HUMAN in {drive_s:.1f} s ({count / drive_s:.1f} runs/s)")
    time.sleep(2.0)  # let the last task finish its bookkeeping (lease release, ack)
    busy_waiting, conns_waiting, queued = [], [], []
    for _ in range(5):
        busy_waiting.append(workers.busy())
        conns = connections_to(DB, exclude_pids=[_own_pid()])
        conns_waiting.append(len(conns))
        queued.append(_queued(broker, queue))
        time.sleep(0.5)
    pending = Checkpoint.objects.filter(run_id__in=ids, status=Checkpoint.Status.PENDING).count()
    leased = Run.objects.filter(pk__in=ids).exclude(lease_owner="").count()
    say(
        f"while {count:,} runs wait: {pending:,} pending checkpoints, {leased} leases held, "
        f"{max(queued)} messages queued, workers busy {busy_waiting}, "
        f"database connections {conns_waiting}"
    )
    emit(
        "waiting.workers_busy_while_runs_wait",
        Summary.of(busy_waiting),
        "tasks",
        Summary.of(busy_active or [0]),
        target="0 tasks executing while every run waits",
        passed=max(busy_waiting) == 0 and leased == 0 and max(queued) == 0,
        baseline_label="driving",
    )
    emit(
        "waiting.db_connections_while_runs_wait",
        Summary.of(conns_waiting),
        "connections",
        Summary.of(conns_active or [0]),
        target="0 connections held while every run waits",
        passed=max(conns_waiting) == 0,
        baseline_label="driving",
    )
    # The waits are live: approving a few resumes them on the same idle workers. (A run
    # that waited longer than its inventory evidence stays fresh re-checks the stock and
    # asks again: the approver approves again, as a person would.)
    approver = make_user("bench-approver", "north", "approver")
    resumed = ids[:RESUME]
    deadline = time.monotonic() + 120
    while Run.objects.filter(pk__in=resumed, disposition="").exists():
        if time.monotonic() > deadline:
            states = list(Run.objects.filter(pk__in=resumed).values_list("state", flat=True))
            raise RuntimeError(f"approved runs did not end: {states}")
        for checkpoint in Checkpoint.objects.filter(
            run_id__in=resumed, status=Checkpoint.Status.PENDING
        ):
            approvals.approval_decide(
                checkpoint_id=checkpoint.pk,
                user=approver,
                approve=True,
                seen_hash=checkpoint.proposal_hash,
                reason="bench: scripted approver",
            )
        time.sleep(0.1)
    outcomes = sorted(Run.objects.filter(pk__in=resumed).values_list("state", flat=True))
    say(f"approved {len(resumed)} of them: they resumed on the same workers and ended {outcomes}")


def _queued(broker: Any, queue: str) -> int:
    """Messages waiting on ``queue`` at every priority."""
    from runs.engine.executor import broker_lists

    return sum(int(broker.llen(key)) for key in broker_lists(queue))


if __name__ == "__main__":
    main()
