"""Chaos against the production deployment as the README documents it, over real HTTP.

Not a test: a repeatable drill for a deployment set up by hand (README "Running on
PostgreSQL + Redis + Celery" and "Two database roles in production"). It starts its own
Redis server (so it can restart it), gunicorn on the production settings, WORKERS Celery
workers and one beat, all connected as the application role; then, for --seconds:

- operators start runs through the console's start form and bulk-cancel,
- two approvers (and an API client) decide the same checkpoint at the same moment, now
  and then while an operator cancels that run,
- an API operator starts runs (Idempotency-Key, sometimes the same key twice at once)
  and cancels them,
- catalog admins close and reopen the effect gate of reserve_part, deprecate
  search_manual 1.0.0 and, late, retire reserve_part 1.0.0 (two people),
- a chaos thread SIGKILLs and SIGSTOPs worker pool children and parents and beat,
  restarts Redis and terminates the application role's PostgreSQL connections.

Then everything is resumed, waiting approvals are given until every run has ended, and it
checks: manage.py replay --all, every live ledger reservation bound to exactly one
approved and consumed checkpoint of its proposal hash, no run left unended, no 5xx in
gunicorn's log, every refused request answered with a message.

Environment: the production variables (DJANGO_SETTINGS_MODULE=fieldops.settings_production,
DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS including 127.0.0.1, FIELDOPS_CALLBACK_KEY,
FIELDOPS_QUEUE), APP_DATABASE_URL (the application role), ADMIN_DATABASE_URL (a superuser,
for pg_terminate_backend and the checks), CHAOS_PASSWORD (the users' password); users made
with ``manage.py set_user``: op1, op2, api-op (operator), ap1, ap2, api-ap (approver),
cat1, cat2 (catalog-admin), all of tenant north. Then:

    .venv/bin/python scripts/production_chaos.py --seconds 150 --seed 14 --tmp /tmp/chaos

Exit 0 when nothing was found; the summary (JSON) names every finding. The seed fixes the
choices of the chaos thread and of the people; process timing still varies. Requests whose
own database connection was terminated mid-flight answer 500 (console) or 503 (API); they
are listed as findings to be read, not as invariant violations.
"""

# A drill, not product code: the SQL of its checks stays on one line each; the actors'
# closures run in threads joined inside the same loop turn; it starts the deployment's
# own executables.
# ruff: noqa: E501, B023, S603

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
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
SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')
TOKEN = re.compile(r'id="new-token">([^<]+)<')
START = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}


def log(*parts: object) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


class Record:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.problems: list[str] = []
        self.run_ids: set[str] = set()

    def note(
        self, actor: str, action: str, response: httpx.Response | None, error: str = ""
    ) -> None:
        with self.lock:
            if response is None:
                self.statuses[f"{action} transport-error"] += 1
                return
            status = response.status_code
            self.statuses[f"{action} {status}"] += 1
            if status >= 500:
                self.problems.append(f"{actor} {action}: HTTP {status} {response.text[:300]!r}")
            elif status >= 400 and not response.text.strip():
                self.problems.append(f"{actor} {action}: HTTP {status} with an empty body")


