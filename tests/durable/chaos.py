"""Machinery of the real-process chaos test (``tests/durable/test_chaos.py``).

- ``Fleet``: the deployment as the README documents it, as subprocesses: one gunicorn web
  process, N Celery worker processes (prefork) and one beat (the sweeper), all on the
  test database, their own Redis database and their own queue. ``Fleet.shutdown`` resumes
  and stops every process it ever started, orphaned pool children included.
- ``Chaos``: a thread that, from a seeded random generator, SIGKILLs worker pool children
  (sometimes a worker's parent, which is then restarted) and SIGSTOPs a child or a whole
  worker for longer than the lease, then SIGCONTs it.
- ``Desk``: an operator and an approver at their browsers (real HTTP, login, CSRF), who
  start runs through the console's start form, approve through the exact-proposal page
  with the hash the page shows, and cancel now and then.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from runs.engine import liveness
from runs.models import Run
from tests.deploy.servers import ROOT, Browser, WebProcess, run_id_of
from tests.durable.conftest import Cluster

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')
# The 409 page of a refused cancel names the state the run was in, or who cancelled it
# first (runs/console/runs_views.py).
CANCEL_REFUSED_IN = re.compile(
    r"The run (?:is ([A-Z_]+) and cannot be cancelled now|was already cancelled by)"
)


def children_of(pid: int) -> list[int]:
    """The direct children of ``pid`` (a worker's pool processes); empty once it is gone."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return []


def signal_pid(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Fleet:
    """Web, workers and beat on one queue of one Redis database and the test database."""

    cluster: Cluster
    tmp: Path
    size: int = 3
    concurrency: int = 2
    worker_env: dict[str, str] = field(default_factory=dict)
    slots: list[subprocess.Popen[bytes]] = field(default_factory=list)
    groups: set[int] = field(default_factory=set)  # every process group ever started
    beat: subprocess.Popen[bytes] | None = None
    web: WebProcess | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def env(self) -> dict[str, str]:
        return {
            "DATABASE_URL": self.cluster.database_url,
            "CELERY_BROKER_URL": self.broker_url,
            "FIELDOPS_QUEUE": self.cluster.queue,
            "FIELDOPS_EXECUTION": "celery",
            "FIELDOPS_LEASE_SECONDS": str(self.cluster.lease_seconds),
            "FIELDOPS_LOG_LEVEL": "WARNING",
            **self.worker_env,
        }

    @property
    def broker_url(self) -> str:
        from tests.durable.conftest import REDIS_URL

        return REDIS_URL

    def start(self, web: WebProcess) -> None:
        for _ in range(self.size):
            self._start_worker()
        with (self.tmp / "beat.log").open("ab") as log:
            self.beat = self._popen_beat(log)
        self.groups.add(self.beat.pid)
        self.web = web
        web.start()
        if web.process is not None:
            self.groups.add(web.process.pid)

    def _popen_beat(self, log: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "fieldops",
                "beat",
                "-s",
                str(self.tmp / "beat-schedule"),
                "--pidfile",
                str(self.tmp / "beat.pid"),
                "-l",
                "WARNING",
            ],
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "fieldops.settings", **self.env()},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _start_worker(self, slot: int | None = None) -> subprocess.Popen[bytes]:
        process = self.cluster.start_worker(concurrency=self.concurrency, **self.worker_env)
        with self.lock:
            self.groups.add(process.pid)
            if slot is None:
                self.slots.append(process)
            else:
                self.slots[slot] = process
        return process

    def restart(self, slot: int) -> None:
        """Start a new worker in the slot of one whose parent died. Its orphaned pool
        children are left to themselves, as after a real crash (a child busy with a run
        finishes, fenced if someone took over, then exits); ``shutdown`` kills any left."""
        self._start_worker(slot)

    def ensure_full(self) -> int:
        """Restart every worker whose parent is gone; return how many were restarted."""
        dead = [i for i, p in enumerate(self.slots) if p.poll() is not None]
        for slot in dead:
            self.restart(slot)
        return len(dead)

    def pool_children(self) -> dict[int, int]:
        """pid of each live pool child -> its worker slot."""
        with self.lock:
            slots = list(enumerate(self.slots))
        return {c: i for i, p in slots if p.poll() is None for c in children_of(p.pid)}

    def resume_everything(self) -> None:
        for pgid in sorted(self.groups):
            signal_group(pgid, signal.SIGCONT)

    def shutdown(self) -> None:
        """Resume and stop every process this fleet started (also after a failure), so none
        still holds a connection when the test database is dropped."""
        self.resume_everything()
        if self.web is not None:
            self.web.stop()
        if self.beat is not None and self.beat.poll() is None:
            signal_group(self.beat.pid, signal.SIGTERM)
            try:
                self.beat.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signal_group(self.beat.pid, signal.SIGKILL)
        self.cluster.stop_all()
        for pgid in sorted(self.groups):  # orphaned pool children of killed parents
            signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_group_alive(g) for g in self.groups):
            time.sleep(0.1)


