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
- an operator on call follows the repeated-reservation-attempts runbook: closes the
  tenant's gate, reconciles unknown effects from the recovery page, reopens the gate,
- catalog admins close and reopen the effect gate of reserve_part, deprecate
  search_manual 1.0.0 and, late, retire reserve_part 1.0.0 (two people),
- a chaos thread SIGKILLs and SIGSTOPs worker pool children and parents and beat,
  SIGKILLs and SIGSTOPs a gunicorn worker (a busy one when one is: mid-request; the
  master starts another, or kills the paused one past its 30 s timeout), restarts Redis
  and terminates the application role's PostgreSQL connections.

With ``--beat-outage SECONDS`` beat is also killed once, at a seeded moment of the first
half, and kept down that long (no sweeper): at its end every run that should be moving and
is not, and every bulk operation nobody progressed for a minute, must be listed on the
recovery page, which must say the sweeper is silent when the outage outlasted 75 s.

Infrastructure failing (each at a seeded moment; the commands are the deployment's own
service controls, e.g. ``pg_ctlcluster --skip-systemctl-redirect 15 drill restart -m fast``):

- ``--pg-restart CMD`` (repeatable): PostgreSQL restarted by CMD, once per option given;
- ``--pg-stop CMD --pg-start CMD --pg-outage SECONDS``: PostgreSQL unreachable that long;
- ``--redis-outage SECONDS``: the drill's Redis killed (its data lost: queued messages gone)
  and kept down that long while the people go on acting (approvals included);
- ``--pause-during-pg``: one worker (parent and pool) SIGSTOPped just before each
  PostgreSQL event and resumed a lease after PostgreSQL answers again;
- ``--no-chaos``: no random chaos (the thread only restarts what died, as a supervisor).

While a service is down a prober reads console pages and the API: any 500 is a finding
(the answer is the 503 page / JSON 503), and after it is back a page must answer 200
within 30 s. Workers and beat are not restarted by the drill while PostgreSQL is away
(only when their process exited, as a supervisor would): they must reconnect by
themselves. 503s inside an outage window are listed apart (``outage_503``).

