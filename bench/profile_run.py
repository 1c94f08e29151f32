"""Where a reservation run's time goes: cProfile and database round trips per transition.

Not part of ``make bench`` (no figure, no target): the breakdown in bench/README.md is
made with it. It runs N reservation runs end to end in this process (in-process
execution, the embedded executor, on a PostgreSQL benchmark database): ``run_create``
advances each to its approval, ``approval_decide`` approves it and its commit runs the
rest. Printed: round trips per run and per transition, split by what issued them
(the authority's one-statement CAS + insert, Django queries by table), and the cProfile
functions with the most cumulative time.

    .venv/bin/python bench/profile_run.py [--runs N] [--top K]

Instructions per run (load-independent): ``--only N`` runs 3 warm-up runs and then N runs,
nothing else (no profiler, no counting). Under callgrind the difference of two N divided
by the difference of the N is the client's instructions per run:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/profile_run.py --only 4     # and again with --only 12
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import time
import traceback
from collections import Counter
from typing import Any

from common import banner, django_setup, drop_database, make_user, recreate_database, say

DB = "fieldops_bench_profile"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--where",
        action="store_true",
        help="also count statements by the project line issuing them",
    )
    parser.add_argument(
        "--only", type=int, metavar="N", help="3 warm-up runs, then N runs; nothing else"
    )
    args = parser.parse_args()
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false", FIELDOPS_EXECUTION="inprocess")
    try:
        if args.only is not None:
            only(args.only)
        else:
            profile(args.runs, args.top, where=args.where)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(DB)


def one_run(approver: Any) -> Any:
    from approvals import services as approvals
    from approvals.models import Checkpoint
    from runs import services
    from runs.models import Run

    run = services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:bench-operator"
    )
    checkpoint = Checkpoint.objects.get(run=run, status=Checkpoint.Status.PENDING)
    result = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=approver,
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="bench: profile",
    )
    assert result.recorded, result.refusal
    done = Run.objects.get(pk=run.pk)
    assert done.state == "COMPLETED", done.state
    return done


_TABLE = re.compile(r'(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', re.IGNORECASE)


def _caller() -> str:
    """The innermost project frame (not Django, not this script) issuing a query, marked
    ``[orm]`` when the query did not come through ``fieldops.sql`` (a prepared statement)."""
    stack = traceback.extract_stack()[:-3]
    orm = "" if any(f.filename.endswith("fieldops/sql.py") for f in stack) else " [orm]"
    for frame in reversed(stack):
        name = frame.filename
        if (
            "site-packages" in name
            or name.endswith(("profile_run.py", "fieldops/sql.py"))
            or "/django/" in name
        ):
            continue
        where = name.rsplit("/work/", 1)[-1].split("/", 1)[-1]
        return f"{where}:{frame.lineno} {frame.name}{orm}"
    return "?" + orm


def only(runs: int) -> None:
    approver = make_user("bench-approver", "north", "approver")
    for _ in range(3 + runs):
        one_run(approver)


def profile(runs: int, top: int, *, where: bool = False) -> None:
    from django.db import connection

    from runs import authority

    approver = make_user("bench-approver", "north", "approver")
    for _ in range(3):
        one_run(approver)  # imports, connections, prepared statements: not measured
    queries: Counter[str] = Counter()
    callers: Counter[str] = Counter()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        verb = sql.lstrip().split(None, 1)[0].upper()
        match = _TABLE.search(sql)
        what = f"{verb} {match.group(1) if match else ''}".strip()
        queries[what] += 1
        if where:
            callers[f"{what:<34} {_caller()}"] += 1
        return execute(sql, params, many, context)

    real_store = authority._store_postgresql

    def store(*a: Any, **k: Any) -> bool:
        queries["CAS+INSERT runs_run/runs_event (authority, one statement)"] += 1
        return real_store(*a, **k)

    authority._store_postgresql = store  # type: ignore[assignment]
    transitions = 0
    profiler = cProfile.Profile()
    started = time.perf_counter()
    with connection.execute_wrapper(count):
        profiler.enable()
        for _ in range(runs):
            transitions += one_run(approver).revision
        profiler.disable()
    wall = time.perf_counter() - started
    authority._store_postgresql = real_store  # type: ignore[assignment]
    banner(f"profile: {runs} reservation runs, {transitions} transitions, {wall:.2f} s wall")
    total = sum(queries.values())
    say(
        f"{total / runs:.1f} round trips per run, {total / transitions:.2f} per transition, "
        f"{wall / runs * 1000:.1f} ms per run (profiled)"
    )
    for what, n in queries.most_common():
        say(f"{n / runs:7.2f} per run  {what}")
    if where:
        banner("statements by the line issuing them (per run; [orm]: not a prepared statement)")
        for what, n in callers.most_common():
            say(f"{n / runs:7.2f}  {what}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    print(out.getvalue())
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue())


if __name__ == "__main__":
    main()
