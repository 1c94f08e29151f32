"""Machinery of the real-process chaos test (``tests/durable/test_chaos.py``).

- ``Fleet``: the deployment as the README documents it, as subprocesses: one gunicorn web
  process, N Celery worker processes (prefork) and one beat (the sweeper), all on the
  production settings (``fieldops.settings_production`` with the environment the README
  tells a deployer to set, and the static files ``collectstatic`` wrote), the test
  database, their own Redis database and their own queue. ``Fleet.shutdown`` resumes
  and stops every process it ever started, orphaned pool children included.
- ``Chaos``: a thread that, from a seeded random generator, SIGKILLs worker pool children
  (sometimes a worker's parent, which is then restarted) and SIGSTOPs a child or a whole
  worker for longer than the lease, then SIGCONTs it; it SIGKILLs beat now and then (the
  supervisor restarts it) and, when asked, a gunicorn web worker (gunicorn's arbiter
  replaces it; a request it was serving gets no answer).
- ``Desk``: an operator and an approver at their browsers (real HTTP through the TLS
  proxy the production settings expect, login, CSRF), who start runs through the
  console's start form, approve through the exact-proposal page with the hash the page
  shows, and cancel now and then.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from runs.engine import liveness
from runs.models import Run, WorkerHeartbeat
from tests.deploy.servers import PRODUCTION, ROOT, Browser, WebProcess, run_id_of
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
    beat_killed_at: float | None = None  # time.time() of beat's last SIGKILL
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
        self._start_beat()
        self.web = web
        web.start(ready="/healthz")  # the production settings send the rest to HTTPS
        if web.process is not None:
            self.groups.add(web.process.pid)

    def _start_beat(self) -> None:
        with (self.tmp / "beat.log").open("ab") as log:
            beat = self._popen_beat(log)
        with self.lock:
            self.beat = beat
            self.groups.add(beat.pid)

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
            env={**os.environ, **self.env()},
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
        """Restart every worker whose parent is gone, and beat if it is gone (as the
        supervisor does); return how many processes were restarted."""
        dead = [i for i, p in enumerate(self.slots) if p.poll() is not None]
        for slot in dead:
            self.restart(slot)
        beat_dead = self.beat is not None and self.beat.poll() is not None
        if beat_dead:
            self._start_beat()
        return len(dead) + beat_dead

    def kill_beat(self) -> bool:
        """SIGKILL beat (``ensure_full`` starts it again); False if it was not running."""
        beat = self.beat
        if beat is None or beat.poll() is not None or not signal_pid(beat.pid, signal.SIGKILL):
            return False
        self.beat_killed_at = time.time()
        return True

    def sweeper_silent_since_beat_killed(self) -> str | None:
        """What is wrong if beat was killed and the sweeper has not reported since (beat not
        started again, or started and not sweeping); None when all is well."""
        if self.beat_killed_at is None:
            return None
        seen = max(
            WorkerHeartbeat.objects.filter(role=WorkerHeartbeat.SWEEPER).values_list(
                "seen_at", flat=True
            ),
            default=None,
        )
        if seen is not None and seen.timestamp() > self.beat_killed_at:
            return None
        return (
            f"beat was killed {time.time() - self.beat_killed_at:.1f} s ago and the sweeper"
            f" has not reported since (last: {seen})"
        )

    def web_workers(self) -> list[int]:
        """The pids of gunicorn's live web workers (its arbiter's children)."""
        process = self.web and self.web.process
        return children_of(process.pid) if process and process.poll() is None else []

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
    cluster: Any,
    tmp: Path,
    *,
    size: int,
    concurrency: int,
    lease_seconds: int,
    static_root: Path,
) -> Iterator[Fleet]:
    """A ``Fleet`` of ``size`` workers on ``cluster`` with a ``lease_seconds`` lease, runs
    seen stuck after 2 s and a sweep every second, on the production settings with the
    files ``collectstatic`` wrote to ``static_root``; shut down on leaving (before the
    cluster's teardown and before the database is dropped)."""
    cluster.lease_seconds = lease_seconds
    cluster.log_dir = tmp
    fleet = Fleet(
        cluster,
        tmp,
        size=size,
        concurrency=concurrency,
        worker_env={
            **PRODUCTION,
            "FIELDOPS_STATIC_ROOT": str(static_root),
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


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first, the process
    group third); empty once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return []


def _group_has_live_member(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else []
        if fields and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class ChaosStats:
    child_kills: int = 0
    parent_kills: int = 0
    pauses: int = 0
    worker_pauses: int = 0  # of those: a whole worker (parent and children) frozen
    restarts: int = 0  # workers and beat
    beat_kills: int = 0
    web_kills: int = 0  # gunicorn web workers (the arbiter replaces them)
    busy_targets: int = 0  # faults aimed at a process that held a run's lease


class Chaos(threading.Thread):
    """SIGKILL and SIGSTOP the fleet's processes at random (seeded) until ``stop()``.

    Every step first restarts what the supervisor would (dead worker parents, beat).
    At seeded moments of its first ``FAULT_WINDOW`` seconds it SIGKILLs beat (once) and,
    with ``web_workers``, one of gunicorn's web workers (``WEB_KILLS`` times, preferably
    one inside a request while the people have a write under way: the arbiter starts
    another; the people must then cope with a request that got no answer). Otherwise it
    picks, with fixed weights, one of: kill a pool child, kill a worker's parent
    (restarted at once), pause a pool child, pause a whole worker. Worker targets are
    preferably processes that hold a run's lease right now (the lease owner names the
    child's pid), so faults land inside the reservation path rather than on idle
    processes. A pause lasts longer than the lease, so another worker takes the run over
    while the old owner is frozen; at most ``max_paused`` workers are frozen at once.
    """

    WEIGHTS = (("kill_child", 40), ("kill_parent", 8), ("pause_child", 37), ("pause_worker", 15))
    FAULT_WINDOW, WEB_KILLS = 15.0, 3

    def __init__(
        self,
        fleet: Fleet,
        rng: random.Random,
        *,
        lease_seconds: int,
        web_workers: bool = False,
        writes: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__(name="chaos", daemon=True)
        self.fleet = fleet
        self.rng = rng
        self.lease_seconds = lease_seconds
        self.writes = writes  # whether the people have a write under way now
        # Seconds after the thread starts: the moments of the kills that are not weighted.
        self.beat_kill_at = [rng.uniform(1.0, self.FAULT_WINDOW)]
        self.web_kill_at = sorted(
            rng.uniform(1.0, self.FAULT_WINDOW) for _ in range(self.WEB_KILLS * web_workers)
        )
        self.began = time.monotonic()
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
        self.began = time.monotonic()
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
        elapsed = time.monotonic() - self.began
        if self.beat_kill_at and elapsed >= self.beat_kill_at[0]:
            self.beat_kill_at.pop(0)
            self.stats.beat_kills += self.fleet.kill_beat()
            return
        if self.web_kill_at and elapsed >= self.web_kill_at[0]:
            self.web_kill_at.pop(0)
            self._kill_web_worker()
            return
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

    def _kill_web_worker(self) -> None:
        """SIGKILL a gunicorn web worker, preferably one running now (inside a request: an
        idle sync worker sleeps waiting for a connection) while the people have a write
        under way, watched for up to two seconds, so that the kill may cut a write."""
        deadline = time.monotonic() + 2.0
        while True:
            workers = sorted(self.fleet.web_workers())
            running = [pid for pid in workers if _stat(pid)[:1] == ["R"]] if self.writes() else []
            if running or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        targets = running or workers
        if targets and signal_pid(self.rng.choice(targets), signal.SIGKILL):
            self.stats.web_kills += 1

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
        self.operator = Browser(base_url, behind_tls_proxy=True)
        self.operator.login(operator, "pw-" + operator)
        self.approver = Browser(base_url, behind_tls_proxy=True)
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
