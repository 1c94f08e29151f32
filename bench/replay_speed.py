"""Benchmark 3: audit replay speed.

FieldOps: ``runs.replay.audit.audit_replay`` of a valid 10,000-event run stored in PostgreSQL:
load its events, fold them over the initial run record, recompute every content hash and
integrity link, check every invariant and every evidence reference, compare with the row.

Baseline: only load the same rows from PostgreSQL (raw psycopg) and JSON-decode their
JSON columns. Target: >= 0.5x the baseline's events per second.

Also: the pure in-memory fold (``runs.domain.replay.fast_fold``: sequence, edges, counters)
of the same events >= 1,000,000 events/s, judged on the CPU time the fold takes (its
wall-clock rate, which also counts waiting for a core on a shared machine, is reported
too); and, for reference, the full in-memory ``replay`` (every hash recomputed) without
any database.
"""

from __future__ import annotations

import json
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
    args = parse_args(__doc__ or "")
    reps = 5 if args.quick else 9
    banner(f"3. audit replay of a {EVENTS:,}-event run ({reps} repetitions)")
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false")
    try:
        run_replay(reps)
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
        target=">= 0.5x load + JSON-decode of the same rows",
        passed=audit.median / base.median >= 0.5,
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


if __name__ == "__main__":
    main()
