"""Benchmark 6: a worker's resident memory after 10,000 runs vs after 1,000 runs.

One ``celery worker`` (prefork, 4 pool processes) executes real runs end to end. Every
100 runs are a fixed mix, so the worker sees every path many times within the time limit:

- 1 reservation run: five policy turns, four capability calls, an approval (granted by the
  benchmark through the approval service), the effect, completion verified (COMPLETED);
- 4 ``abstain`` runs: policy call, context projection, validation, escalation (ESCALATED);
- 95 runs pinned to a retired task contract: claimed, refused at start with
  ``contract_version_unknown``, terminal record written, lease released (FAILED).

Runs are created by COPY (the exact rows ``run_create`` makes) and sent as
``runs.tasks.run_advance``. After the first 1,000 runs have ended and again after 10,000
we read the resident set size (VmRSS) of the worker: its main process plus its pool
processes, idle. Target: RSS after 10,000 <= 1.2x after 1,000.
"""

from __future__ import annotations

import time
from collections import Counter

from common import (
    Summary,
    Workers,
    banner,
    celery_bench,
    emit,
    make_user,
    parse_args,
    rss_kib,
    say,
)

DB = "fieldops_bench_memory"
CONCURRENCY = 4
RETIRED_CONTRACT = "fieldops-reservation@0.9.0"
MIX = (("reservation", 1, None), ("abstain", 4, None), ("reservation", 95, RETIRED_CONTRACT))


def main() -> None:
    args = parse_args(__doc__ or "")
    first, total = (100, 1000) if args.quick else (1000, 10000)
    banner(f"6. worker memory after {first:,} and {total:,} runs")
    with celery_bench(DB, "mem", keep=args.keep) as workers:
        workers.start(1, concurrency=CONCURRENCY)
        measure(workers, first, total)


def worker_rss(workers: Workers) -> tuple[int, list[int]]:
    """(main + pool processes, [each pool process]) in KiB."""
    main = workers.processes[0].pid
    children = workers.children()
    pool = [rss_kib(pid) for pid in children]
    return rss_kib(main) + sum(pool), pool


def new_runs(count: int) -> list[str]:
    """``count`` runs (a multiple of 100) in the fixed mix, interleaved."""
    import loader

    groups = [
        loader.created_runs(scenario, share * count // 100, contract_version=contract)
        for scenario, share, contract in MIX
    ]
    mixed: list[str] = []
    for i in range(count // 100):
        for (_, share, _), ids in zip(MIX, groups, strict=True):
            mixed.extend(ids[i * share : (i + 1) * share])
    return mixed


def drive(ids: list[str], approver: object) -> float:
    """Send the runs to the worker, approve what asks for it, wait until all have ended."""
    from approvals import services as approvals
    from approvals.models import Checkpoint
    from fieldops.celery import app
    from runs.models import Run

    started = time.monotonic()
    for run_id in ids:
        app.send_task("runs.tasks.run_advance", args=[run_id])
    deadline = time.monotonic() + 120 + len(ids) * 0.5
    while Run.objects.filter(pk__in=ids, disposition="").exists():
        if time.monotonic() > deadline:
            left = Run.objects.filter(pk__in=ids, disposition="").count()
            raise RuntimeError(f"{left} runs did not end")
        for checkpoint_id, proposal_hash in Checkpoint.objects.filter(
            run_id__in=ids, status=Checkpoint.Status.PENDING
        ).values_list("id", "proposal_hash"):
            approvals.approval_decide(
                checkpoint_id=checkpoint_id,
                user=approver,
                approve=True,
                seen_hash=proposal_hash,
                reason="bench: scripted approver",
            )
        time.sleep(0.5)
    return time.monotonic() - started


def measure(workers: Workers, first: int, total: int) -> None:
    from runs.models import Run

    approver = make_user("bench-approver", "north", "approver")

    samples: dict[int, list[int]] = {}
    done = 0
    marks = [first, total]
    idle_rss, _ = worker_rss(workers)
    say(f"idle worker before any run: {idle_rss / 1024:.1f} MiB")
    batch = 2000
    while done < total:
        size = min(batch, marks[0] - done)
        ids = new_runs(size)
        seconds = drive(ids, approver)
        done += size
        if done == marks[0]:
            marks.pop(0)
            time.sleep(1.0)
            readings = []
            for _ in range(3):  # idle readings: median of three
                readings.append(worker_rss(workers)[0])
                time.sleep(0.3)
            samples[done] = readings
            _, pool = worker_rss(workers)
            say(
                f"after {done:,} runs ({size / seconds:.1f} runs/s in the last batch): worker "
                f"{Summary.of(readings).median / 1024:.1f} MiB, pool processes "
                + ", ".join(f"{p / 1024:.1f} MiB" for p in pool)
            )
    outcomes = Counter(Run.objects.exclude(disposition="").values_list("state", "terminal_reason"))
    say("run outcomes: " + ", ".join(f"{s} {r} x{n:,}" for (s, r), n in outcomes.items()))
    refused = outcomes.get(("FAILED", "contract_version_unknown"), 0)
    if refused != total * MIX[2][1] // 100:
        raise RuntimeError("the runs did not all end as their scenario does")
    after, before = Summary.of(samples[total]), Summary.of(samples[first])
    emit(
        f"memory.worker_rss_kib.after_{total}_runs",
        after,
        "KiB",
        before,
        target=f"<= 1.2x the RSS after {first:,} runs",
        passed=after.median / before.median <= 1.2,
        baseline_label=f"{first:,}",
    )


if __name__ == "__main__":
    main()
