"""Where the whole machine's CPU goes per complete run, and what one round trip costs.

Not part of ``make bench`` (no figure, no target): the end-to-end breakdown in
bench/README.md is made with it. Two parts:

1. **A round trip.** A trivial prepared ``SELECT`` on a connection of its own, client and
   backend CPU per statement, user and system apart (``os.times`` and
   ``/proc/<backend>/stat``): one round trip per statement, then ten statements per round
   trip in psycopg's pipeline mode; over TCP to the benchmark server (as every
   benchmark and the documented deployment connect), then over PostgreSQL's Unix socket
   when it has one.
2. **End to end.** Rounds of N reservation runs on 2 Celery workers, exactly as
   ``end_to_end.py`` runs them (its scripted approver), with every process's CPU
   (``/proc/<pid>/stat``) summed by kind before and after each round: the workers' pool
   processes (the runner) and main processes (Celery's receiving and acking), PostgreSQL's
   processes (backends, WAL writer, checkpointer), this process (run creation and the
   approver), Redis, anything else, and the kernel's interrupt work (``/proc/stat``'s
   softirq column); the machine's busy fraction and the WAL written per run
   (``pg_current_wal_lsn``). ``--async-commit`` then runs the same rounds with
   ``synchronous_commit=off`` on every connection: a diagnostic of whether waiting for
   commit flushes is what limits the rate (FieldOps itself always commits durably).

    .venv/bin/python bench/machine_split.py [--runs 80] [--rounds 3] [--async-commit]

Read it on a quiet machine: every process on it is counted.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from common import (
    CLOCK_TICKS_PER_S,
    PG_SERVER,
    Workers,
    banner,
    celery_bench,
    make_user,
    proc_cpu,
    say,
)

DB = "fieldops_bench_machine"
STATEMENTS = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=80, help="runs a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--async-commit",
        action="store_true",
        help="also run the rounds with synchronous_commit=off (a diagnostic)",
    )
    args = parser.parse_args()
    round_trips()
    end_to_end(args.runs, args.rounds, async_commit=args.async_commit)


# -- 1. a round trip ---------------------------------------------------------------------
def round_trips() -> None:
    banner(f"round trip: a trivial prepared SELECT, {STATEMENTS:,} times, CPU per statement")
    server = urlparse(PG_SERVER)
    places = [("TCP", server.hostname or "127.0.0.1")]
    socket_dir = "/var/run/postgresql"
    if Path(socket_dir, f".s.PGSQL.{server.port or 5432}").exists():
        places.append(("Unix socket", socket_dir))
    modes = (("one statement a round trip", False), ("ten a round trip (pipeline)", True))
    for label, host in places:
        for mode, pipelined in modes:
            say(f"{label}, {mode}: {_statement_cost(host, server, pipelined=pipelined)}")


def _statement_cost(host: str, server: Any, *, pipelined: bool) -> str:
    import psycopg

    with psycopg.connect(
        host=host,
        port=server.port or 5432,
        user=server.username or "postgres",
        password=server.password or None,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        backend = conn.info.backend_pid
        cursor = conn.cursor()

        def statements(count: int) -> None:
            batch = 10 if pipelined else 1
            for _ in range(count // batch):
                if pipelined:
                    with conn.pipeline():
                        for i in range(batch):
                            cursor.execute("SELECT %s::int", (i,), prepare=True)
                else:
                    cursor.execute("SELECT %s::int", (1,), prepare=True)
                    cursor.fetchone()

        statements(200)  # prepared, warm
        client, server_cpu, wall = os.times(), proc_cpu(backend), time.perf_counter()
        statements(STATEMENTS)
        wall = (time.perf_counter() - wall) / STATEMENTS * 1e6
        after, server_after = os.times(), proc_cpu(backend)

    def per(value: float) -> float:
        return value / STATEMENTS * 1e6

    cu, cs = per(after.user - client.user), per(after.system - client.system)
    bu, bs = per(server_after[0] - server_cpu[0]), per(server_after[1] - server_cpu[1])
    return (
        f"client {cu:.1f} user + {cs:.1f} system, backend {bu:.1f} + {bs:.1f}, "
        f"total {cu + cs + bu + bs:.1f} us CPU; wall {wall:.1f} us"
    )


# -- 2. end to end -----------------------------------------------------------------------
def end_to_end(runs: int, rounds: int, *, async_commit: bool) -> None:
    import end_to_end as e2e

    modes = [False, True] if async_commit else [False]
    with celery_bench(DB, "machine") as workers:
        approver = make_user("bench-approver", "north", "approver")
        for asynchronous in modes:
            _configure(workers, asynchronous=asynchronous)
            banner(
                f"end to end: {rounds} rounds of {runs} runs on 2 Celery workers"
                + (", synchronous_commit=off (diagnostic)" if asynchronous else "")
            )
            e2e.fieldops_round(4, approver)  # imports, connections, prepared statements
            for _ in range(rounds):
                _measured_round(lambda: e2e.fieldops_round(runs, approver)[0], runs)


def _configure(workers: Workers, *, asynchronous: bool) -> None:
    """(Re)start 2 workers; with ``asynchronous``, every new connection (theirs and this
    process's) commits without waiting for the flush."""
    from django.db import connections

    workers.stop()
    options = "-c synchronous_commit=off" if asynchronous else ""
    workers.env["PGOPTIONS"] = options
    os.environ["PGOPTIONS"] = options
    connections.close_all()
    workers.start(2)


def _measured_round(round_: Callable[[], float], runs: int) -> None:
    before, machine, wal = _processes(), _machine(), _wal_lsn()
    rate = round_()
    after, machine_after, wal_after = _processes(), _machine(), _wal_lsn()
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for pid, (kind, user, system) in after.items():
        _, user_before, system_before = before.get(pid, (kind, 0.0, 0.0))
        spent[kind][0] += user - user_before
        spent[kind][1] += system - system_before
    ticks = [b - a for a, b in zip(machine, machine_after, strict=True)]
    idle = (ticks[3] + ticks[4]) / sum(ticks)  # idle + iowait
    softirq_ms = ticks[6] / CLOCK_TICKS_PER_S / runs * 1000
    parts = ", ".join(
        f"{kind} {user / runs * 1000:.1f}+{system / runs * 1000:.1f}"
        for kind, (user, system) in sorted(spent.items(), key=lambda kv: -sum(kv[1]))
        if user + system > 0
    )
    total = sum(user + system for user, system in spent.values()) / runs * 1000
    say(
        f"{rate:,.0f} runs/min, machine {1 - idle:.0%} busy; CPU ms per run (user+system): "
        f"{parts}; processes {total:.1f}, kernel softirq {softirq_ms:.1f}; "
        f"WAL {(wal_after - wal) / runs / 1024:.1f} KiB per run"
    )


def _processes() -> dict[int, tuple[str, float, float]]:
    """Every process's kind and (user, system) CPU seconds so far."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            user, system = proc_cpu(int(entry.name))
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parent_command = Path(f"/proc/{parent}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            continue  # gone meanwhile
        found[int(entry.name)] = (_kind(int(entry.name), command, parent_command), user, system)
    return found


def _kind(pid: int, command: str, parent_command: str) -> str:
    if pid == os.getpid():
        return "this process (runs created, approver)"
    if "celery" in command:
        return "worker pools" if "celery" in parent_command else "worker mains"
    if "postgres" in command:
        return "PostgreSQL"
    if "redis-server" in command:
        return "Redis"
    return "other"


def _machine() -> list[int]:
    """/proc/stat's first line: user nice system idle iowait irq softirq steal, in ticks."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]


def _wal_lsn() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
        (lsn,) = cursor.fetchone()
    return int(lsn)


if __name__ == "__main__":
    main()
