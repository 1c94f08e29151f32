"""Where the authority's client CPU per append goes, next to the raw CTE loop's.

Not part of ``make bench`` (no target): the authority breakdown in bench/README.md is made
with it. In this process, on one connection to a PostgreSQL benchmark database, it
alternates blocks of N appends through ``runs.authority.append`` (the loop of
``authority_throughput.py``) with N appends of the raw prepared single-statement CTE, and
reports per append the client's CPU (``time.process_time``: what this process spent,
whatever the machine's load), the PostgreSQL backend's CPU (its ``/proc`` entry: equal for
both loops shows the difference is the client's alone) and the wall time. ``--cprofile``
profiles the FieldOps blocks; ``--parts`` times the authority's pieces one by one on an
in-memory event.

``--instructions`` counts instead of timing: each side runs in fresh processes under
valgrind's callgrind (``--only``, with 200 and with 200 + N appends), and the difference
of the two counts over N is the client's instructions per append, exact and the same on a
loaded machine as on a quiet one (the kernel's share of a round trip is not counted, so
compare it with the timed figures, not instead of them). Needs ``valgrind``; ~4 minutes.

    .venv/bin/python bench/profile_authority.py [--appends N] [--rounds R] [--cprofile] [--parts]
    .venv/bin/python bench/profile_authority.py --instructions [--appends N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from authority_throughput import new_run, payload, raw_append
from common import (
    banner,
    django_setup,
    drop_database,
    pg_url,
    proc_cpu,
    recreate_database,
    say,
)

DB = "fieldops_bench_profile_authority"


def fieldops_block(state: dict[str, Any], n: int) -> None:
    from runs import authority
    from runs.domain.states import Actor, EventType

    cycle = [
        (EventType.OBSERVATION_RECORDED, Actor.HARNESS, None),
        (EventType.PROPOSAL_EMITTED, Actor.MODEL, {"turns": 1, "proposals": 1}),
        (EventType.PROPOSAL_ALLOWED, Actor.HARNESS, {"actions": 1}),
        (EventType.OBSERVATION_RECEIVED, Actor.CAPABILITY_ADAPTER, None),
    ]
    run, epoch = state["run"], state["epoch"]
    for _ in range(n):
        i = state["i"]
        type_, actor, delta = cycle[i % 4]
        result = authority.append(
            run_id=state["run_id"],
            expected_revision=run.revision,
            expected_epoch=epoch,
            type=type_,
            actor=actor,
            reason_code="ok",
            refs={"observation": f"ev-{i:020d}"},
            payload=payload(i),
            counters_delta=delta,
            run=run,
        )
        assert result.applied, result.refusal
        state["i"] = i + 1


def raw_block(state: dict[str, Any], n: int) -> None:
    cur, run_id, epoch = state["cur"], state["run_id"], state["epoch"]
    for _ in range(n):
        raw_append(cur, run_id, epoch, state["revision"], state["done"])
        state["revision"], state["done"] = state["revision"] + 1, state["done"] + 1


def _start_fieldops() -> dict[str, Any]:
    from runs import authority
    from runs.domain.states import Actor, EventType
    from runs.models import Run

    run_id, epoch = new_run()
    run = Run.objects.get(pk=run_id)
    result = authority.append(
        run_id=run_id,
        expected_revision=0,
        expected_epoch=epoch,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="contract_valid",
        refs={"observation": "rq-profile"},
        run=run,
    )
    assert result.applied
    return {"run": run, "run_id": run_id, "epoch": epoch, "i": 0}


def _start_raw() -> dict[str, Any]:
    import psycopg

    run_id, epoch = new_run()
    conn = psycopg.connect(pg_url(DB), autocommit=True)
    cur = conn.cursor()
    (revision,) = cur.execute("SELECT revision FROM runs_run WHERE id = %s", (run_id,)).fetchone()
    return {
        "conn": conn,
        "cur": cur,
        "run_id": run_id,
        "epoch": epoch,
        "revision": revision,
        "done": 0,
    }


def backend_cpu_us(pid: int) -> float:
    """User + system CPU the PostgreSQL backend ``pid`` has used so far, in microseconds."""
    return sum(proc_cpu(pid)) * 1e6


def timed(block: Any, state: dict[str, Any], n: int, backend: int) -> tuple[float, float, float]:
    """Client CPU, wall time and the backend's CPU (``backend``: its pid) per append."""
    wall, cpu, server = time.perf_counter(), time.process_time(), backend_cpu_us(backend)
    block(state, n)
    return (
        (time.process_time() - cpu) / n * 1e6,
        (time.perf_counter() - wall) / n * 1e6,
        (backend_cpu_us(backend) - server) / n,
    )


