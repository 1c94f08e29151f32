"""A/B: CPU per reservation run of this checkout against another, measured side by side.

Not part of ``make bench`` (no target): a change that saves a few per cent of a run's CPU
cannot be seen by running each tree's benchmark in turn on a machine whose speed drifts
(this project's shared hosts swing by 2x within minutes). So this runs both at once, in
lockstep: one child process per checkout, each on its own PostgreSQL benchmark database
with in-process execution (the embedded executor, as ``profile_run.py``); the parent asks
them in turn, in alternating order, for a block of N complete runs (``run_create``, the
approval, the rest of the run), and each reports its own CPU (``time.process_time``) and
its PostgreSQL backend's CPU (``/proc/<pid>/schedstat``, nanoseconds) for the block.
Printed: the medians per run of each, and the median of the paired ratios (this tree /
the other, block by block), with its quartiles.

    .venv/bin/python bench/ab_runs.py /path/to/other/checkout [--blocks 40] [--runs 4]

The other checkout runs on its own ``.venv`` if it has one, else on this one (e.g. a
``git worktree`` of an earlier commit: ``git worktree add /tmp/base <commit>``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def child(dbname: str) -> None:
    """Set up a benchmark database, warm up, then answer "N" on stdin with one line:
    client CPU, backend CPU and wall ms per run over N runs."""
    from common import django_setup, drop_database, make_user, recreate_database

    recreate_database(dbname)
    django_setup(dbname, DJANGO_DEBUG="false", FIELDOPS_EXECUTION="inprocess")
    import profile_run
    from django.db import connection, connections

    try:
        approver = make_user("bench-approver", "north", "approver")
        for _ in range(5):  # imports, connections, prepared statements
            profile_run.one_run(approver)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (backend,) = cursor.fetchone()
        print("ready", flush=True)
        for line in sys.stdin:
            n = int(line)
            backend_before = _cpu_ms(backend)
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(n):
                profile_run.one_run(approver)
            print(
                f"{(time.process_time() - cpu) * 1000 / n:.3f} "
                f"{(_cpu_ms(backend) - backend_before) / n:.3f} "
                f"{(time.perf_counter() - wall) * 1000 / n:.3f}",
                flush=True,
            )
    finally:
        connections.close_all()
        drop_database(dbname)


def _cpu_ms(pid: int) -> float:
    """CPU ms process ``pid`` (a single-threaded PostgreSQL backend) has used so far: the
    scheduler's own nanosecond count (``/proc/<pid>/schedstat``), not ``/proc/<pid>/stat``'s
    10 ms clock ticks, which moved a block's median of a few runs in 1.25 ms steps per run
    (2026-12-08). Ticks only where the kernel keeps no schedstat."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6
    except (OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _start(tree: Path, dbname: str) -> subprocess.Popen[str]:
    python = tree / ".venv" / "bin" / "python"
    if not python.exists():
        python = HERE / ".venv" / "bin" / "python"
    env = dict(os.environ, PYTHONPATH=str(tree), FIELDOPS_LOG_LEVEL="WARNING")
    process = subprocess.Popen(
        [str(python), __file__, "--child", dbname, "--tree", str(tree)],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the child for {tree} did not start")
    return process


def _block(process: subprocess.Popen[str], runs: int) -> list[float]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{runs}\n")
    process.stdin.flush()
    return [float(x) for x in process.stdout.readline().split()]


def compare(other: Path, blocks: int, runs: int) -> None:
    from common import db_name

    trees = {"this": HERE, "other": other.resolve()}
    children = {
        name: _start(tree, db_name(f"fieldops_bench_ab_{name}")) for name, tree in trees.items()
    }
    figures: dict[str, list[list[float]]] = {name: [] for name in trees}
    try:
        for i in range(blocks):
            order = ["this", "other"] if i % 2 == 0 else ["other", "this"]
            for name in order:
                figures[name].append(_block(children[name], runs))
    finally:
        for process in children.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    for name, tree in trees.items():
        client, backend, wall = (statistics.median(c) for c in zip(*figures[name], strict=True))
        print(
            f"{name:5s} {tree}: per run (medians of {blocks} blocks of {runs}): client "
            f"{client:.1f} ms, backend {backend:.1f} ms, total {client + backend:.1f} ms, "
            f"wall {wall:.1f} ms"
        )
    paired = zip(figures["this"], figures["other"], strict=True)
    ratios = [(a[0] + a[1]) / (b[0] + b[1]) for a, b in paired]
    quartiles = statistics.quantiles(ratios, n=4)
    print(
        f"this / other, CPU per run (client + backend), paired by block: median "
        f"{statistics.median(ratios):.3f} (quartiles {quartiles[0]:.3f} - {quartiles[2]:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("other", nargs="?", type=Path, help="the other checkout")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--runs", type=int, default=4, help="runs per block")
    parser.add_argument("--child", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=HERE, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # The checkout measured: its own benchmark helpers and code (a child measures its tree).
    sys.path[:0] = [str(args.tree / "bench"), str(args.tree)]
    if args.child:
        child(args.child)
    elif args.other is None:
        parser.error("name the other checkout")
    else:
        compare(args.other, args.blocks, args.runs)


if __name__ == "__main__":
    main()
