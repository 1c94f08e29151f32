"""What the deployment drills share (scripts/production_chaos.py, scripts/people_soak.py):
the deployment started as it runs (gunicorn on the production settings, Celery workers,
one beat) with a supervisor that restarts dead workers, a chaos thread that SIGKILLs and
SIGSTOPs worker pool children and parents, and a browser's session and CSRF token kept by
hand behind the TLS-terminating proxy the production settings expect.

Not product code and not a test: each drill subclasses ``Fleet`` and ``Chaos`` for what
only it does (Redis restarts, beat outages, terminated connections).
"""

# A drill: it starts the deployment's own executables.
# ruff: noqa: S603

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def log(*parts: object) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def https_client(base: str, timeout: float) -> httpx.Client:
    """A client as behind the TLS-terminating proxy the production settings expect."""
    port = base.rsplit(":", 1)[1]
    return httpx.Client(
        base_url=base,
        timeout=timeout,
        headers={"X-Forwarded-Proto": "https", "Origin": f"https://127.0.0.1:{port}"},
    )


class Session:
    """A browser's cookies (Secure, so kept by hand: the proxy speaks HTTPS, the drill
    plain HTTP) and the CSRF token of the last page it read, as htmx sends it."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def headers(self) -> dict[str, str]:
        if not self.cookies:
            return {}
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    def read(self, client: httpx.Client, response: httpx.Response) -> None:
        """Keep the cookies ``response`` sets and the CSRF token of its page."""
        client.cookies.clear()
        for raw in response.headers.get_list("set-cookie"):
            name, _, rest = raw.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        token = CSRF.search(response.text)
        if token:
            self.csrf = token.group(1)


STATE_COUNT = re.compile(r'data-state="([A-Z_]+)">[A-Z_]+: (\d+)<')
COUNT_CAP = 1000  # operations/selectors.py: the console counts the newest 1000 runs


def counts_findings(get: Any, admin_url: str, tenant: str = "north") -> list[str]:
    """Once the runs have settled, the console's per-state counts (``get`` fetches the
    /operations/counts/ fragment as a signed-in operator of ``tenant``) equal the
    database's, counted as the console does (the newest COUNT_CAP live runs). Read up to
    three times: a run still ending between the two reads is not a contradiction."""
    sql = (
        "SELECT state, count(*) FROM (SELECT state FROM runs_run "
        "WHERE tenant = %s AND namespace = 'live' "
        "ORDER BY created_at DESC, id DESC LIMIT %s) newest GROUP BY state"
    )
    shown: dict[str, int] = {}
    real: dict[str, int] = {}
    for _ in range(3):
        response = get("/operations/counts/")
        if response is None or response.status_code != 200:
            time.sleep(2)
            continue
        shown = {s: int(n) for s, n in STATE_COUNT.findall(response.text)}
        with psycopg.connect(admin_url) as c:
            real = dict(c.execute(sql, (tenant, COUNT_CAP)).fetchall())
        if shown == real:
            return []
        time.sleep(2)
    return [f"the console's per-state counts {shown} are not the database's {real}"]


def exactly_once_findings(admin_url: str) -> list[str]:
    """No approval applied twice (one approval.granted event per checkpoint), no
    reservation made twice (one live ledger entry per run and per proposal; the ledger's
    unique constraints cover the key and the effect id), every reservation on its run's
    record exactly once."""
    findings = []
    with psycopg.connect(admin_url) as c:
        granted = c.execute(
            "SELECT refs->>'checkpoint', count(*) FROM runs_event WHERE type = 'approval.granted' "
            "GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        findings += [f"checkpoint {cp} granted {n} times" for cp, n in granted]
        decided = c.execute(
            "SELECT checkpoint_id, count(*) FROM approvals_decision GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        findings += [f"checkpoint {cp} has {n} decisions" for cp, n in decided]
        twice = c.execute(
            "SELECT run_id, proposal_hash, count(*) FROM world_ledgerentry "
            "WHERE namespace = 'live' GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
        findings += [f"run {r} proposal {h[:12]} reserved {n} times" for r, h, n in twice]
        per_run = c.execute(
            "SELECT run_id, count(*) FROM world_ledgerentry WHERE namespace = 'live' "
            "GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
        findings += [f"run {r} holds {n} reservations" for r, n in per_run]
        # SPEC, effects: an effect in the ledger is on its run's record exactly once
        # (recorded by the dispatch, or found by a reconciliation).
        on_record = c.execute(
            "SELECT l.effect_id, l.run_id, (SELECT count(*) FROM runs_event e "
            "WHERE e.run_id::text = l.run_id AND e.refs->>'effect' = l.effect_id "
            "AND e.type IN ('effect.recorded', 'effect.reconciled')) "
            "FROM world_ledgerentry l WHERE l.namespace = 'live'"
        ).fetchall()
        findings += [
            f"ledger effect {e} is on run {r}'s record {n} times" for e, r, n in on_record if n != 1
        ]
    return findings


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


class Fleet:
    """gunicorn, the workers and beat, started as the deployment runs them; a supervisor
    that restarts a dead worker (``ensure_full``). ``name`` prefixes the workers' names."""

    name = "drill"

    def __init__(self, args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
        self.args, self.env, self.tmp = args, env, tmp
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * args.workers
        self.beat: subprocess.Popen[bytes] | None = None
        self.web: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.everything: list[subprocess.Popen[bytes]] = []
        self.restarts = 0
        self.stopped = False
        # A drill that ends early (a sign-in failing, SIGTERM, Ctrl-C; a shell's background
        # job ignores SIGINT) still stops what it started.
        atexit.register(self.stop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _exit_on_signal)

    def _spawn(self, argv: list[str], logname: str) -> subprocess.Popen[bytes]:
        out = open(self.tmp / logname, "ab")  # noqa: SIM115 - kept open for the process
        p = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.everything.append(p)
        return p

    def start_web(self, *extra: str) -> None:
        """gunicorn with three workers, its access and error logs under the drill's tmp."""
        self.web = self._spawn(
            [
                str(BIN / "gunicorn"),
                "-c",
                str(ROOT / "gunicorn.conf.py"),
                "fieldops.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.args.port}",
                "--workers",
                "3",
                "--access-logfile",
                str(self.tmp / "access.log"),
                *extra,
                "--error-logfile",
                str(self.tmp / "gunicorn.log"),
            ],
            "gunicorn.out",
        )

    def start_worker(self, slot: int) -> None:
        queue = self.env.get("FIELDOPS_QUEUE", "fieldops")
        self.workers[slot] = self._spawn(
            [
                str(BIN / "celery"),
                "-A",
                "fieldops",
                "worker",
                "-l",
                "info",
                "--concurrency",
                "2",
                "-Q",
                queue,
                "-n",
                f"{self.name}{slot}-{uuid.uuid4().hex[:4]}@%h",
            ],
            f"worker{slot}.log",
        )

    def start_beat(self) -> None:
        self.beat = self._spawn(
            [
                str(BIN / "celery"),
                "-A",
                "fieldops",
                "beat",
                "-l",
                "info",
                "-s",
                str(self.tmp / "celerybeat-schedule"),
            ],
            "beat.log",
        )

    def start_workers_and_beat(self) -> None:
        for slot in range(len(self.workers)):
            self.start_worker(slot)
        self.start_beat()

    def children(self) -> dict[int, int]:
        """The live workers' pool children: pid -> the worker's slot."""
        found = {}
        for slot, p in enumerate(self.workers):
            if p is None or p.poll() is not None:
                continue
            with contextlib.suppress(FileNotFoundError, ValueError):
                for c in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split():
                    found[int(c)] = slot
        return found

    def web_workers(self) -> list[int]:
        """gunicorn's live worker processes (the master's children)."""
        if self.web is None or self.web.poll() is not None:
            return []
        with contextlib.suppress(FileNotFoundError):
            path = Path(f"/proc/{self.web.pid}/task/{self.web.pid}/children")
            return [int(c) for c in path.read_text().split()]
        return []

    def restart_dead_beat(self) -> None:
        """Start beat again when it exited, as the deployment's supervisor does."""
        if self.beat is None or self.beat.poll() is not None:
            self.start_beat()

    def restart_dead_workers(self) -> None:
        """Start a worker in every slot whose worker exited (under ``lock``)."""
        for slot, p in enumerate(self.workers):
            if p is None or p.poll() is not None:
                if p is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)  # orphaned pool children
                    self.restarts += 1
                self.start_worker(slot)

    def ensure_full(self) -> None:
        with self.lock:
            self.restart_dead_workers()

    def stop(self) -> None:
        """SIGTERM everything the drill started, then SIGKILL what is left (once; a drill
        that exits early, a sign-in failing, stops it from ``atexit``)."""
        if self.stopped:
            return
        self.stopped = True
        for p in self.everything:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
        time.sleep(5)
        for p in self.everything:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)


