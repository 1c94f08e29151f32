"""Shared pieces of the benchmarks: databases, Django set-up, statistics, result lines.

Every benchmark uses its own PostgreSQL database (created from a migrated template and
dropped at the end), its own Redis database number and its own queue names, so nothing
collides with the test suite or a developer's worker. Results are printed and appended to
``artifacts/bench/results.jsonl``, one JSON line per figure with exactly the keys
``bench, value, unit, baseline, ratio, target, pass``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "bench"
RESULTS = ARTIFACTS / "results.jsonl"
PG_SERVER = os.environ.get("FIELDOPS_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("FIELDOPS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
# Database names: every benchmark names its databases ``fieldops_bench_*``; on a machine
# where several people run benchmarks against one PostgreSQL, FIELDOPS_BENCH_DB_PREFIX
# replaces that prefix (e.g. ``fieldops_perf_bench``) so nobody drops another's database.
DB_PREFIX = os.environ.get("FIELDOPS_BENCH_DB_PREFIX", "fieldops_bench")


def db_name(name: str) -> str:
    """The actual database name for a benchmark's ``fieldops_bench_*`` name."""
    if name.startswith("fieldops_bench"):
        return DB_PREFIX + name[len("fieldops_bench") :]
    return name


TEMPLATE_DB = db_name("fieldops_bench_template")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- command line ------------------------------------------------------------------------
def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The common options (``--quick``, ``--keep``) and a benchmark's own (``extra``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def banner(title: str) -> None:
    print(f"\n== {title}", flush=True)


def say(text: str) -> None:
    print(f"   {text}", flush=True)


# -- statistics and result lines --------------------------------------------------------
@dataclass(frozen=True)
class Summary:
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        found = tuple(float(v) for v in values)
        if not found:
            raise ValueError("no measurements")
        return cls(found)

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    def text(self, unit: str = "") -> str:
        n = len(self.values)
        unit = f" {unit}" if unit else ""
        if n == 1:
            return f"{_num(self.median)}{unit} (1 run)"
        return (
            f"{_num(self.median)}{unit} (median of {n}; min {_num(self.min)}, max {_num(self.max)})"
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _median(value: Summary | float | None) -> float | None:
    if value is None:
        return None
    return value.median if isinstance(value, Summary) else float(value)


def emit(
    bench: str,
    value: Summary | float,
    unit: str,
    baseline: Summary | float | None,
    *,
    target: str | None,
    passed: bool | None,
    ratio: float | None = None,
    baseline_label: str = "baseline",
) -> dict[str, Any]:
    """Print one figure with its baseline and ratio, and append its JSON line."""
    v = _median(value)
    b = _median(baseline)
    if ratio is None and v is not None and b:
        ratio = v / b
    line = {
        "bench": bench,
        "value": round(v, 4) if v is not None else None,
        "unit": unit,
        "baseline": round(b, 4) if b is not None else None,
        "ratio": round(ratio, 4) if ratio is not None else None,
        "target": target,
        "pass": passed,
    }
    shown = value.text(unit) if isinstance(value, Summary) else f"{_num(v or 0)} {unit}"
    print(f"   {bench}", flush=True)
    print(f"      value    {shown}")
    if baseline is not None:
        base = baseline.text(unit) if isinstance(baseline, Summary) else f"{_num(b or 0)} {unit}"
        print(f"      {baseline_label:<8} {base}")
    verdict = {True: "PASS", False: "MISS", None: "(reported)"}[passed]
    ratio_text = f"{ratio:.2f}x" if ratio is not None else "-"
    print(f"      ratio    {ratio_text}   target {target or '-'}   {verdict}", flush=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    print("      " + json.dumps(line), flush=True)
    return line


# -- databases ---------------------------------------------------------------------------
def pg_url(dbname: str) -> str:
    return f"{PG_SERVER.rstrip('/')}/{db_name(dbname)}"


def _admin() -> Any:
    import psycopg

    u = urlparse(PG_SERVER)
    return psycopg.connect(
        host=u.hostname or "127.0.0.1",
        port=u.port or 5432,
        user=u.username or "postgres",
        password=u.password or None,
        dbname="postgres",
        autocommit=True,
    )


def _migration_stamp() -> str:
    """Changes whenever a migration file changes: the template is rebuilt then."""
    parts = []
    for path in sorted(ROOT.glob("*/migrations/*.py")) + sorted(ROOT.glob("*/*/migrations/*.py")):
        stat = path.stat()
        parts.append(f"{path.relative_to(ROOT)}:{stat.st_size}:{int(stat.st_mtime)}")
    import hashlib

    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _template_ready(stamp: str) -> bool:
    with _admin() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (TEMPLATE_DB,),
        ).fetchone()
    return bool(row) and row[0] == stamp


def _build_template(stamp: str) -> None:
    """Create the migrated, seeded template database (``manage.py migrate`` against it)."""
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}"')
    env = {**os.environ, "DATABASE_URL": pg_url(TEMPLATE_DB), "FIELDOPS_LOG_LEVEL": "WARNING"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    # The reviewed catalog, the synthetic world and the fault-lab principals.
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from sim.setup import seed; seed(demo_users=False)",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with _admin() as conn:
        conn.execute(f"COMMENT ON DATABASE \"{TEMPLATE_DB}\" IS '{stamp}'")


def recreate_database(name: str) -> str:
    """Drop and create ``name`` as a copy of the migrated template; return its URL."""
    name = db_name(name)
    stamp = _migration_stamp()
    if not _template_ready(stamp):
        _build_template(stamp)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE_DB}"')
    return pg_url(name)