def compare(appends: int, rounds: int, profile: str | None) -> None:
    fo, raw = _start_fieldops(), _start_raw()
    fieldops_block(fo, 50)  # warm up: prepare the statement, fill caches
    raw_block(raw, 50)
    from django.db import connection

    backends = {
        "fieldops": connection.connection.info.backend_pid,
        "raw": raw["conn"].info.backend_pid,
    }
    samples: dict[str, list[tuple[float, float, float]]] = {"fieldops": [], "raw": []}
    profiler = cProfile.Profile() if profile else None
    for _ in range(rounds):
        # A fresh run each round, so no history grows past the size that logs a warning.
        fo = _start_fieldops()
        raw["run_id"], raw["epoch"] = new_run()
        raw["revision"] = raw["done"] = 0
        for name, block, state in (("raw", raw_block, raw), ("fieldops", fieldops_block, fo)):
            if profiler is not None and profile == name:
                profiler.enable()
            samples[name].append(timed(block, state, appends, backends[name]))
            if profiler is not None:
                profiler.disable()
    for name, values in samples.items():
        cpu = statistics.median(v[0] for v in values)
        wall = statistics.median(v[1] for v in values)
        server = statistics.median(v[2] for v in values)
        say(
            f"{name:8s} client CPU {cpu:6.1f} us/append, backend CPU {server:6.1f} us/append, "
            f"wall {wall:6.1f} us/append (median of {rounds} x {appends})"
        )
    fo_cpu = statistics.median(v[0] for v in samples["fieldops"])
    raw_cpu = statistics.median(v[0] for v in samples["raw"])
    say(f"authority's own client CPU beyond the raw loop: {fo_cpu - raw_cpu:.1f} us/append")
    raw["conn"].close()
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(35)
        pstats.Stats(profiler, stream=out).print_callees("_send_query_prepared|_maybe_prepare_gen")
        print(out.getvalue())


def parts(n: int) -> None:
    """The authority's pieces one by one, on the benchmark's event (CPU us per call)."""
    from django.db import connection

    from kernel import canonical, clock
    from runs import authority, event_rows
    from runs.domain import guards, invariants
    from runs.domain.events import apply, build_event
    from runs.domain.states import Actor, EventType, State

    fo = _start_fieldops()
    fieldops_block(fo, 5)  # in DECIDING: proposal.emitted is the next edge
    run = fo["run"]
    snapshot = authority.snapshot_of(run)
    pay = payload(7)
    refs = {"observation": "ev-00000000000000000007"}
    delta = {"turns": 1, "proposals": 1}

    def build() -> Any:
        return build_event(
            snapshot,
            event_id="0b6a8f3e-8f51-4c1e-9a52-3f4d0e1c2b7a",
            type=EventType.PROPOSAL_EMITTED,
            actor=Actor.MODEL,
            next_state=State.VALIDATING,
            occurred_at=clock.iso(clock.now()),
            counters_delta=delta,
            elapsed_ms=authority.elapsed_ms(run),
            reason_code="ok",
            refs=refs,
            payload=pay,
        )

    event = build()
    after = apply(snapshot, event)
    row = authority.Run.objects.get(pk=run.pk)  # a row to bring up to date, again and again
    limits = authority._limits()
    pieces: dict[str, Any] = {
        "snapshot_of(run)": lambda: authority.snapshot_of(run),
        "config_of(run)": lambda: authority.config_of(run),
        "_check_request (payload size)": lambda: authority._check_request(
            EventType.PROPOSAL_EMITTED, Actor.MODEL, delta, pay
        ),
        "guards.refusal + history": lambda: (
            guards.refusal(snapshot, EventType.PROPOSAL_EMITTED, Actor.MODEL, refs, delta),
            guards.history_refusal(
                snapshot, EventType.PROPOSAL_EMITTED, event_bytes=run.event_bytes, limits=limits
            ),
        ),
        "_limits()": authority._limits,
        "build_event (all)": build,
        "  canonical_json(content)": lambda: canonical.canonical_json(event.content()),
        "  event.content()": event.content,
        "  clock.iso(clock.now())": lambda: clock.iso(clock.now()),
        "invariants.assert_invariants": lambda: invariants.assert_invariants(snapshot, event),
        "apply(snapshot, event)": lambda: apply(snapshot, event),
        "event_rows.values(json_text)": lambda: event_rows.values(event, json_text=True),
        "event_rows.run_state(json_text)": lambda: event_rows.run_state(after, json_text=True),
        "event_rows.apply_to_row": lambda: event_rows.apply_to_row(row, after),
        "connection flags": lambda: (
            connection.vendor,
            connection.get_autocommit(),
            connection.in_atomic_block,
        ),
    }
    for name, fn in pieces.items():
        fn()
        cpu = time.process_time()
        for _ in range(n):
            fn()
        say(f"{name:34s} {(time.process_time() - cpu) / n * 1e6:7.1f} us")