Then everything is resumed, waiting approvals are given until every run has ended, and it
checks: manage.py replay --all, every live ledger reservation bound to exactly one
approved and consumed checkpoint of its proposal hash, no run left unended, no 5xx in
gunicorn's access log other than those the web logged as its own database connection cut
(listed apart, as ``connection_cut_5xx``), every refused request answered with a message,
the console's per-state counts equal to the database's, and exactly-once (scripts/drill.py
``exactly_once_findings``: one approval.granted per checkpoint, one reservation per run and
proposal, each reservation on its run's record once).

Environment: the production variables (DJANGO_SETTINGS_MODULE=fieldops.settings_production,
DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS including 127.0.0.1, FIELDOPS_CALLBACK_KEY,
FIELDOPS_QUEUE, CELERY_BROKER_URL for the set-up commands: the drill's own processes use
its own Redis), APP_DATABASE_URL (the application role), ADMIN_DATABASE_URL (a superuser,
for pg_terminate_backend and the checks), CHAOS_PASSWORD (the users' password); users made
with ``manage.py set_user``: op1, op2, api-op (operator), ap1, ap2, api-ap (approver),
cat1, cat2 (catalog-admin), all of tenant north; `manage.py collectstatic --noinput` run
once (the web process refuses to start without its output). Then:

    .venv/bin/python scripts/production_chaos.py --seconds 150 --seed 14 --tmp /tmp/chaos \
        [--port 8830 --redis-port 8831 --beat-outage 90]

The infrastructure drill as run on a PostgreSQL cluster of its own (port 5441, cluster he):

    PG="pg_ctlcluster --skip-systemctl-redirect 15 he"
    .venv/bin/python scripts/production_chaos.py --seconds 240 --seed 6391 --workers 2 \
        --no-chaos --pause-during-pg --burst 60 --pg-restart "$PG restart -m fast" \
        --pg-stop "$PG stop -m fast" --pg-start "$PG start" --pg-outage 45 \
        --redis-outage 60 --drain-seconds 240

Exit 0 when nothing was found; the summary (JSON) names every finding. The seed fixes the
choices of the chaos thread and of the people; process timing still varies. Requests whose
own database connection was terminated mid-flight answer 500 (console) or 503 (API); they
are listed in the summary, not as findings.
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
from drill import (
    BIN,
    HIDDEN,
    ROOT,
    Chaos,
    Fleet,
    Session,
    counts_findings,
    exactly_once_findings,
    https_client,
    log,
)

SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')
TOKEN = re.compile(r'id="new-token">([^<]+)<')
ATTEMPT_FORM = re.compile(r'name="attempt_id" value="([^"]+)"')
START = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}


class Record:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.problems: list[str] = []
        self.fives: list[str] = []  # judged against gunicorn's logs at the end
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
                self.fives.append(f"{actor} {action}: HTTP {status} {response.text[:160]!r}")
            elif status >= 400 and not response.text.strip():
                self.problems.append(f"{actor} {action}: HTTP {status} with an empty body")


class Person:
    """One browser (session cookie and CSRF token read from the page, as htmx does) or one
    API client (a bearer token created on the API tokens page)."""

    def __init__(self, base: str, name: str, password: str, record: Record) -> None:
        self.name = name
        self.record = record
        self.client = https_client(base, timeout=30)
        self.session = Session()
        self.token = ""
        self._login(password)

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        headers = {**kw.pop("headers", {}), **self.session.headers()}
        try:
            response = self.client.request(method, path, headers=headers, **kw)
        except httpx.HTTPError:
            return None
        self.session.read(self.client, response)
        return response

    def get(self, path: str, action: str = "") -> httpx.Response | None:
        response = self._send("GET", path)
        if action:
            self.record.note(self.name, action, response)
        return response

    def post(self, path: str, data: dict[str, Any], action: str) -> httpx.Response | None:
        if not self.session.csrf:
            self.get("/login/")
        response = self._send("POST", path, data={"csrfmiddlewaretoken": self.session.csrf, **data})
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
        r = self.post(
            "/api/tokens/new/",
            {"name": f"chaos-{uuid.uuid4().hex[:6]}", "lifetime_days": "7"},
            "token",
        )
        assert r is not None and r.status_code == 201, r
        match = TOKEN.search(r.text)
        assert match, "no token on the page"
        self.token = match.group(1).strip()


class ChaosFleet(Fleet):
    """The drill's fleet with its own Redis; beat and Redis are restarted too, except
    during an outage the drill causes (``beat_down_until``, ``redis_down_until``)."""

    name = "chaos"

    def __init__(self, args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
        super().__init__(args, env, tmp)
        self.redis: subprocess.Popen[bytes] | None = None
        self.beat_down_until = 0.0  # a beat outage (--beat-outage): not restarted before
        self.redis_down_until = 0.0  # a Redis outage (--redis-outage): not restarted before

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

    def start(self) -> None:
        self.start_redis()
        self.start_web()
        self.start_workers_and_beat()

    def ensure_full(self) -> None:
        with self.lock:
            self.restart_dead_workers()
            beat_dead = self.beat is None or self.beat.poll() is not None
            if beat_dead and time.monotonic() >= self.beat_down_until:
                self.start_beat()
            redis_dead = self.redis is None or self.redis.poll() is not None
            if redis_dead and time.monotonic() >= self.redis_down_until:
                self.start_redis()


class ProductionChaos(Chaos):
    """The workers' chaos, and beat killed or paused, Redis restarted, the application
    role's PostgreSQL connections terminated; a pause lasts a little over a lease."""

    WEIGHTS = {
        "kill_child": 30,
        "kill_parent": 8,
        "pause_child": 20,
        "pause_worker": 8,
        "kill_beat": 6,
        "pause_beat": 4,
        "restart_redis": 5,
        "terminate_connections": 8,
        "kill_web_worker": 6,
        "pause_web_worker": 3,
    }
    INTERVAL = (0.4, 1.5)

    def __init__(self, fleet: ChaosFleet, rng: random.Random, admin_url: str, lease: float) -> None:
        super().__init__(fleet, rng)
        self.fleet: ChaosFleet = fleet
        self.admin_url = admin_url
        self.PAUSE = (lease + 1, lease + 5)

    def act(self, action: str) -> None:
        if action == "kill_web_worker":
            self.kill_web_worker()
        elif action == "pause_web_worker":
            self.pause_web_worker()
        elif action == "kill_beat":
            if self.fleet.beat is not None and self.fleet.beat.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.fleet.beat.pid, signal.SIGKILL)
                self.fleet.beat.wait()
                time.sleep(self.rng.uniform(0.5, 4))
        elif action == "pause_beat":
            if self.fleet.beat is not None and time.monotonic() >= self.fleet.beat_down_until:
                self.pause(self.fleet.beat.pid, "group")
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


def pending_checkpoints(admin_url: str, db_run_ids: set[str]) -> list[tuple[str, str]]:
    with psycopg.connect(admin_url) as c:
        rows = c.execute(
            "SELECT c.id, c.run_id::text FROM approvals_checkpoint c JOIN runs_run r ON r.id = c.run_id "
            "WHERE c.status = 'PENDING' AND c.kind = 'approval' AND r.state = 'WAITING_HUMAN' "
            "AND r.waiting_checkpoint = c.id ORDER BY c.created_at"
        ).fetchall()
    return [(cid, rid) for cid, rid in rows]


# What the web logs when the request's own database connection was cut under it (the
# drill's pg_terminate_backend): such a 5xx is the honest answer, not a defect.
CONNECTION_CUT = (
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly",
    "the connection is closed",
    "consuming input failed",
)
ACCESS = re.compile(r'\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d) [+-]\d{4}\] "(\w+) (\S+) [^"]*" (5\d\d) ')
LOGGED_PATH = re.compile(r"(?:Internal Server Error: |database connection lost: \w+ )(\S+)")


def split_fives(access: str, web_log: str) -> tuple[list[str], list[str]]:
    """gunicorn's 5xx lines: (explained by a cut database connection, unexplained). A line
    is explained when the web logged a lost connection for the same path within 2 s."""
    cut: list[tuple[float, str]] = []
    for line in web_log.splitlines():
        if not line.startswith("{") or not any(m in line for m in CONNECTION_CUT):
            continue
        with contextlib.suppress(ValueError, KeyError):
            entry = json.loads(line)
            path = LOGGED_PATH.search(entry.get("msg", ""))
            if path:
                when = time.mktime(time.strptime(entry["ts"][:19], "%Y-%m-%dT%H:%M:%S"))
                cut.append((when, path.group(1).split("?")[0]))
    explained, unexplained = [], []
    for line in access.splitlines():
        m = ACCESS.search(line)
        if not m:
            continue
        when = time.mktime(time.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S"))
        path = m.group(3).split("?")[0]
        hit = any(p == path and abs(t - when) <= 2 for t, p in cut)
        (explained if hit else unexplained).append(line)
    return explained, unexplained


def in_window(line: str, windows: list[tuple[float, float, str]]) -> bool:
    m = ACCESS.search(line)
    if not m:
        return False
    when = time.mktime(time.strptime(m.group(1), "%d/%b/%Y:%H:%M:%S"))
    return any(start - 1 <= when <= end for start, end, _ in windows)


STALLED_SQL = (
    "SELECT id::text, revision FROM runs_run WHERE state NOT IN ('COMPLETED','FAILED','CANCELLED','ESCALATED','WAITING_HUMAN','WAITING_EXTERNAL') "
    "AND ((lease_expires_at < now() - make_interval(secs => %s)) OR (lease_expires_at IS NULL AND updated_at < now() - make_interval(secs => %s)))"
)


# Bulk operations nobody took a batch of for over 63 s (the operation sweep re-hands after
# 30 s, every 10 s; the recovery page lists them after 60 s).
STALLED_OPERATIONS_SQL = (
    "SELECT id::text FROM operations_operation WHERE status = 'running' AND kicked_at < now() - interval '63 seconds' "
    "AND (progressed_at IS NULL OR progressed_at < now() - interval '63 seconds')"
)


def main() -> int:  # one drill, read top to bottom
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--port", type=int, default=8830)
    parser.add_argument("--redis-port", type=int, default=8831)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--lease", type=float, default=5)
    parser.add_argument("--drain-seconds", type=float, default=180)
    # One long beat outage (no sweeper) at a seeded moment of the first half; 0: none.
    parser.add_argument("--beat-outage", type=float, default=0)
    parser.add_argument("--pg-restart", action="append", default=[])
    parser.add_argument("--pg-stop", default="")
    parser.add_argument("--pg-start", default="")
    parser.add_argument("--pg-outage", type=float, default=0)
    parser.add_argument("--redis-outage", type=float, default=0)
    parser.add_argument("--pause-during-pg", action="store_true")
    parser.add_argument("--no-chaos", action="store_true")
    # Runs started through the API just before each infrastructure event (so many are in
    # flight when it strikes).
    parser.add_argument("--burst", type=int, default=0)
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
    fleet = ChaosFleet(args, env, tmp)
    record = Record()
    fleet.start()
    base = f"http://127.0.0.1:{args.port}"
    time.sleep(4)
    people = {
        n: Person(base, n, password, record)
        for n in ("op1", "op2", "api-op", "ap1", "ap2", "api-ap", "cat1", "cat2")
    }
    responder = Person(base, "op1", password, record)  # follows the incident runbooks
    watcher = Person(base, "op2", password, record)  # reads the recovery page in an outage
    people["api-op"].make_token()
    people["api-ap"].make_token()
    with psycopg.connect(admin_url) as c:
        ids = dict(
            c.execute(
                "SELECT capability_id || ' ' || version, id FROM catalog_capabilityversion"
            ).fetchall()
        )
    reserve_id, search_id = ids["reserve_part 1.0.0"], ids["search_manual 1.0.0"]
    chaos = ProductionChaos(fleet, rng, admin_url, args.lease)
    chaos.calm = args.no_chaos
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
            try:
                waiting = pending_checkpoints(admin_url, set())
            except psycopg.Error:  # PostgreSQL away (--pg-restart, --pg-outage): wait
                time.sleep(1)
                continue
            todo = [(c, r) for c, r in waiting if now - decided.get(c, -99) > 8]
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

    def shown(
        person: Any, path: str, names: tuple[str, ...] = ("lifecycle", "confirms")
    ) -> dict[str, str]:
        """What the page at ``path`` binds a decision to (the lifecycle state it showed, the
        retirement request it confirms), as a person's browser sends it."""
        page = person.get(path)
        fields = dict(HIDDEN.findall(page.text)) if page is not None else {}
        return {k: v for k, v in fields.items() if k in names}

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
                    {
                        **shown(a, "/catalog/search_manual/1.0.0/", ("lifecycle",)),
                        "action": "deprecate",
                        "reason": "chaos: deprecated",
                        "acknowledge": "1",
                    },
                    "deprecate",
                )
            if not retired and left < args.seconds * 0.2:
                retired = True
                retire = f"/catalog/versions/{reserve_id}/retire/"
                a.post(
                    retire,
                    {**shown(a, retire), "reason": "chaos: retire", "acknowledge": "1"},
                    "retire request",
                )
                b.post(
                    retire,
                    {**shown(b, retire), "reason": "chaos: retire confirmed", "acknowledge": "1"},
                    "retire confirm",
                )

    outage_seen: dict[str, Any] = {}
    outage_rng = random.Random(rng.random())

    def beat_outage() -> None:
        """Beat (the only sweeper) killed and kept down for --beat-outage seconds. At its
        end every run that should be moving and is not (a lease expired over "stuck after"
        ago, or never claimed) must be listed on the recovery page, which must also say the
        sweeper is silent when the outage outlasted 60 s; then beat comes back and the
        drain must still end every run."""
        if stop.wait(outage_rng.uniform(5, max(5.0, args.seconds / 2))):
            return
        with fleet.lock:
            fleet.beat_down_until = time.monotonic() + args.beat_outage + 60
            if fleet.beat is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(fleet.beat.pid, signal.SIGKILL)
        log(f"beat down for {args.beat_outage:.0f} s")
        time.sleep(args.beat_outage)
        stuck = float(env["FIELDOPS_STUCK_AFTER_SECONDS"]) + 3  # margin: the page's clock

        def stalled() -> set[tuple[str, int]]:
            with psycopg.connect(admin_url) as c:
                runs = set(c.execute(STALLED_SQL, (stuck, 2 * stuck)).fetchall())
                operations = c.execute(STALLED_OPERATIONS_SQL).fetchall()
            return runs | {(f"/operations/{o}/", -1) for (o,) in operations}

        before = stalled()
        page = watcher.get("/recovery/", "recovery page in a beat outage")
        still = before & stalled()  # not moved while the page was read
        text = page.text if page is not None else ""
        shown = text.split("should be moving")[-1]
        missing = sorted(r for r, _ in still if (r if r.startswith("/") else r[:8]) not in shown)
        outage_seen.update(stalled=len(still), missing=missing)
        findings_outage = [f"beat outage: stalled {r} is not on the recovery page" for r in missing]
        if args.beat_outage > 75 and "The sweeper has not reported for" not in text:
            findings_outage.append(
                "beat outage: the recovery page does not say the sweeper is silent"
            )
        with record.lock:
            record.problems.extend(findings_outage)
        fleet.beat_down_until = 0.0
        fleet.ensure_full()  # the chaos thread may have stopped already: start beat here
        log(f"beat back; {len(still)} runs were not moving, {len(missing)} of them not on the page")

    def runbook_follower() -> None:
        """An operator on call following the runbooks as the console shows them: the
        repeated-reservation-attempts runbook closes the tenant's gate, the recovery page's
        unknown effects are reconciled (or their reconciliation re-driven) one by one, and
        the gate is reopened. Every form is the one the page shows."""
        op = responder
        local = random.Random(rng.random())
        book = "/runbooks/repeated-reservation-attempts/"
        while not stop.wait(local.uniform(5, 10)):
            page = op.get(book, "runbook page")
            if page is None or f'action="{book}gate/"' not in page.text:
                continue
            gate = {"capability_id": "reserve_part", "version": "1.0.0"}
            op.post(
                f"{book}gate/",
                {**gate, "open": "0", "reason": "chaos: runbook"},
                "runbook gate close",
            )
            recovery = op.get("/recovery/", "recovery page")
            attempts = ATTEMPT_FORM.findall(recovery.text) if recovery is not None else []
            for attempt in local.sample(attempts, min(len(attempts), 3)):
                op.post("/recovery/reconcile/", {"attempt_id": attempt}, "runbook reconcile")
            time.sleep(local.uniform(0.5, 2))
            op.post(
                f"{book}gate/",
                {**gate, "open": "1", "reason": "chaos: runbook done"},
                "runbook gate open",
            )

    infra_rng = random.Random(rng.random())
    windows: list[tuple[float, float, str]] = []  # (start, end) wall-clock of each outage
    infra_seen: list[dict[str, Any]] = []
    prober = Person(base, "op2", password, record)
    prober_api = people["api-op"]

    def probe(label: str, until: threading.Event, seen: Counter[str]) -> None:
        while not until.wait(1.0):
            for path in ("/", "/runs/", "/approvals/", "/recovery/", "/no-such-page/"):
                r = prober._send("GET", path)
                seen[f"GET {path} {r.status_code if r is not None else 'transport-error'}"] += 1
                if r is not None and r.status_code == 500:
                    with record.lock:
                        record.problems.append(f"{label}: GET {path} answered 500")
            r = prober_api.api(
                "GET", "/runs/00000000-0000-0000-0000-000000000000", "api run in an outage"
            )
            seen[f"API /runs {r.status_code if r is not None else 'transport-error'}"] += 1
            if r is not None and r.status_code == 500:
                with record.lock:
                    record.problems.append(f"{label}: API GET /runs answered 500")

    def back_within(label: str, seconds: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            r = prober._send("GET", "/")
            if r is not None and r.status_code == 200:
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)
        with record.lock:
            record.problems.append(
                f"{label}: the console did not answer 200 within {seconds:.0f} s after"
            )
        return -1.0

    def shell(command: str) -> int:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, check=False)  # noqa: S602 - the operator's own service command
        if done.returncode != 0:
            log(f"{command!r} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return done.returncode

    def pg_answers() -> bool:
        try:
            with psycopg.connect(admin_url, connect_timeout=2) as c:
                c.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def pause_a_worker() -> int | None:
        live = [p for p in fleet.workers if p is not None and p.poll() is None]
        if not args.pause_during_pg or not live:
            return None
        pid = infra_rng.choice(live).pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGSTOP)
        return pid

    def burst_runs(count: int) -> None:
        op = people["api-op"]
        body = {**START, "quantity": 1}

        def send(share: int) -> None:
            for _ in range(share):
                key = {"Idempotency-Key": uuid.uuid4().hex}
                r = op.api("POST", "/runs", "api burst start", body, key)
                if r is not None and r.status_code in (200, 201):
                    remember(r.json().get("id"))

        shares = [count // 4 + (i < count % 4) for i in range(4)]
        threads = [threading.Thread(target=send, args=(n,)) for n in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def infrastructure() -> None:
        """The infrastructure events, one after another at seeded moments of the first two
        thirds: PostgreSQL restarts, a PostgreSQL outage, a Redis outage."""
        events: list[tuple[str, str]] = [("pg-restart", c) for c in args.pg_restart]
        if args.pg_outage > 0 and args.pg_stop and args.pg_start:
            events.append(("pg-outage", ""))
        if args.redis_outage > 0:
            events.append(("redis-outage", ""))
        infra_rng.shuffle(events)
        span = max(10.0, args.seconds * 2 / 3) / max(1, len(events))
        for kind, command in events:
            if stop.wait(infra_rng.uniform(5, span)):
                return
            label = f"{kind} {command}".strip()
            if args.burst:
                burst_runs(args.burst)
            seen: Counter[str] = Counter()
            until = threading.Event()
            with psycopg.connect(admin_url) as c:
                in_flight = c.execute(
                    "SELECT count(*) FROM runs_run WHERE state NOT IN ('COMPLETED','FAILED','CANCELLED','ESCALATED')"
                ).fetchone()[0]
            paused = pause_a_worker() if kind.startswith("pg") else None
            start = time.time()
            log(
                f"{label}: {in_flight} runs in flight"
                + (f"; worker {paused} paused" if paused else "")
            )
            threading.Thread(target=probe, args=(label, until, seen), daemon=True).start()
            if kind == "pg-restart":
                shell(command)
            elif kind == "pg-outage":
                shell(args.pg_stop)
                time.sleep(args.pg_outage)
                shell(args.pg_start)
            else:
                with fleet.lock:
                    fleet.redis_down_until = time.monotonic() + args.redis_outage
                    if fleet.redis is not None:
                        fleet.redis.kill()
                        fleet.redis.wait()
                time.sleep(args.redis_outage)
                fleet.redis_down_until = 0.0
                fleet.ensure_full()
            if kind.startswith("pg"):
                while not pg_answers():
                    time.sleep(0.5)
            end = time.time()
            until.set()
            windows.append((start, end + 5, label))
            recovered = back_within(label, 30)
            if paused is not None:
                time.sleep(args.lease + 2)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(paused, signal.SIGCONT)
            infra_seen.append(
                {
                    "event": label,
                    "in_flight": in_flight,
                    "seconds": round(end - start, 1),
                    "console_200_after_s": recovered,
                    "paused_worker": paused,
                    "probes": dict(seen),
                }
            )
            log(f"{label}: over after {end - start:.1f} s; console answered in {recovered} s")

    drain_until = [float("inf")]
    chaos.start()
    infra_thread = threading.Thread(target=infrastructure, daemon=True)
    infra_thread.start()
    if args.beat_outage > 0:
        threading.Thread(target=beat_outage, daemon=True).start()
    actors = [
        threading.Thread(target=f, daemon=True)
        for f in (console_operator, bulk_canceller, api_operator, catalog, runbook_follower)
    ]
    approver_thread = threading.Thread(target=approvers, daemon=True)
    for t in [*actors, approver_thread]:
        t.start()
    time.sleep(args.seconds)
    infra_thread.join()  # an event under way finishes before the drain
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
            # A bulk operation whose hand-over was lost is re-handed by beat's operation
            # sweep (every 10 s, once nobody progressed it for 30 s): wait for it too.
            open_operations = c.execute(
                "SELECT count(*) FROM operations_operation WHERE status = 'running'"
            ).fetchone()[0]
        if open_runs == 0 and open_operations == 0:
            break
        time.sleep(2)
    drain_until[0] = 0
    approver_thread.join(timeout=30)
    settled = counts_findings(
        lambda path: watcher._send("GET", path, headers={"HX-Request": "true"}), admin_url
    )
    fleet.stop()

    findings = list(record.problems) + settled + exactly_once_findings(admin_url)
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
        # The counters are refreshed from the items (the truth) after each batch: once an
        # operation stopped they must equal its items' results, and a finished one has none
        # left pending.
        tallies = c.execute(
            "SELECT o.id::text, o.status, o.total, o.done, o.refused, o.already_terminal, count(i.id), "
            "count(*) FILTER (WHERE i.result = 'done'), count(*) FILTER (WHERE i.result = 'refused'), "
            "count(*) FILTER (WHERE i.result = 'already_terminal'), count(*) FILTER (WHERE i.result = '') "
            "FROM operations_operation o LEFT JOIN operations_operationitem i ON i.operation_id = o.id "
            "WHERE o.status IN ('finished', 'cancelled') GROUP BY o.id"
        ).fetchall()
        findings += [
            f"operation {t[0]} ({t[1]}): counters total/done/refused/already_terminal {t[2:6]} "
            f"but items {t[6]} done {t[7]} refused {t[8]} already_terminal {t[9]} pending {t[10]}"
            for t in tallies
            if tuple(t[2:6]) != (t[6], t[7], t[8], t[9]) or (t[1] == "finished" and t[10])
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
    web_log = (tmp / "gunicorn.out").read_text() if (tmp / "gunicorn.out").exists() else ""
    cut, fives = split_fives(access, web_log)
    outage_503 = [line for line in fives if " 503 " in line and in_window(line, windows)]
    fives = [line for line in fives if line not in outage_503]
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
        "worker_restarts": fleet.restarts,
        "statuses": dict(sorted(record.statuses.items())),
        "replay_tail": replay.stdout.strip().splitlines()[-3:],
        # 5xx answered because the request's own database connection was cut (expected).
        "connection_cut_5xx": cut[:20],
        "5xx_seen_by_people": record.fives[:20],
        "beat_outage": outage_seen,
        "infrastructure": infra_seen,
        "outage_503": len(outage_503),
        "findings": findings,
    }
    print(json.dumps(summary, indent=2))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