@contextlib.contextmanager
def started_fleet(
    cluster: Any, tmp: Path, *, size: int, concurrency: int, lease_seconds: int
) -> Iterator[Fleet]:
    """A ``Fleet`` of ``size`` workers on ``cluster`` with a ``lease_seconds`` lease, runs
    seen stuck after 2 s and a sweep every second; shut down on leaving (before the
    cluster's teardown and before the database is dropped)."""
    cluster.lease_seconds = lease_seconds
    cluster.log_dir = tmp
    fleet = Fleet(
        cluster,
        tmp,
        size=size,
        concurrency=concurrency,
        worker_env={
            "FIELDOPS_STUCK_AFTER_SECONDS": "2",
            "FIELDOPS_SWEEP_INTERVAL_SECONDS": "1",
        },
    )
    try:
        yield fleet
    finally:
        fleet.shutdown()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still counts for killpg until it is reaped; reap what is ours.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(-pgid, os.WNOHANG)
    return _group_has_live_member(pgid)


def _group_has_live_member(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class ChaosStats:
    child_kills: int = 0
    parent_kills: int = 0
    pauses: int = 0
    worker_pauses: int = 0  # of those: a whole worker (parent and children) frozen
    restarts: int = 0
    busy_targets: int = 0  # faults aimed at a process that held a run's lease


class Chaos(threading.Thread):
    """SIGKILL and SIGSTOP worker processes at random (seeded) until ``stop()``.

    Every step picks, with fixed weights, one of: kill a pool child, kill a worker's
    parent (restarted at once), pause a pool child, pause a whole worker. Targets are
    preferably processes that hold a run's lease right now (the lease owner names the
    child's pid), so faults land inside the reservation path rather than on idle
    processes. A pause lasts longer than the lease, so another worker takes the run over
    while the old owner is frozen; at most ``max_paused`` workers are frozen at once.
    """

    WEIGHTS = (("kill_child", 40), ("kill_parent", 8), ("pause_child", 37), ("pause_worker", 15))

    def __init__(self, fleet: Fleet, rng: random.Random, *, lease_seconds: int) -> None:
        super().__init__(name="chaos", daemon=True)
        self.fleet = fleet
        self.rng = rng
        self.lease_seconds = lease_seconds
        self.stats = ChaosStats()
        self.error: BaseException | None = None
        self.max_paused = max(1, fleet.size - 1)
        self._stop_event = threading.Event()
        self._paused: dict[int, tuple[str, int, threading.Timer]] = {}  # key -> (kind, id, t)
        self._paused_lock = threading.Lock()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=60)
        with self._paused_lock:
            paused = list(self._paused.values())
            self._paused.clear()
        for kind, target, timer in paused:
            timer.cancel()
            self._resume(kind, target)

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.rng.uniform(0.3, 1.2)):
                self.step()
        except BaseException as exc:  # reported by the test, never swallowed
            self.error = exc
        finally:
            connection.close()  # this thread's own database connection

    def step(self) -> None:
        restarted = self.fleet.ensure_full()
        self.stats.restarts += restarted
        children = self.fleet.pool_children()
        if not children:
            return
        action = self.rng.choices(
            [a for a, _ in self.WEIGHTS], weights=[w for _, w in self.WEIGHTS]
        )[0]
        busy = sorted(set(children) & self._lease_holders())
        if busy and self.rng.random() < 0.75:
            child = self.rng.choice(busy)
            self.stats.busy_targets += 1
        else:
            child = self.rng.choice(sorted(children))
        slot = children[child]
        parent = self.fleet.slots[slot]
        if action == "kill_child":
            if signal_pid(child, signal.SIGKILL):
                self.stats.child_kills += 1
        elif action == "kill_parent":
            if parent.poll() is None and signal_pid(parent.pid, signal.SIGKILL):
                self.stats.parent_kills += 1
                with contextlib.suppress(subprocess.TimeoutExpired):
                    parent.wait(timeout=5)
                self.fleet.restart(slot)
                self.stats.restarts += 1
        elif action == "pause_child":
            self._pause("pid", child)
        else:
            self._pause("group", parent.pid)

    def _lease_holders(self) -> set[int]:
        """Pool children that hold a run's lease now (lease owner
        ``celery@host:pid:start:scope``)."""
        owners = Run.objects.exclude(lease_owner="").values_list("lease_owner", flat=True)
        return {named.pid for named in map(liveness.parse, owners) if named is not None}

    def _pause(self, kind: str, target: int) -> None:
        with self._paused_lock:
            groups = {t for k, t, _ in self._paused.values() if k == "group"}
            if target in self._paused or len(self._paused) >= self.max_paused:
                return
            try:
                if kind == "pid" and os.getpgid(target) in groups:
                    return  # its whole worker is frozen already
            except ProcessLookupError:
                return
            sent = (signal_group if kind == "group" else signal_pid)(target, signal.SIGSTOP)
            if not sent:
                return
            seconds = self.rng.uniform(self.lease_seconds + 1.0, self.lease_seconds + 5.0)
            timer = threading.Timer(seconds, self._timer_resume, args=(target,))
            timer.daemon = True
            self._paused[target] = (kind, target, timer)
            timer.start()
        self.stats.pauses += 1
        self.stats.worker_pauses += kind == "group"

    def _timer_resume(self, target: int) -> None:
        with self._paused_lock:
            entry = self._paused.pop(target, None)
        if entry is not None:
            self._resume(entry[0], entry[1])

    @staticmethod
    def _resume(kind: str, target: int) -> None:
        (signal_group if kind == "group" else signal_pid)(target, signal.SIGCONT)