WORKER_ACTIONS = ("kill_child", "kill_parent", "pause_child", "pause_worker")
# /proc/<pid>/stat's state of a process doing work (on a CPU or waiting for the disk);
# a gunicorn sync worker idle between requests sleeps in accept/select ("S").
BUSY = ("R", "D")


class Chaos(threading.Thread):
    """Every ``INTERVAL`` seconds (a seeded draw): restart what died (``fleet.ensure_full``),
    then, unless ``calm``, one action drawn by ``WEIGHTS``: SIGKILL or SIGSTOP (resumed
    ``PAUSE`` seconds later) a worker pool child or a worker's parent; ``nothing``; or a
    drill's own action (``act``)."""

    WEIGHTS: dict[str, int] = {}
    INTERVAL = (2.0, 6.0)
    PAUSE = (3.0, 40.0)

    def __init__(self, fleet: Fleet, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.fleet, self.rng = fleet, rng
        self.stats: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.paused: dict[int, str] = {}
        self.plock = threading.Lock()
        self.calm = False
        self.web_kills: list[float] = []  # wall-clock times of the web worker kills

    def run(self) -> None:
        while not self.stopping.wait(self.rng.uniform(*self.INTERVAL)):
            try:
                self.fleet.ensure_full()
                if not self.calm:
                    self.step()
            except Exception as exc:  # keep the chaos going, but say so
                log("chaos step failed:", repr(exc))

    def step(self) -> None:
        action = self.rng.choices(list(self.WEIGHTS), weights=list(self.WEIGHTS.values()))[0]
        children = self.fleet.children()
        if action == "nothing" or (action in WORKER_ACTIONS and not children):
            return
        if action == "kill_child":
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.rng.choice(sorted(children)), signal.SIGKILL)
        elif action == "kill_parent":
            p = self.fleet.workers[self.rng.choice(sorted(set(children.values())))]
            if p is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
        elif action == "pause_child":
            self.pause(self.rng.choice(sorted(children)), "pid")
        elif action == "pause_worker":
            p = self.fleet.workers[self.rng.choice(sorted(set(children.values())))]
            if p is not None:
                self.pause(p.pid, "group")
        else:
            self.act(action)
        self.stats[action] += 1

    def act(self, action: str) -> None:
        """A drill's own action (a name in its ``WEIGHTS``)."""
        raise NotImplementedError(action)

    def _web_worker(self) -> tuple[int | None, bool]:
        """A gunicorn worker, a busy one (inside a request) when one is: (pid, busy)."""
        pids = self.fleet.web_workers()
        busy = []
        for pid in pids:
            with contextlib.suppress(FileNotFoundError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] in BUSY:
                    busy.append(pid)
        if not pids:
            return None, False
        return self.rng.choice(busy or pids), bool(busy)

    def kill_web_worker(self) -> None:
        """SIGKILL one gunicorn worker, a busy one when one is: the master starts another;
        the request it was serving gets no answer."""
        pid, busy = self._web_worker()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            self.web_kills.append(time.time())
            self.stats["web_kill_busy" if busy else "web_kill_idle"] += 1

    def pause_web_worker(self) -> None:
        """SIGSTOP one gunicorn worker (a busy one when one is: its transaction and row
        locks held) for ``PAUSE`` seconds; past gunicorn's timeout (30 s) the master kills
        it. Its request may get no answer: counted as a web kill."""
        pid, busy = self._web_worker()
        if pid is None:
            return
        self.web_kills.append(time.time())  # its request may never be answered
        self.pause(pid, "pid")
        self.stats["web_pause_busy" if busy else "web_pause_idle"] += 1

    def killed_web_during(self, started: float, ended: float) -> bool:
        """Whether a web worker was killed (or paused) while a request waited for its
        answer."""
        return any(started - 0.5 <= when <= ended + 0.5 for when in self.web_kills)

    def pause(self, pid: int, kind: str) -> None:
        """SIGSTOP ``pid`` (``kind`` "group": its process group), at most two at once."""
        with self.plock:
            if pid in self.paused or len(self.paused) >= 2:
                return
            self.paused[pid] = kind
        with contextlib.suppress(ProcessLookupError):
            (os.killpg if kind == "group" else os.kill)(pid, signal.SIGSTOP)
        # A daemon: a drill interrupted (Ctrl-C) exits at once; Fleet.stop resumes and
        # stops whatever is still paused.
        timer = threading.Timer(self.rng.uniform(*self.PAUSE), self._resume, (pid,))
        timer.daemon = True
        timer.start()

    def _resume(self, pid: int) -> None:
        with self.plock:
            kind = self.paused.pop(pid, None)
        if kind:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if kind == "group" else os.kill)(pid, signal.SIGCONT)

    def calm_down(self) -> None:
        """No more chaos (the thread goes on restarting what dies); resume what is paused."""
        self.calm = True
        with self.plock:
            pids = list(self.paused.items())
            self.paused.clear()
        for pid, kind in pids:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if kind == "group" else os.kill)(pid, signal.SIGCONT)

    def stop(self) -> None:
        """End the thread, then resume what is paused."""
        self.stopping.set()
        self.join()
        self.calm_down()