class Person:
    """One browser (session cookie and CSRF token read from the page, as htmx does) or one
    API client (a bearer token created on the API tokens page)."""

    def __init__(self, base: str, name: str, password: str, record: Record) -> None:
        self.name = name
        self.record = record
        self.client = httpx.Client(
            base_url=base,
            timeout=30,
            # Behind the TLS-terminating proxy the production settings expect.
            headers={
                "X-Forwarded-Proto": "https",
                "Origin": "https://127.0.0.1:" + base.rsplit(":", 1)[1],
            },
        )
        self.cookies: dict[str, str] = {}
        self.csrf = ""
        self.token = ""
        self._login(password)

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        headers = kw.pop("headers", {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            response = self.client.request(method, path, headers=headers, **kw)
        except httpx.HTTPError:
            return None
        self.client.cookies.clear()  # Secure cookies: kept by hand (the proxy speaks HTTPS)
        for raw in response.headers.get_list("set-cookie"):
            name, _, rest = raw.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        page_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
        if page_token:
            self.csrf = page_token.group(1)
        return response

    def get(self, path: str, action: str = "") -> httpx.Response | None:
        response = self._send("GET", path)
        if action:
            self.record.note(self.name, action, response)
        return response

    def post(self, path: str, data: dict[str, Any], action: str) -> httpx.Response | None:
        if not self.csrf:
            self.get("/login/")
        response = self._send("POST", path, data={"csrfmiddlewaretoken": self.csrf, **data})
        self.record.note(self.name, action, response)
        return response

    def api(
        self,
        method: str,
        path: str,
        action: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response | None:
        try:
            response = self.client.request(
                method,
                "/api/v1" + path,
                json=body,
                headers={"Authorization": f"Bearer {self.token}", **(headers or {})},
            )
        except httpx.HTTPError:
            response = None
        self.record.note(self.name, action, response)
        return response

    def _login(self, password: str) -> None:
        for _ in range(20):
            self.get("/login/")
            r = self.post("/login/", {"username": self.name, "password": password}, "login")
            if r is not None and r.status_code == 302:
                self.get("/")  # sign-in rotates the CSRF token: take the new one from a page
                return
            time.sleep(1)
        raise SystemExit(f"sign-in as {self.name} failed")

    def make_token(self) -> None:
        self.get("/api/tokens/")
        r = self.post("/api/tokens/new/", {"name": f"chaos-{uuid.uuid4().hex[:6]}"}, "token")
        assert r is not None and r.status_code == 201, r
        match = TOKEN.search(r.text)
        assert match, "no token on the page"
        self.token = match.group(1).strip()


class Fleet:
    def __init__(self, args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
        self.args = args
        self.env = env
        self.tmp = tmp
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * args.workers
        self.beat: subprocess.Popen[bytes] | None = None
        self.redis: subprocess.Popen[bytes] | None = None
        self.web: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.everything: list[subprocess.Popen[bytes]] = []

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

    def start_redis(self) -> None:
        self.redis = self._spawn(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.args.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            "redis.log",
        )
        time.sleep(0.5)

    def start_worker(self, slot: int) -> None:
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
                self.env["FIELDOPS_QUEUE"],
                "-n",
                f"chaos{slot}-{uuid.uuid4().hex[:4]}@%h",
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

    def start(self) -> None:
        self.start_redis()
        self.web = self._spawn(
            [
                str(BIN / "gunicorn"),
                "fieldops.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.args.port}",
                "--workers",
                "3",
                "--access-logfile",
                str(self.tmp / "access.log"),
                "--error-logfile",
                str(self.tmp / "gunicorn.log"),
            ],
            "gunicorn.out",
        )
        for slot in range(len(self.workers)):
            self.start_worker(slot)
        self.start_beat()

    def children(self) -> dict[int, int]:
        found = {}
        for slot, p in enumerate(self.workers):
            if p is None or p.poll() is not None:
                continue
            with contextlib.suppress(FileNotFoundError, ValueError):
                for c in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split():
                    found[int(c)] = slot
        return found

    def ensure_full(self) -> None:
        with self.lock:
            for slot, p in enumerate(self.workers):
                if p is None or p.poll() is not None:
                    if p is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(p.pid, signal.SIGKILL)  # orphaned pool children
                    self.start_worker(slot)
            if self.beat is None or self.beat.poll() is not None:
                self.start_beat()
            if self.redis is None or self.redis.poll() is not None:
                self.start_redis()

    def stop(self) -> None:
        for p in self.everything:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
        time.sleep(5)
        for p in self.everything:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)


class Chaos(threading.Thread):
    WEIGHTS = {
        "kill_child": 30,
        "kill_parent": 8,
        "pause_child": 20,
        "pause_worker": 8,
        "kill_beat": 6,
        "pause_beat": 4,
        "restart_redis": 5,
        "terminate_connections": 8,
    }

    def __init__(self, fleet: Fleet, rng: random.Random, admin_url: str, lease: float) -> None:
        super().__init__(daemon=True)
        self.fleet, self.rng, self.admin_url, self.lease = fleet, rng, admin_url, lease
        self.stats: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.paused: dict[int, str] = {}
        self.plock = threading.Lock()

    def run(self) -> None:
        while not self.stopping.wait(self.rng.uniform(0.4, 1.5)):
            try:
                self.step()
            except Exception as exc:  # keep the chaos going, but say so
                log("chaos step failed:", repr(exc))

    def step(self) -> None:
        self.fleet.ensure_full()
        action = self.rng.choices(list(self.WEIGHTS), weights=list(self.WEIGHTS.values()))[0]
        children = self.fleet.children()
        if action in ("kill_child", "pause_child", "kill_parent", "pause_worker") and not children:
            return
        if action == "kill_child":
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.rng.choice(sorted(children)), signal.SIGKILL)
        elif action == "kill_parent":
            slot = self.rng.choice(sorted(set(children.values())))
            p = self.fleet.workers[slot]
            if p is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
        elif action == "pause_child":
            self._pause(self.rng.choice(sorted(children)), "pid")
        elif action == "pause_worker":
            p = self.fleet.workers[self.rng.choice(sorted(set(children.values())))]
            if p is not None:
                self._pause(p.pid, "group")
        elif action == "kill_beat":
            if self.fleet.beat is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.fleet.beat.pid, signal.SIGKILL)
                self.fleet.beat.wait()
                time.sleep(self.rng.uniform(0.5, 4))
        elif action == "pause_beat":
            if self.fleet.beat is not None:
                self._pause(self.fleet.beat.pid, "group")
        elif action == "restart_redis":
            if self.fleet.redis is not None:
                self.fleet.redis.kill()
                self.fleet.redis.wait()
                time.sleep(self.rng.uniform(0.5, 3))
        elif action == "terminate_connections":
            with psycopg.connect(self.admin_url, autocommit=True) as c:
                n = c.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE usename = %s AND pid <> pg_backend_pid()",
                    (self.fleet.env["CHAOS_APP_ROLE"],),
                ).fetchone()
            self.stats["connections_terminated"] += n[0] if n else 0
        self.stats[action] += 1

    def _pause(self, pid: int, kind: str) -> None:
        with self.plock:
            if pid in self.paused or len(self.paused) >= 2:
                return
            self.paused[pid] = kind
        sender = os.killpg if kind == "group" else os.kill
        with contextlib.suppress(ProcessLookupError):
            sender(pid, signal.SIGSTOP)
        threading.Timer(
            self.rng.uniform(self.lease + 1, self.lease + 5), self._resume, (pid,)
        ).start()

    def _resume(self, pid: int) -> None:
        with self.plock:
            kind = self.paused.pop(pid, None)
        if kind:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if kind == "group" else os.kill)(pid, signal.SIGCONT)

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        with self.plock:
            pids = list(self.paused.items())
            self.paused.clear()
        for pid, kind in pids:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if kind == "group" else os.kill)(pid, signal.SIGCONT)