def copy_database(source: str, name: str) -> str:
    """Drop and create ``name`` as a copy of the benchmark database ``source`` (which must
    have no open connections); return its URL."""
    source, name = db_name(source), db_name(name)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return pg_url(name)


def drop_database(name: str) -> None:
    name = db_name(name)
    with _admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connections_to(dbname: str, *, exclude_pids: Iterable[int] = ()) -> list[dict[str, Any]]:
    """Client connections open to ``dbname`` (pg_stat_activity), minus ``exclude_pids``."""
    skip = list(exclude_pids)
    dbname = db_name(dbname)
    with _admin() as conn:
        rows = conn.execute(
            "SELECT pid, state, application_name, backend_type FROM pg_stat_activity "
            "WHERE datname = %s AND backend_type = 'client backend' AND pid <> ALL(%s)",
            (dbname, skip),
        ).fetchall()
    return [{"pid": r[0], "state": r[1], "application": r[2]} for r in rows]


# -- Django ------------------------------------------------------------------------------
def django_setup(dbname: str, **env: str) -> None:
    """Point Django at the benchmark database and set it up (call once, before models)."""
    os.environ["DATABASE_URL"] = pg_url(dbname)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fieldops.settings")
    os.environ.setdefault("FIELDOPS_LOG_LEVEL", "WARNING")
    os.environ.update(env)
    import warnings

    import django

    warnings.filterwarnings("ignore", message="No directory at")
    django.setup()


def make_user(username: str, tenant: str, *roles: str) -> Any:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from access.models import Membership
    from access.roles import ensure_groups

    ensure_groups()
    user, _ = get_user_model().objects.get_or_create(username=username)
    Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
    user.groups.set(Group.objects.filter(name__in=roles))
    return user


# -- Celery workers ----------------------------------------------------------------------
def redis_flush() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def queue_name(prefix: str) -> str:
    return f"fieldops_bench_{prefix}_{uuid.uuid4().hex[:6]}"


@dataclass
class Workers:
    """Real ``celery worker`` subprocesses on the benchmark broker, queue and database."""

    dbname: str
    queue: str
    env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def start(self, count: int, *, include: str = "", concurrency: int = 1) -> None:
        for _ in range(count):
            name = f"bench{len(self.processes)}-{uuid.uuid4().hex[:6]}@fieldops-bench"
            environment = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "fieldops.settings",
                "DATABASE_URL": pg_url(self.dbname),
                "CELERY_BROKER_URL": REDIS_URL,
                "FIELDOPS_QUEUE": self.queue,
                "FIELDOPS_EXECUTION": "celery",
                "FIELDOPS_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT),
                **self.env,
            }
            command = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "fieldops",
                "worker",
                "-Q",
                self.queue,
                "-n",
                name,
                "--concurrency",
                str(concurrency),
                "--pool",
                "prefork",
                "-l",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
            if include:
                command += ["--include", include]
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.processes.append(process)
            self.names.append(name)
        for name in self.names[-count:]:
            self._wait_ready(name)

    def _wait_ready(self, name: str) -> None:
        from fieldops.celery import app

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if app.control.ping(destination=[name], timeout=0.5):
                return
        raise RuntimeError(f"worker {name} did not answer a ping")

    def children(self) -> list[int]:
        """Pids of the pool processes (the ones that execute tasks)."""
        out = []
        for process in self.processes:
            out.extend(child_pids(process.pid))
        return out

    def busy(self) -> int:
        """Tasks being executed right now, as the workers report them."""
        from fieldops.celery import app

        replies = app.control.inspect(destination=self.names, timeout=2.0).active() or {}
        return sum(len(tasks) for tasks in replies.values())

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        self.processes.clear()
        self.names.clear()


def configure_client(queue: str) -> None:
    """Make this process a Celery client of the benchmark broker and queue."""
    from django.conf import settings

    from fieldops.celery import app

    settings.FIELDOPS_EXECUTION = "celery"
    app.conf.update(broker_url=REDIS_URL, task_default_queue=queue)
    app._pool = None


def child_pids(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found.extend(int(p) for p in task.read_text().split())
    return found


CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds process ``pid`` has used so far (``/proc/<pid>/stat``;
    PostgreSQL runs on this machine, as for every benchmark here)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS_PER_S, int(fields[12]) / CLOCK_TICKS_PER_S


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


@contextmanager
def celery_bench(dbname: str, label: str, *, keep: bool = False) -> Iterator[Workers]:
    """A fresh benchmark database, this process set up to run on it with Celery execution
    on the benchmark broker and a queue of its own, and workers (not started yet) for that
    queue; afterwards the workers stop, the broker database is flushed and the benchmark
    database dropped (unless ``keep``)."""
    queue = queue_name(label)
    recreate_database(dbname)
    django_setup(
        dbname,
        DJANGO_DEBUG="false",
        FIELDOPS_EXECUTION="celery",
        CELERY_BROKER_URL=REDIS_URL,
        FIELDOPS_QUEUE=queue,
    )
    redis_flush()
    workers = Workers(dbname, queue)
    try:
        yield workers
    finally:
        workers.stop()
        redis_flush()
        from django.db import connections

        connections.close_all()
        if not keep:
            drop_database(dbname)
