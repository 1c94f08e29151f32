"""Benchmark 3: audit replay speed.

FieldOps: ``runs.replay.audit.audit_replay`` of a valid 10,000-event run stored in PostgreSQL:
load its events, fold them over the initial run record, recompute every content hash and
integrity link, check every invariant and every evidence reference, compare with the row.

Baseline: only load the same rows from PostgreSQL (raw psycopg) and JSON-decode their
JSON columns. Target: >= 0.85x the baseline's events per second.

Unbounded histories: a long run (1,000,000 events; quick 100,000) and a 10,000-event run,
each audit-replayed in a fresh process (the replay streams through a server-side cursor):
peak RSS (ru_maxrss) of the long run <= 1.2x the short run's, and its time per event
within 1.2x. Both must replay clean.

Also: the pure in-memory fold (``runs.domain.replay.fast_fold``: sequence, edges, counters)
of the same events >= 1,000,000 events/s, judged on the CPU time the fold takes (its
wall-clock rate, which also counts waiting for a core on a shared machine, is reported
too); and, for reference, the full in-memory ``replay`` (every hash recomputed) without
any database.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from common import (
    Summary,
    banner,
    django_setup,
    drop_database,
    emit,
    parse_args,
    pg_url,
    recreate_database,
    say,
)

DB = "fieldops_bench_replay"
EVENTS = 10_000
FOLD_PASSES = 10


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--replay-one":
        replay_one(sys.argv[2])
        return
    args = parse_args(__doc__ or "")
    reps = 5 if args.quick else 9
    long_events = 100_000 if args.quick else 1_000_000
    banner(f"3. audit replay of a {EVENTS:,}-event run ({reps} repetitions)")
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false")
    try:
        run_replay(reps)
        unbounded(long_events, 2 if args.quick else 3)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(DB)


def load_and_decode(run_id: str) -> int:
    """The baseline: fetch the rows and decode their JSON, nothing else."""
    import psycopg

    with psycopg.connect(pg_url(DB)) as conn:
        rows = conn.execute(
            "SELECT event_id, run_id, sequence, attempt, owner_epoch, type, actor, prev_state, "
            "next_state, contract_version, policy_version, component_set, budget::text, "
            "cancel_revision, reason_code, refs::text, payload::text, occurred_at, "
            "schema_version, prev_hash, content_hash, hash "
            "FROM runs_event WHERE run_id = %s ORDER BY sequence, id",
            (run_id,),
        ).fetchall()
        decoded = [
            (r[:12], json.loads(r[12]), r[13:15], json.loads(r[15]), json.loads(r[16]), r[17:])
            for r in rows
        ]
    return len(decoded)


def run_replay(reps: int) -> None:
    import loader
    from django.db import connections

    from runs import services
    from runs.authority import config_of, record_of
    from runs.domain.replay import fast_fold, replay
    from runs.models import Event, Run
    from runs.replay.audit import audit_replay

    template = loader.real_template()
    run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref="user:bench",
        limits={"turns": 10**6, "proposals": 10**6, "actions": 10**6},
        start=False,
    )
    run = loader.long_history(run, EVENTS, template)
    result, findings = audit_replay(run)
    if findings or result.events_applied != EVENTS:
        raise RuntimeError(f"the benchmark history does not replay cleanly: {findings[:3]}")
    say(f"run {run.pk}: {EVENTS:,} events, audit replay clean ({result.snapshot.state})")

    audit_rates, base_rates = [], []
    for _ in range(reps):
        connections.close_all()  # each replay opens its connection, as a request would
        started = time.perf_counter()
        assert load_and_decode(str(run.pk)) == EVENTS
        base_rates.append(EVENTS / (time.perf_counter() - started))
        connections.close_all()
        started = time.perf_counter()
        result, findings = audit_replay(Run.objects.get(pk=run.pk))
        audit_rates.append(EVENTS / (time.perf_counter() - started))
        assert not findings and result.events_applied == EVENTS

    records = [record_of(r) for r in Event.objects.filter(run=run).order_by("sequence")]
    rows = [
        (e.sequence, e.type.value, e.prev_state.value, e.next_state.value, e.budget)
        for e in records
    ]
    fold_rates, fold_cpu_rates, full_rates, reference_ms = [], [], [], []
    for _ in range(reps):
        # The fold's target is absolute, so each sample is paired with a fixed piece of
        # interpreter work: on a shared virtual machine the core's speed varies (seen here:
        # the same fold at 0.7M and at 1.3M events/CPU-s minutes apart).
        cpu = time.process_time()
        sum(range(10**6))
        reference_ms.append((time.process_time() - cpu) * 1000)
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(FOLD_PASSES):  # ~5 ms a pass: several per sample, for a stable clock
            folded = fast_fold(rows)
        fold_cpu_rates.append(FOLD_PASSES * len(rows) / (time.process_time() - cpu))
        fold_rates.append(FOLD_PASSES * len(rows) / (time.perf_counter() - started))
        assert folded.problems == 0 and folded.revision == EVENTS
        started = time.perf_counter()
        full = replay(config_of(run), records)
        full_rates.append(len(records) / (time.perf_counter() - started))
        assert full.ok

    audit, base = Summary.of(audit_rates), Summary.of(base_rates)
    emit(
        "replay.audit_events_per_s.postgresql",
        audit,
        "events/s",
        base,
        target=">= 0.85x load + JSON-decode of the same rows",
        passed=audit.median / base.median >= 0.85,
        baseline_label="load",
    )
    # The fold is single-threaded pure CPU: its cost is the CPU time it takes. On a shared
    # machine the wall-clock rate also counts time the process waited for a core; both
    # are reported, the target is judged on the fold's own (CPU) time.
    fold_cpu = Summary.of(fold_cpu_rates)
    emit(
        "replay.fast_fold_events_per_cpu_s.memory",
        fold_cpu,
        "events/CPU-s",
        1_000_000,
        target=">= 1,000,000 events/s",
        passed=fold_cpu.median >= 1_000_000,
        baseline_label="target",
    )
    emit(
        "replay.fast_fold_events_per_s.memory_wall_clock",
        Summary.of(fold_rates),
        "events/s",
        1_000_000,
        target=None,
        passed=None,
        baseline_label="target",
    )
    emit(
        "replay.machine_reference_ms.sum_range_1e6",
        Summary.of(reference_ms),
        "CPU-ms",
        None,
        target=None,
        passed=None,
    )
    emit(
        "replay.full_replay_events_per_s.memory",
        Summary.of(full_rates),
        "events/s",
        base,
        target=None,
        passed=None,
        baseline_label="load",
    )


def replay_one(run_id: str) -> None:
    """In a fresh process: audit-replay one run, print events, seconds and peak RSS."""
    django_setup(DB, DJANGO_DEBUG="false")
    from runs.models import Run
    from runs.replay.audit import audit_replay

    run = Run.objects.get(pk=run_id)
    started = time.perf_counter()
    result, findings = audit_replay(run)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {"events": result.events_applied, "findings": len(findings), "seconds": seconds}
    print(json.dumps({**out, "peak_rss_kib": peak}))


def _replay_in_child(run_id: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--replay-one", run_id],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def unbounded(long_events: int, reps: int) -> None:
    """A long history replays in the memory of a short one, at the same time per event."""
    import loader
    from django.db import connections

    from runs import services

    template = loader.real_template()
    runs = {}
    for count in (EVENTS, long_events):
        started = time.perf_counter()
        run = services.run_create(
            scenario="reservation",
            tenant="north",
            principal_ref="user:bench",
            limits={"turns": 10**7, "proposals": 10**7, "actions": 10**7},
            start=False,
        )
        runs[count] = str(loader.long_history(run, count, template).pk)
        say(f"{count:,}-event run stored in {time.perf_counter() - started:.1f} s")
    connections.close_all()
    samples: dict[int, list[dict[str, float]]] = {EVENTS: [], long_events: []}
    for _ in range(reps):  # interleaved
        for count, run_id in runs.items():
            sample = _replay_in_child(run_id)
            if sample["findings"] or sample["events"] != count:
                raise RuntimeError(f"the {count:,}-event run does not replay clean: {sample}")
            samples[count].append(sample)
    rss = {c: Summary.of(s["peak_rss_kib"] / 1024 for s in v) for c, v in samples.items()}
    per_event = {c: Summary.of(s["seconds"] / c * 1e6 for s in v) for c, v in samples.items()}
    tag = f"{long_events // 1000}k_vs_{EVENTS // 1000}k"
    emit(
        f"replay.audit_peak_rss_mib.{tag}",
        rss[long_events],
        "MiB",
        rss[EVENTS],
        target="<= 1.2x the 10,000-event run's",
        passed=rss[long_events].median / rss[EVENTS].median <= 1.2,
        baseline_label="10k run",
    )
    emit(
        f"replay.audit_us_per_event.{tag}",
        per_event[long_events],
        "us/event",
        per_event[EVENTS],
        target="<= 1.2x the 10,000-event run's",
        passed=per_event[long_events].median / per_event[EVENTS].median <= 1.2,
        baseline_label="10k run",
    )


if __name__ == "__main__":
    main()