def pending_checkpoints(admin_url: str, db_run_ids: set[str]) -> list[tuple[str, str]]:
    with psycopg.connect(admin_url) as c:
        rows = c.execute(
            "SELECT c.id, c.run_id::text FROM approvals_checkpoint c JOIN runs_run r ON r.id = c.run_id "
            "WHERE c.status = 'PENDING' AND c.kind = 'approval' AND r.state = 'WAITING_HUMAN' "
            "AND r.waiting_checkpoint = c.id ORDER BY c.created_at"
        ).fetchall()
    return [(cid, rid) for cid, rid in rows]


def main() -> int:  # one drill, read top to bottom
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--port", type=int, default=8830)
    parser.add_argument("--redis-port", type=int, default=8831)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--lease", type=float, default=5)
    parser.add_argument("--drain-seconds", type=float, default=180)
    parser.add_argument("--tmp", default="/tmp/production-chaos")  # noqa: S108 - a drill's logs
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "metrics").mkdir(exist_ok=True)
    admin_url = os.environ["ADMIN_DATABASE_URL"]
    app_url = os.environ["APP_DATABASE_URL"]
    password = os.environ["CHAOS_PASSWORD"]
    env = {
        **os.environ,
        "DATABASE_URL": app_url,
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{args.redis_port}/4",
        "FIELDOPS_EXECUTION": "celery",
        "FIELDOPS_LEASE_SECONDS": str(int(args.lease)),
        "FIELDOPS_SWEEP_INTERVAL_SECONDS": "2",
        "FIELDOPS_STUCK_AFTER_SECONDS": "10",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
        "CHAOS_APP_ROLE": psycopg.conninfo.conninfo_to_dict(app_url)["user"],
    }
    log(f"seed {seed}; logs in {tmp}")
    fleet = Fleet(args, env, tmp)
    record = Record()
    fleet.start()
    base = f"http://127.0.0.1:{args.port}"
    time.sleep(4)
    people = {
        n: Person(base, n, password, record)
        for n in ("op1", "op2", "api-op", "ap1", "ap2", "api-ap", "cat1", "cat2")
    }
    people["api-op"].make_token()
    people["api-ap"].make_token()
    with psycopg.connect(admin_url) as c:
        ids = dict(
            c.execute(
                "SELECT capability_id || ' ' || version, id FROM catalog_capabilityversion"
            ).fetchall()
        )
    reserve_id, search_id = ids["reserve_part 1.0.0"], ids["search_manual 1.0.0"]
    chaos = Chaos(fleet, rng, admin_url, args.lease)
    stop = threading.Event()
    end_at = time.monotonic() + args.seconds
    rlock = threading.Lock()

    def remember(run_id: str | None) -> None:
        if run_id:
            with rlock:
                record.run_ids.add(run_id)

    def console_operator() -> None:
        op = people["op1"]
        local = random.Random(rng.random())
        while not stop.is_set():
            page = op.get("/")
            form = dict(HIDDEN.findall(page.text)) if page is not None else {}
            form.pop("csrfmiddlewaretoken", None)
            r = op.post(
                "/runs/start/",
                {**START, **{k: v for k, v in form.items() if k == "start_key"}},
                "console start",
            )
            if r is not None and r.status_code == 302:
                m = re.search(r"/runs/([0-9a-f-]{36})/", r.headers.get("location", ""))
                remember(m.group(1) if m else None)
                if local.random() < 0.15 and m:
                    time.sleep(local.uniform(0, 1.5))
                    op.post(
                        f"/runs/{m.group(1)}/cancel/",
                        {"reason": "chaos: operator"},
                        "console cancel",
                    )
            time.sleep(local.uniform(0.3, 1.2))

    def bulk_canceller() -> None:
        op = people["op2"]
        local = random.Random(rng.random())
        while not stop.wait(local.uniform(4, 9)):
            with rlock:
                pool = sorted(record.run_ids)
            if not pool:
                continue
            chosen = local.sample(pool, min(len(pool), local.randint(2, 6)))
            op.get("/")
            op.post("/runs/cancel/", {"run": chosen, "reason": "chaos: bulk"}, "bulk cancel")
            if local.random() < 0.5:
                # A durable operation by filter (operations app): batches run on the workers.
                state = local.choice(["WAITING_HUMAN", "DECIDING", "EXECUTING", ""])
                preview = op.get(f"/operations/cancel/?state={state}", "operation preview")
                form = dict(HIDDEN.findall(preview.text)) if preview is not None else {}
                form.pop("csrfmiddlewaretoken", None)
                if form.get("previewed", "0") != "0":
                    form.update(reason="chaos: operation", confirm=form["previewed"])
                    op.post("/operations/cancel/start/", form, "operation cancel")

    def api_operator() -> None:
        op = people["api-op"]
        local = random.Random(rng.random())
        while not stop.is_set():
            key = uuid.uuid4().hex
            body = {
                "scenario": "reservation",
                "equipment_id": "EQ-17",
                "location_id": "LOC-N1",
                "quantity": 1,
            }
            results: list[httpx.Response | None] = []
            twice = local.random() < 0.3

            def send() -> None:
                results.append(op.api("POST", "/runs", "api start", body, {"Idempotency-Key": key}))

            threads = [threading.Thread(target=send) for _ in range(2 if twice else 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            started = {
                r.json().get("id") for r in results if r is not None and r.status_code in (200, 201)
            }
            if len(started) > 1:
                record.problems.append(f"one Idempotency-Key started two runs: {started}")
            for rid in started:
                remember(rid)
                if local.random() < 0.2:
                    time.sleep(local.uniform(0, 2))
                    op.api("POST", f"/runs/{rid}/cancel", "api cancel", {"reason": "chaos: api"})
            time.sleep(local.uniform(0.5, 1.5))

    decided: dict[str, float] = {}  # checkpoint -> when it was last tried

    def approvers() -> None:
        local = random.Random(rng.random())
        while not (stop.is_set() and time.monotonic() > drain_until[0]):
            now = time.monotonic()
            todo = [
                (c, r)
                for c, r in pending_checkpoints(admin_url, set())
                if now - decided.get(c, -99) > 8
            ]
            if not todo:
                time.sleep(0.3)
                continue
            cid, rid = todo[0]
            decided[cid] = now
            racers: list[Any] = []
            barrier_parties = (
                2 + (local.random() < 0.4) + (not stop.is_set() and local.random() < 0.35)
            )
            barrier = threading.Barrier(barrier_parties)

            def console(name: str) -> None:
                ap = people[name]
                page = ap.get(f"/approvals/{cid}/", "review")
                m = SEEN_HASH.search(page.text) if page is not None else None
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=10)
                if m:
                    ap.post(
                        f"/approvals/{cid}/decide/",
                        {
                            "verdict": "approve",
                            "seen_hash": m.group(1),
                            "reason": "chaos: reviewed",
                        },
                        "console approve",
                    )

            def api() -> None:
                ap = people["api-ap"]
                r = ap.api("GET", f"/checkpoints/{cid}", "api review")
                h = (
                    r.json().get("proposal_hash")
                    if r is not None and r.status_code == 200
                    else None
                )
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=10)
                if h:
                    ap.api(
                        "POST",
                        f"/checkpoints/{cid}/decision",
                        "api approve",
                        {"verdict": "approve", "seen_hash": h, "reason": "chaos: api"},
                    )

            def cancel() -> None:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=10)
                time.sleep(local.uniform(0, 0.05))
                people["op2"].post(
                    f"/runs/{rid}/cancel/",
                    {"reason": "chaos: racing the approval"},
                    "cancel racing approval",
                )

            racers = [
                threading.Thread(target=console, args=("ap1",)),
                threading.Thread(target=console, args=("ap2",)),
            ]
            if barrier_parties >= 3:
                racers.append(threading.Thread(target=api))
            if barrier_parties == 4:
                racers.append(threading.Thread(target=cancel))
            for t in racers:
                t.start()
            for t in racers:
                t.join()

    def catalog() -> None:
        a, b = people["cat1"], people["cat2"]
        local = random.Random(rng.random())
        deprecated = retired = False
        while not stop.wait(local.uniform(3, 7)):
            left = end_at - time.monotonic()
            a.get("/catalog/")
            a.post(
                f"/catalog/versions/{reserve_id}/gate/",
                {"open": "0", "reason": "chaos: gate closed"},
                "gate close",
            )
            time.sleep(local.uniform(0.5, 2.5))
            b.post(
                f"/catalog/versions/{reserve_id}/gate/",
                {"open": "1", "reason": "chaos: gate reopened"},
                "gate open",
            )
            if not deprecated and left < args.seconds * 0.3:
                deprecated = True
                a.post(
                    f"/catalog/versions/{search_id}/decide/",
                    {"action": "deprecate", "reason": "chaos: deprecated", "acknowledge": "1"},
                    "deprecate",
                )
            if not retired and left < args.seconds * 0.2:
                retired = True
                a.post(
                    f"/catalog/versions/{reserve_id}/retire/",
                    {"reason": "chaos: retire", "acknowledge": "1"},
                    "retire request",
                )
                b.post(
                    f"/catalog/versions/{reserve_id}/retire/",
                    {"reason": "chaos: retire confirmed", "acknowledge": "1"},
                    "retire confirm",
                )

    drain_until = [float("inf")]
    chaos.start()
    actors = [
        threading.Thread(target=f, daemon=True)
        for f in (console_operator, bulk_canceller, api_operator, catalog)
    ]
    approver_thread = threading.Thread(target=approvers, daemon=True)
    for t in [*actors, approver_thread]:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    drain_until[0] = time.monotonic() + args.drain_seconds
    log("chaos stops:", dict(chaos.stats))
    chaos.stop()
    for t in actors:
        t.join(timeout=60)
    fleet.ensure_full()
    # Drain: every run ends (approvals keep being given) or the drain time runs out.
    while time.monotonic() < drain_until[0]:
        with psycopg.connect(admin_url) as c:
            open_runs = c.execute(
                "SELECT count(*) FROM runs_run WHERE id::text = ANY(%s) AND state NOT IN ('COMPLETED','FAILED','CANCELLED','ESCALATED')",
                (sorted(record.run_ids),),
            ).fetchone()[0]
        if open_runs == 0:
            break
        time.sleep(2)
    drain_until[0] = 0
    approver_thread.join(timeout=30)
    fleet.stop()

    findings = list(record.problems)
    with psycopg.connect(admin_url) as c:
        unended = c.execute(
            "SELECT id::text, state FROM runs_run WHERE id::text = ANY(%s) AND state NOT IN ('COMPLETED','FAILED','CANCELLED','ESCALATED')",
            (sorted(record.run_ids),),
        ).fetchall()
        findings += [f"run {rid} never ended ({state})" for rid, state in unended]
        unbound = c.execute(
            """SELECT l.effect_id, l.run_id, (SELECT count(*) FROM approvals_checkpoint k JOIN approvals_decision d ON d.checkpoint_id = k.id
                 WHERE k.run_id::text = l.run_id AND k.proposal_hash = l.proposal_hash AND k.kind = 'approval'
                   AND d.verdict = 'APPROVE' AND d.consumed_at IS NOT NULL AND k.status IN ('APPROVED','USED'))
               FROM world_ledgerentry l WHERE l.namespace = 'live'"""
        ).fetchall()
        left_open = c.execute(
            "SELECT k.id, r.id::text, r.state, k.status FROM approvals_checkpoint k JOIN runs_run r "
            "ON r.id = k.run_id WHERE r.state IN ('COMPLETED','FAILED','CANCELLED','ESCALATED') "
            "AND k.status IN ('PENDING','APPROVED')"
        ).fetchall()
        findings += [
            f"ended run {r} ({st}) keeps checkpoint {k} {ks}" for k, r, st, ks in left_open
        ]
        operations = c.execute(
            "SELECT id::text, status, total, done, refused, already_terminal FROM operations_operation"
        ).fetchall()
        findings += [
            f"operation {o[0]} never finished: {o[1:]}" for o in operations if o[1] == "running"
        ]
        findings += [
            f"ledger effect {e} of run {r}: {n} approved consumed checkpoints"
            for e, r, n in unbound
            if n != 1
        ]
        states = dict(
            c.execute(
                "SELECT state, count(*) FROM runs_run WHERE id::text = ANY(%s) GROUP BY state",
                (sorted(record.run_ids),),
            ).fetchall()
        )
        ledger = c.execute(
            "SELECT count(*) FROM world_ledgerentry WHERE namespace = 'live'"
        ).fetchone()[0]
    replay = subprocess.run(
        [str(BIN / "python"), "manage.py", "replay", "--all"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if replay.returncode != 0:
        findings.append(
            f"replay --all exited {replay.returncode}: {replay.stdout[-2000:]} {replay.stderr[-2000:]}"
        )
    access = (tmp / "access.log").read_text() if (tmp / "access.log").exists() else ""
    fives = [line for line in access.splitlines() if re.search(r'" 5\d\d ', line)]
    findings += [f"gunicorn 5xx: {line}" for line in fives[:20]]
    errors = (tmp / "gunicorn.log").read_text() if (tmp / "gunicorn.log").exists() else ""
    if "Traceback" in errors:
        findings.append("gunicorn error log has a traceback (see gunicorn.log)")
    summary = {
        "seed": seed,
        "runs": len(record.run_ids),
        "states": states,
        "ledger_reservations": ledger,
        "operations": [list(o) for o in operations],
        "chaos": dict(chaos.stats),
        "statuses": dict(sorted(record.statuses.items())),
        "replay_tail": replay.stdout.strip().splitlines()[-3:],
        "findings": findings,
    }
    print(json.dumps(summary, indent=2))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
