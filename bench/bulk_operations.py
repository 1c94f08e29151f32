"""Benchmark 7: operations at fleet scale (issue 22).

Bulk cancel: an operation over 10,000 waiting runs (CREATED, loaded by COPY exactly as
``run_create`` makes them) processed by ``operations.services.operation_drain`` on one and
on two connections, in batches (``FIELDOPS_OPERATION_BATCH_SIZE``, 100): each batch one
transaction that claims its items, locks their runs, decides every cancellation with the
transition authority's own decision and writes events, runs, terminal records and the
items' results in multi-row statements (``runs.services.run_cancel_many``). Every item is
still one authorized transition with its own event and result; the benchmark checks that
each run got exactly one cancel event. Figure: items/s. Baseline: the authority's same-run
transitions/s on one connection (``authority.append`` cycling one run, as benchmark 1
measures it), interleaved with the drain. Target: >= 0.5x.

Export: the runs list's CSV export (``/operations/runs.csv``, a StreamingHttpResponse over a
server-side cursor) of 100,000 and of 1,000,000 runs, read through the test client as an
operator; figure: the process's peak RSS after the larger export, baseline the peak after
the smaller one (peak RSS only grows, so the smaller size is measured first). Target:
<= 1.1x (flat memory).

--quick: 1,000 runs to cancel; exports of 10,000 and 100,000 runs.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from authority_throughput import fieldops_loop, new_run
from common import (
    Summary,
    banner,
    django_setup,
    drop_database,
    emit,
    make_user,
    parse_args,
    recreate_database,
    say,
)

DB = "fieldops_bench_operations"
LOAD_CHUNK = 50_000


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: reset by exec, unlike ru_maxrss)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_runs(count: int) -> None:
    from loader import created_runs

    left = count
    while left > 0:
        step = min(LOAD_CHUNK, left)
        created_runs("reservation", step)
        left -= step


def drain(operation_id: object, workers: int) -> None:
    """Drain the operation with ``workers`` connections at once (SKIP LOCKED shares it)."""
    from django.db import connection

    from operations import services

    def one() -> None:
        try:
            services.operation_drain(operation_id=operation_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def cancel_events(operation: object) -> tuple[int, int]:
    """The operation's runs' cancel events and the runs they are on: equal when every run
    was cancelled exactly once."""
    from django.db.models import Count

    from operations.models import OperationItem
    from runs.models import Event

    events = Event.objects.filter(
        type="run.cancelled",
        run_id__in=OperationItem.objects.filter(operation=operation).values("run_id"),
    ).aggregate(events=Count("id"), runs=Count("run_id", distinct=True))
    return events["events"], events["runs"]


def bulk_cancel(size: int, reps: int, workers: int) -> None:
    from django.db import connection

    from operations import services

    drain_rates, authority_rates = [], []
    for rep in range(reps):
        load_runs(size)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE runs_run")
        query = {"world": "live", "state": "CREATED"}
        preview = services.cancel_preview(tenant="north", query=query)
        started = time.perf_counter()
        operation = services.operation_start_cancel(
            tenant="north", by_ref="user:bench", query=query, reason="bench", confirm=preview.count
        )
        materialised = time.perf_counter() - started
        started = time.perf_counter()
        drain(operation.pk, workers)
        seconds = time.perf_counter() - started
        operation.refresh_from_db()
        assert operation.status == "finished", operation.status
        assert operation.done == preview.count, (operation.done, preview.count)
        assert cancel_events(operation) == (preview.count, preview.count)
        drain_rates.append(operation.done / seconds)
        run_id, epoch = new_run()
        begin = time.perf_counter()
        done = fieldops_loop(run_id, epoch, 1.5, begin)
        authority_rates.append(done / (time.perf_counter() - begin))
        say(
            f"rep {rep + 1}, {workers} connection(s): {operation.done:,} items in {seconds:.1f} s "
            f"({drain_rates[-1]:,.0f}/s; materialised in {materialised:.2f} s); "
            f"authority same-run {authority_rates[-1]:,.0f}/s"
        )
    items, authority = Summary.of(drain_rates), Summary.of(authority_rates)
    ratio = items.median / authority.median
    emit(
        f"operations.bulk_cancel_items_per_s.{size}.{workers}conn",
        items,
        "items/s",
        authority,
        target=">= 0.5x the authority's same-run transitions/s",
        passed=ratio >= 0.5,
        baseline_label="authority",
    )


def export_child() -> None:
    """In a fresh process: export every run's CSV; print the rows and the peak RSS."""
    from django.test import Client

    user = make_user("bench-operator", "north", "operator")
    client = Client()
    client.force_login(user)
    before = peak_rss_mb()
    started = time.perf_counter()
    response = client.get("/operations/runs.csv", {"world": "all"})
    assert response.status_code == 200, response.status_code
    lines = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    seconds = time.perf_counter() - started
    print(
        json.dumps({"rows": lines - 1, "seconds": seconds, "before": before, "peak": peak_rss_mb()})
    )


def export_memory(small: int, large: int) -> None:
    """Each export in its own process (the loader's memory is not the export's)."""
    from runs.models import Run

    peaks = {}
    for size in (small, large):
        missing = size - Run.objects.filter(tenant="north").count()
        if missing > 0:
            load_runs(missing)
        out = subprocess.run(
            [sys.executable, __file__, "--export-child"],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            check=True,
            capture_output=True,
            text=True,
        )
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        peaks[size] = figures["peak"]
        say(
            f"{size:,} runs: {figures['rows']:,} rows in {figures['seconds']:.1f} s; peak RSS "
            f"{figures['peak']:.0f} MB (after set-up {figures['before']:.0f} MB)"
        )
        assert figures["rows"] >= size, (figures, size)
    ratio = peaks[large] / peaks[small]
    emit(
        f"operations.export_peak_rss_mb.{large}",
        peaks[large],
        "MB",
        peaks[small],
        target=f"<= 1.1x the peak at {small:,} rows (flat memory)",
        passed=ratio <= 1.1,
        baseline_label=f"{small:,}",
    )


def main() -> None:
    if "--export-child" in sys.argv:
        django_setup(DB, DJANGO_DEBUG="false", FIELDOPS_EXECUTION="deferred")
        export_child()
        return
    args = parse_args(__doc__ or "")
    size, reps = (1_000, 2) if args.quick else (10_000, 3)
    small, large = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    banner(f"7. operations: bulk cancel of {size:,} waiting runs; export of {small:,} / {large:,}")
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false", FIELDOPS_EXECUTION="deferred")
    try:
        for workers in (1, 2):
            bulk_cancel(size, reps, workers)
        export_memory(small, large)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(DB)


if __name__ == "__main__":
    main()
