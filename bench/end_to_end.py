"""Benchmark 2: complete reservation runs per minute through 2 real Celery workers.

FieldOps: N reservation runs started at once (``services.run_create``, enqueued through the
outbox) on 2 ``celery worker`` processes (prefork, concurrency 1 each) on Redis and
PostgreSQL. A scripted approver approves each proposal through the approval service
(``approval_decide`` with the hash it was shown) as soon as it appears; the sweeper runs
every 5 s as beat would. A run counts when it is COMPLETED (completion verified from the
ledger). Throughput = N / (last completion - first start).

Baseline: the machine's limit for complete runs, measured in the same run: the
authority's transitions/s on 2 connections (``authority_throughput.measure``, the real
append path, one process per connection) x 60 / the transitions one of these runs needs
(their mean revision). Target: >= 0.33x that limit. Still printed: the ratio to N
skeleton runs on the same workers (a chain of 30 no-op Celery tasks, each one
compare-and-set transition, ``bench/skeleton.py``).

Approval -> COMPLETED (the decision's commit to the terminal record's commit): under the
N-run load (reported) and for a single run on an idle fleet, one run at a time, both on
the 2 Celery workers and embedded (in-process execution in this process, the executor of
``serve_embedded``): targets p50 <= 0.3 s and p95 <= 0.6 s. No sweep runs while the idle
samples are taken: the approval's own commit must move the run.
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
LIMIT_SECONDS = 1.0  # each sample of the authority's 2-connection rate
IDLE_P50_S, IDLE_P95_S = 0.3, 0.6


def main() -> None:
    args = parse_args(__doc__ or "")
    # Enough runs that the round measures the fleet's steady rate, not filling and draining
    # the pipeline (with 12 runs, the first proposal and the last approval's hand-over were
    # a third of the round's span).
    runs, reps = (40, 2) if args.quick else (120, 3)
    idle = 10 if args.quick else 30
    banner(f"2. end to end: {runs} runs x {reps} repetitions on 2 Celery workers")
    with celery_bench(DB, "e2e", keep=args.keep) as workers:
        workers.start(2, include="bench.skeleton")
        measure(workers, runs, reps, idle)


def measure(workers: Workers, runs: int, reps: int, idle: int) -> None:
    approver = make_user("bench-approver", "north", "approver")
    fieldops_rates, skeleton_rates, latencies, limits = [], [], [], []
    per_run: list[float] = []
    warm_up(approver)
    for rep in range(reps):
        skeleton = skeleton_round(runs)
        rate, waits, transitions = fieldops_round(runs, approver)
        authority_rate = authority_2conn()
        skeleton_rates.append(skeleton)
        fieldops_rates.append(rate)
        latencies.extend(waits)
        per_run.append(transitions)
        limits.append(authority_rate * 60 / transitions)
        say(
            f"rep {rep + 1}: fieldops {rate:.1f} runs/min, limit {limits[-1]:.0f} runs/min "
            f"(authority {authority_rate:,.0f} transitions/s on 2 connections / "
            f"{transitions:.1f} transitions per run), skeleton {skeleton:.1f} runs/min, "
            f"approval->completion p50 {percentile(waits, 50):.2f} s"
        )
    fo, sk, limit = Summary.of(fieldops_rates), Summary.of(skeleton_rates), Summary.of(limits)
    emit(
        "e2e.complete_runs_per_min.2workers_vs_limit",
        fo,
        "runs/min",
        limit,
        target=">= 0.33x the limit (authority 2-conn transitions/s x 60 / transitions per run)",
        passed=fo.median / limit.median >= 0.33,
        baseline_label="limit",
    )
    emit(
        "e2e.transitions_per_run",
        Summary.of(per_run),
        "transitions",
        None,
        target=None,
        passed=None,
    )
    emit(
        "e2e.complete_runs_per_min.2workers",
        fo,
        "runs/min",
        sk,
        target=None,
        passed=None,
        baseline_label="skeleton",
    )
    for q in (50, 95):
        emit(
            f"e2e.approval_to_completion_s.p{q}.under_load_{runs}_runs",
            percentile(latencies, q),
            "s",
            None,
            target=None,
            passed=None,
        )
    for mode in ("celery", "embedded"):
        waits = idle_latencies(approver, idle, mode=mode)
        for q, bound in ((50, IDLE_P50_S), (95, IDLE_P95_S)):
            value = percentile(waits, q)
            emit(
                f"e2e.approval_to_completion_s.p{q}.idle_single_run.{mode}",
                value,
                "s",
                bound,
                target=f"<= {bound} s",
                passed=value <= bound,
                baseline_label="target",
            )


def authority_2conn() -> float:
    """The authority's transitions/s on 2 connections right now (the real append path)."""
    import authority_throughput
    from django.db import connections

    rate, _ = authority_throughput.measure("fieldops", 2, LIMIT_SECONDS)
    connections.close_all()
    return rate


