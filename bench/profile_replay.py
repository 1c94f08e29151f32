"""Where audit replay's time goes, phase by phase, next to its benchmark baseline.

Not part of ``make bench`` (no target): the replay breakdown in bench/README.md is made
with it. It stores the benchmark's 10,000-event history (``loader.long_history``) in a
PostgreSQL benchmark database, then times, best of N in this process and as CPU time
(``time.process_time``, whatever the machine's load): the baseline of
``replay_speed.py`` (load the rows with psycopg and JSON-decode them), audit replay's
reading alone (``stored_records``: fetch through the server-side cursor and decode), each
piece of the fold on the records in memory, and ``audit_replay`` end to end.

    .venv/bin/python bench/profile_replay.py [--reps N] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Callable
from typing import Any

from common import banner, django_setup, drop_database, recreate_database, say

DB = "fieldops_bench_profile_replay"
EVENTS = 10_000


def best_cpu_ms(fn: Callable[[], Any], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best * 1000


def profile(reps: int) -> None:
    import loader
    import replay_speed
    from django.db import connections

    from kernel import canonical
    from kernel.canonical import canonical_json
    from runs import services
    from runs.authority import config_of
    from runs.domain.events import RunSnapshot, apply
    from runs.domain.invariants import violations
    from runs.domain.replay import replay
    from runs.models import Run
    from runs.replay import audit

    replay_speed.DB = DB
    run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref="user:bench",
        limits={"turns": 10**6, "proposals": 10**6, "actions": 10**6},
        start=False,
    )
    run = loader.long_history(run, EVENTS, loader.real_template())
    connections.close_all()
    records = list(audit.stored_records(run))
    contents = [r.content() for r in records]
    befores = []
    snapshot = RunSnapshot.initial(config_of(run))
    for record in records:
        befores.append(snapshot)
        snapshot = apply(snapshot, record)
    # (the standard encoder by its current name, or the only one before the accelerator)
    standard_canonical_json = getattr(canonical, "standard_canonical_json", canonical_json)
    texts = [standard_canonical_json(c).encode() for c in contents]
    pairs = list(zip(befores, records, strict=True))
    fast = getattr(audit, "stored_content_hash", None)
    phases: dict[str, Callable[[], Any]] = {
        "baseline: load + JSON decode (replay_speed.py)": lambda: replay_speed.load_and_decode(
            str(run.pk)
        ),
        "stored_records: fetch (server-side cursor) + decode": lambda: list(
            audit.stored_records(run)
        ),
        "EventRecord.content()": lambda: [r.content() for r in records],
        "canonical JSON, standard library encoder": lambda: [
            standard_canonical_json(c) for c in contents
        ],
        "canonical JSON, canonical_json (accelerated if installed)": lambda: [
            canonical_json(c) for c in contents
        ],
        "sha256 of the content text": lambda: [hashlib.sha256(t).hexdigest() for t in texts],
        "content hash as audit replay recomputes it": lambda: [
            (fast or type(r).recomputed_content_hash)(r) for r in records
        ],
        "invariants (violations)": lambda: [violations(b, r) for b, r in pairs],
        "apply": lambda: [apply(b, r) for b, r in pairs],
        "replay in memory (whole fold, every hash)": lambda: replay(
            config_of(run), records, ordered=True
        ),
        "audit_replay end to end": lambda: audit.audit_replay(Run.objects.get(pk=run.pk)),
    }
    for name, fn in phases.items():
        say(f"{name:60s} {best_cpu_ms(fn, reps):7.1f} CPU-ms per {EVENTS:,} events")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    banner(f"audit replay of a {EVENTS:,}-event history, phase by phase")
    recreate_database(DB)
    django_setup(DB, DJANGO_DEBUG="false")
    try:
        profile(args.reps)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(DB)


if __name__ == "__main__":
    main()
