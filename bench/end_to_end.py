"""Benchmark 2: complete reservation runs per minute through 2 real Celery workers.

FieldOps: N reservation runs started at once (``services.run_create``, enqueued through the
outbox) on 2 ``celery worker`` processes (prefork, concurrency 1 each) on Redis and
PostgreSQL. A scripted approver approves each proposal through the approval service
(``approval_decide`` with the hash it was shown) as soon as it appears; the sweeper runs
every 5 s as beat would. A run counts when it is COMPLETED (completion verified from the
ledger). Throughput = N / (last completion - first start).

Baseline: N skeleton runs on the same workers: a chain of 30 no-op Celery tasks, each one
compare-and-set transition (``bench/skeleton.py``). Target: >= 1.0x the skeleton.
Reported: p50/p95 time from approval (the decision's commit) to completion (the terminal
record's commit).
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from typing import Any

from common import (
    Summary,
    Workers,
    banner,
    celery_bench,
    emit,
    make_user,
    parse_args,
    percentile,
    say,
)

DB = "fieldops_bench_e2e"
SWEEP_EVERY = 5.0


def main() -> None:
    args = parse_args(__doc__ or "")
    runs, reps = (12, 2) if args.quick else (30, 3)
    banner(f"2. end to end: {runs} runs x {reps} repetitions on 2 Celery workers")
    with celery_bench(DB, "e2e", keep=args.keep) as workers:
        workers.start(2, include="bench.skeleton")
        measure(workers, runs, reps)


def measure(workers: Workers, runs: int, reps: int) -> None:
    approver = make_user("bench-approver", "north", "approver")
    fieldops_rates, skeleton_rates, latencies = [], [], []
    warm_up(approver)
    for rep in range(reps):
        skeleton = skeleton_round(runs)
        rate, waits = fieldops_round(runs, approver)
        skeleton_rates.append(skeleton)
        fieldops_rates.append(rate)
        latencies.extend(waits)
        say(
            f"rep {rep + 1}: fieldops {rate:.1f} runs/min, skeleton {skeleton:.1f} runs/min, "
            f"approval->completion p50 {percentile(waits, 50):.2f} s"
        )
    fo, sk = Summary.of(fieldops_rates), Summary.of(skeleton_rates)
    emit(
        "e2e.complete_runs_per_min.2workers",
        fo,
        "runs/min",
        sk,
        target=">= 1.0x the 30-step skeleton chain",
        passed=fo.median / sk.median >= 1.0,
        baseline_label="skeleton",
    )
    for q in (50, 95):
        emit(
            f"e2e.approval_to_completion_s.p{q}",
            percentile(latencies, q),
            "s",
            None,
            target=None,
            passed=None,
        )


def warm_up(approver: Any) -> None:
    """One run of each kind first: worker imports and connections are not measured."""
    skeleton_round(2)
    fieldops_round(2, approver)


def skeleton_round(count: int) -> float:
    from fieldops.celery import app
    from kernel import clock
    from runs import services
    from runs.models import Run

    ids = [
        str(
            services.run_create(
                scenario="reservation", tenant="north", principal_ref="user:bench", start=False
            ).pk
        )
        for _ in range(count)
    ]
    Run.objects.filter(pk__in=ids).update(state="OBSERVING")
    started = clock.now()
    for run_id in ids:
        app.send_task("bench.skeleton.step", args=[run_id, 1])
    deadline = time.monotonic() + 60 + count * 5
    while Run.objects.filter(pk__in=ids, revision__lt=30).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("skeleton runs did not finish")
        time.sleep(0.05)
    last = max(Run.objects.filter(pk__in=ids).values_list("updated_at", flat=True))
    return count / (last - started).total_seconds() * 60


def fieldops_round(count: int, approver: Any) -> tuple[float, list[float]]:
    from approvals import services as approvals
    from approvals.models import Checkpoint, Decision
    from kernel import clock
    from runs import services
    from runs.engine import sweeper
    from runs.models import Run, TerminalRecord

    started = clock.now()
    ids = [
        str(
            services.run_create(
                scenario="reservation", tenant="north", principal_ref="user:bench-operator"
            ).pk
        )
        for _ in range(count)
    ]
    deadline = time.monotonic() + 120 + count * 10
    last_sweep = time.monotonic()
    while Run.objects.filter(pk__in=ids, disposition="").exists():
        if time.monotonic() > deadline:
            states = list(Run.objects.filter(pk__in=ids).values_list("state", flat=True))
            raise RuntimeError(f"fieldops runs did not finish: {sorted(states)}")
        pending = Checkpoint.objects.filter(
            run_id__in=ids, status=Checkpoint.Status.PENDING, kind=Checkpoint.Kind.APPROVAL
        ).values_list("id", "proposal_hash")
        for checkpoint_id, proposal_hash in pending:
            approvals.approval_decide(
                checkpoint_id=checkpoint_id,
                user=approver,
                approve=True,
                seen_hash=proposal_hash,
                reason="bench: scripted approver",
            )
        if time.monotonic() - last_sweep > SWEEP_EVERY:
            sweeper.sweep()
            last_sweep = time.monotonic()
        time.sleep(0.02)
    completed = list(Run.objects.filter(pk__in=ids, state="COMPLETED").values_list("pk", flat=True))
    if len(completed) < count:
        # Concurrent reservations of one slot can lose the world's stock compare-and-set
        # and escalate: only completed runs count.
        outcomes = Counter(Run.objects.filter(pk__in=ids).values_list("state", "terminal_reason"))
        say(f"not every run completed: {dict(outcomes)}")
    ended = dict(
        TerminalRecord.objects.filter(run_id__in=completed).values_list("run_id", "created_at")
    )
    approved = dict(
        Decision.objects.filter(
            checkpoint__run_id__in=ids, verdict=Decision.Verdict.APPROVE
        ).values_list("checkpoint__run_id", "created_at")
    )
    waits = [(ended[r] - approved[r]).total_seconds() for r in ended]
    span: dt.timedelta = max(ended.values()) - started
    return len(completed) / span.total_seconds() * 60, waits


if __name__ == "__main__":
    main()