def instructions(appends: int) -> None:
    """Client instructions per append of each side, counted by callgrind (see the module
    docstring), and where the FieldOps side's extra instructions go, by shared object."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install -y valgrind)")
    counts: dict[str, float] = {}
    objects: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("raw", "fieldops"):
            totals, per_object = [], []
            for n in (200, 200 + appends):
                out = os.path.join(tmp, f"{side}.{n}.out")
                subprocess.run(
                    [
                        "valgrind",
                        "--tool=callgrind",
                        f"--callgrind-out-file={out}",
                        sys.executable,
                        __file__,
                        "--only",
                        side,
                        "--appends",
                        str(n),
                    ],
                    check=True,
                    capture_output=True,
                )
                totals.append(_callgrind_total(out))
                per_object.append(_callgrind_objects(out))
            counts[side] = (totals[1] - totals[0]) / appends
            objects[side] = {
                name: (per_object[1].get(name, 0) - per_object[0].get(name, 0)) / appends
                for name in per_object[1]
            }
    for side, count in counts.items():
        say(f"{side:8s} {count:9,.0f} instructions/append (callgrind, {appends} appends)")
    extra, ratio = counts["fieldops"] - counts["raw"], counts["fieldops"] / counts["raw"]
    say(f"authority's own instructions beyond the raw loop: {extra:,.0f}/append ({ratio:.2f}x)")
    for name in sorted(objects["fieldops"], key=lambda k: -objects["fieldops"][k])[:6]:
        say(
            f"  {name:44s} fieldops {objects['fieldops'][name]:9,.0f}   "
            f"raw {objects['raw'].get(name, 0):9,.0f}"
        )


def _callgrind_total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def _callgrind_objects(path: str) -> dict[str, int]:
    """Instructions by shared object (the interpreter, libpq, libcrypto, orjson, ...)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    out: dict[str, int] = {}
    for count, obj in re.findall(r"^\s*([\d,]+) \([^)]*\)\s+.*\[(.+?)\]\s*$", text, re.M):
        name = os.path.basename(obj)
        out[name] = out.get(name, 0) + int(count.replace(",", ""))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cprofile", choices=("fieldops", "raw"), help="profile one side")
    parser.add_argument("--parts", action="store_true")
    parser.add_argument(
        "--only",
        choices=("fieldops", "raw"),
        help="run just N appends of one side after a 50-append warm-up (for callgrind: the "
        "difference of two N gives instructions per append)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count client instructions per append under callgrind instead of timing",
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.only:
        django_setup(DB, DJANGO_DEBUG="false")
        block, start = {
            "fieldops": (fieldops_block, _start_fieldops),
            "raw": (raw_block, _start_raw),
        }[args.only]
        state = start()
        block(state, 50)
        block(state, args.appends)
        return
    if args.instructions:
        banner("authority client instructions per append vs the raw CTE loop")
        recreate_database(DB)
        try:
            instructions(args.appends)
        finally:
            if not args.keep:
                drop_database(DB)
        return
    banner("authority client CPU per append vs the raw CTE loop")
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false")
    try:
        compare(args.appends, args.rounds, args.cprofile)
        if args.parts:
            parts(5000)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(DB)


if __name__ == "__main__":
    main()