class Desk:
    """The operator and the approver (two people, two browsers) of tenant north."""

    def __init__(self, base_url: str, *, operator: str, approver: str) -> None:
        self.operator = Browser(base_url)
        self.operator.login(operator, "pw-" + operator)
        self.approver = Browser(base_url)
        self.approver.login(approver, "pw-" + approver)
        self.statuses: Counter[str] = Counter()
        self.server_errors: list[str] = []
        self.posted: set[str] = set()  # checkpoints approved (one post each)

    def _note(self, action: str, status: int, what: str) -> None:
        self.statuses[f"{action} {status}"] += 1
        if status >= 500:
            self.server_errors.append(f"{action} {what}: HTTP {status}")

    def start(self) -> str | None:
        """Start a reservation run through the console's start form; its id, or None."""
        response = self.operator.post("/runs/start/", START_FORM)
        self._note("start", response.status, "run")
        return run_id_of(response) if response.status == 302 else None

    def approve(self, checkpoint_id: str) -> bool:
        """Open the exact-proposal page and approve the hash it shows; True if recorded."""
        if checkpoint_id in self.posted:
            return False
        page = self.approver.get(f"/approvals/{checkpoint_id}/")
        self._note("review", page.status, checkpoint_id)
        match = SEEN_HASH.search(page.body)
        if page.status != 200 or match is None:
            return False  # no longer decidable (the run moved on); the drain looks again
        response = self.approver.post(
            f"/approvals/{checkpoint_id}/decide/",
            {"verdict": "approve", "seen_hash": match.group(1), "reason": "chaos: reviewed"},
        )
        self._note("approve", response.status, checkpoint_id)
        if response.status in (302, 400, 403) or response.status >= 500:
            self.posted.add(checkpoint_id)  # decided or refused for good: never again
        return response.status == 302

    def cancel(self, run_id: str) -> None:
        response = self.operator.post(f"/runs/{run_id}/cancel/", {"reason": "chaos: operator"})
        refused_in = CANCEL_REFUSED_IN.search(response.body) if response.status == 409 else None
        # A refused cancel is counted with the state it met (mostly a run that had ended).
        action = f"cancel ({refused_in.group(1) or 'CANCELLED'})" if refused_in else "cancel"
        self._note(action, response.status, run_id)


def waiting_checkpoints(run_ids: set[str]) -> dict[str, str]:
    """run id -> the checkpoint it waits on, for every run of ``run_ids`` waiting on a person."""
    rows = Run.objects.filter(pk__in=run_ids, state="WAITING_HUMAN").values_list(
        "pk", "waiting_checkpoint"
    )
    return {str(pk): cp for pk, cp in rows if cp}