def idle_latencies(approver: Any, count: int, *, mode: str) -> list[float]:
    """Approval -> COMPLETED of ``count`` runs, one at a time, nothing else running.

    ``celery``: the runs advance on the workers; ``embedded``: in this process (the
    executor of ``serve_embedded``), so the approval's own call runs the rest of the run.
    """
    from django.conf import settings

    from approvals import services as approvals
    from approvals.models import Checkpoint, Decision
    from runs import services
    from runs.models import TerminalRecord

    previous = settings.FIELDOPS_EXECUTION
    settings.FIELDOPS_EXECUTION = "celery" if mode == "celery" else "inprocess"
    waits = []
    try:
        for _ in range(count + 1):  # the first one warms this path up, not timed
            run = services.run_create(
                scenario="reservation", tenant="north", principal_ref="user:bench-operator"
            )
            _wait(run.pk, lambda r: r.state == "WAITING_HUMAN" or bool(r.disposition))
            checkpoint = Checkpoint.objects.get(run=run, status=Checkpoint.Status.PENDING)
            result = approvals.approval_decide(
                checkpoint_id=checkpoint.pk,
                user=approver,
                approve=True,
                seen_hash=checkpoint.proposal_hash,
                reason="bench: idle approval",
            )
            assert result.recorded, result.refusal
            done = _wait(run.pk, lambda r: bool(r.disposition))
            if done.state != "COMPLETED":
                raise RuntimeError(f"idle run ended {done.state}: {done.terminal_reason}")
            decided = Decision.objects.get(checkpoint=checkpoint).created_at
            ended = TerminalRecord.objects.get(run_id=run.pk).created_at
            waits.append((ended - decided).total_seconds())
    finally:
        settings.FIELDOPS_EXECUTION = previous
    say(
        f"idle, {mode}: approval->completion p50 {percentile(waits[1:], 50) * 1000:.0f} ms, "
        f"p95 {percentile(waits[1:], 95) * 1000:.0f} ms over {count} runs"
    )
    return waits[1:]


def _say_phases(
    ids: list[str], started: dt.datetime, approved: dict[Any, Any], ended: dict[Any, Any]
) -> None:
    """Where the round's wall time goes: per run, start -> proposal awaiting approval ->
    decided -> completed (medians and maxima, seconds from the round's start). Shows whether
    the scripted approver or fixed latencies, not the runner's work, set the span."""
    from approvals.models import Checkpoint

    proposed = dict(
        Checkpoint.objects.filter(run_id__in=ids, kind=Checkpoint.Kind.APPROVAL).values_list(
            "run_id", "created_at"
        )
    )
    rows = [(proposed[r], approved[r], ended[r]) for r in ended if r in proposed and r in approved]
    if not rows:
        return

    def stat(values: list[float]) -> str:
        return f"p50 {percentile(values, 50) * 1000:.0f} / max {max(values) * 1000:.0f} ms"

    say(
        "  phases: start->proposal "
        + stat([(p - started).total_seconds() for p, _, _ in rows])
        + "; proposal->decided (approver) "
        + stat([(d - p).total_seconds() for p, d, _ in rows])
        + "; decided->completed "
        + stat([(e - d).total_seconds() for _, d, e in rows])
    )


def _wait(run_id: Any, done: Any, timeout: float = 30.0) -> Any:
    from runs.models import Run

    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(pk=run_id)
        if done(run):
            return run
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} stuck in {run.state}")
        time.sleep(0.002)


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


# The scripted approver's poll, every 20 ms: how many of the round's runs have not ended,
# and the approvals they wait for. Plain SQL, not ORM queries compiled anew at every poll:
# the approver shares the two cores with the system it measures.
_UNFINISHED = "SELECT COUNT(*) FROM runs_run WHERE id = ANY(%s) AND disposition = ''"
_PENDING = (
    "SELECT id, proposal_hash FROM approvals_checkpoint "
    "WHERE run_id = ANY(%s) AND status = 'PENDING' AND kind = 'approval'"
)


def _approver_poll(ids: list[str]) -> tuple[int, list[tuple[str, str]]]:
    import uuid

    from django.db import connection

    keys = [uuid.UUID(i) for i in ids]
    with connection.cursor() as cursor:
        cursor.execute(_UNFINISHED, [keys])
        (unfinished,) = cursor.fetchone()
        cursor.execute(_PENDING, [keys])
        return unfinished, cursor.fetchall()


def fieldops_round(count: int, approver: Any) -> tuple[float, list[float], float]:
    """Complete runs/min, approval -> completion of each, and transitions per run."""
    from approvals import services as approvals
    from approvals.models import Decision
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
    while True:
        unfinished, pending = _approver_poll(ids)
        if not unfinished:
            break
        if time.monotonic() > deadline:
            states = list(Run.objects.filter(pk__in=ids).values_list("state", flat=True))
            raise RuntimeError(f"fieldops runs did not finish: {sorted(states)}")
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
    _say_phases(ids, started, approved, ended)
    revisions = list(Run.objects.filter(pk__in=completed).values_list("revision", flat=True))
    return len(completed) / span.total_seconds() * 60, waits, sum(revisions) / len(revisions)


if __name__ == "__main__":
    main()
