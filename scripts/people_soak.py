"""People at once on the HTML console of the production deployment, while workers die.

Not a test: a soak for a deployment set up by hand (README "Running on PostgreSQL + Redis
+ Celery" and "Two database roles in production"). scripts/production_chaos.py drives runs
mostly through the API and checks the ledger; this one is about PEOPLE using the console
pages at once. It starts gunicorn (production settings) on --port, --workers Celery workers
and one beat, all as the application role (APP_DATABASE_URL), then for --seconds about
twelve signed-in browsers (session cookie, CSRF token read from the page, as htmx sends it):

- operators start runs from the start form, cancel them, change budgets on the run page,
  bulk-cancel rows of the runs list, cancel and reconcile by filter (operations), answer the
  clarifications their runs ask (questions for you);
- approvers work the approval queue: open a checkpoint, approve or decline it (two now and
  then at the same moment), filter the queue, read the history;
- catalog admins admit, defer, reject, deprecate and retire capability versions (two people
  where the catalog needs them) and close and reopen the effect gate;
- everyone reads the runs list with filters, search and keyset pages, the per-state counts,
  run pages and their HTMX fragments (the live refresh, timeline kinds and pages);

while a chaos thread SIGKILLs and SIGSTOPs/SIGCONTs worker pool children and parents at
random, SIGKILLs beat and SIGKILLs or SIGSTOPs a gunicorn worker (a busy one when one is:
mid-request); a supervisor restarts dead workers and beat, gunicorn's master its own. A
request a killed or paused web worker was serving is listed apart
(``no_answer_web_worker_killed``), not a finding. Then the chaos stops, every pending checkpoint
is approved and every clarification answered until --settle seconds pass with the workers
healthy, and it reports (JSON): requests, errors and p95 latency per route; every 5xx; every
answer slower than --slow seconds; every page that contradicts the database (a run row or
run page whose state is not the state of the event at the revision it shows, a pending
checkpoint listed or offered for decision after it was closed, a per-state count of an
ended state outside the database's counts before and after the request, a refused racing
approver told a winner other than the recorded decision, a bulk cancel shown applied to a
run that did not end CANCELLED); runs still not ended;
ledger reservations not bound to exactly one approved checkpoint; deadlock and lock-timeout
lines in the logs of gunicorn and the workers; once settled, the console's per-state
counts against the database's and exactly-once (scripts/drill.py ``exactly_once_findings``).

Environment: the production variables (DJANGO_SETTINGS_MODULE=fieldops.settings_production,
DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS including 127.0.0.1, FIELDOPS_CALLBACK_KEY,
FIELDOPS_EXECUTION=celery, CELERY_BROKER_URL, FIELDOPS_QUEUE), APP_DATABASE_URL (the
application role), ADMIN_DATABASE_URL (a superuser, for the checks), SOAK_PASSWORD; users
made with ``manage.py set_user`` in tenant north: op1..op4 (operator), ap1..ap4
(approver), cat1, cat2 (catalog-admin), lead (operator + approver), and ops-south (tenant
south, operator + approver); `manage.py collectstatic --noinput` run once (the web
process refuses to start without its output). Then:

    .venv/bin/python scripts/people_soak.py --seconds 600 --seed 7 --port 8620 --tmp /tmp/soak

Exit 0 when nothing was found.
"""

# A drill, not product code: the SQL of its checks stays on one line each; the people's
# closures run in threads; it starts the deployment's own executables.
# ruff: noqa: E501, S603, S108

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
from collections import Counter, defaultdict
from datetime import UTC, datetime
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

RUN_HREF = re.compile(r'href="/runs/([0-9a-f-]{36})/"')
CP_HREF = re.compile(r'id="queue-open-(cp-[0-9a-f]+)"')
ROW = re.compile(
    r'href="/runs/([0-9a-f-]{36})/" title="[^"]*">[^<]*</a></td>.*?<span class="badge ([A-Z_]+)">[A-Z_]+</span></td>\s*<td>.*?</td>\s*<td>(\d+)</td>',
    re.S,
)
BULK_ROW = re.compile(
    r'href="/runs/([0-9a-f-]{36})/">[^<]*</a></td>\s*<td><span class="badge (?:ok|bad)">(applied|refused)</span></td>\s*<td><code>([^<]*)</code>'
)
LIVE = re.compile(r'data-state="([A-Z_]+)" data-revision="(\d+)"')
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "ESCALATED"}
SCENARIOS = (
    ["reservation"] * 6 + ["clarify"] * 2 + ["never_progress", "abstain", "injection", "preamble"]
)
STATES = ["", "WAITING_HUMAN", "DECIDING", "COMPLETED", "CANCELLED", "FAILED", "EXECUTING"]
PASSWORD = os.environ.get("SOAK_PASSWORD", "")


def route_of(method: str, path: str, hx: bool) -> str:
    """The route a request belongs to, for the per-route figures."""
    bare, _, query = path.partition("?")
    bare = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", bare)
    bare = re.sub(r"cp-[0-9a-f]+", "<cp>", bare)
    bare = re.sub(r"/\d+/", "/<n>/", bare)
    bare = re.sub(r"/[a-z_]+/\d+\.\d+\.\d+/", "/<cap>/<v>/", bare)
    tag = ""
    if "since=" in query:
        tag = " live"
    elif (
        "before=" in query or "after=" in query or (bare.startswith("/runs/") and "kind=" in query)
    ):
        tag = " page"
    elif query:
        tag = " filtered"
    return f"{method} {bare}{tag}{' hx' if hx else ''}"


class Record:
    def __init__(self, slow: float) -> None:
        self.lock = threading.Lock()
        self.slow = slow
        self.times: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[str] = Counter()
        self.fives: list[str] = []
        self.slows: list[str] = []
        self.contradictions: list[str] = []
        self.problems: list[str] = []
        self.run_ids: set[str] = set()
        self.checks: Counter[str] = Counter()
        # Requests that got no answer: (started, ended, what); judged at the end against
        # the web worker kills (a killed worker's request gets none, by design).
        self.no_answers: list[tuple[float, float, str]] = []
        self.slow_spans: list[tuple[float, float, str]] = []  # the same, for slow answers

    def note(
        self, who: str, route: str, path: str, status: int | None, took: float, body: str
    ) -> None:
        with self.lock:
            self.times[route].append(took)
            self.statuses[f"{route} {status or 'transport-error'}"] += 1
            if status is None:
                now = time.time()
                self.no_answers.append((now - took, now, f"{who} {path}: no answer ({took:.1f} s)"))
            elif status >= 500:
                self.fives.append(
                    f"{time.strftime('%H:%M:%S')} {who} {path}: HTTP {status} {body[:160]!r}"
                )
            elif status >= 400 and not body.strip():
                self.problems.append(f"{who} {path}: HTTP {status} with an empty body")
            if took > self.slow:
                now = time.time()
                self.slow_spans.append(
                    (
                        now - took,
                        now,
                        f"{time.strftime('%H:%M:%S')} {who} {route} {path}: {took:.2f} s (HTTP {status})",
                    )
                )


class Person:
    """One browser: the session cookie, the CSRF token of the last page it read."""

    def __init__(self, base: str, name: str, record: Record) -> None:
        self.name = name
        self.record = record
        self.client = https_client(base, timeout=60)
        self.session = Session()
        self.lock = threading.Lock()

    def send(
        self, method: str, path: str, data: dict[str, Any] | None = None, hx: bool = False
    ) -> tuple[httpx.Response | None, float, float]:
        """(response, started, ended) as wall-clock times, for the database checks."""
        headers = self.session.headers()
        if hx:
            headers["HX-Request"] = "true"
        if method == "POST":
            data = {"csrfmiddlewaretoken": self.session.csrf, **(data or {})}
        started = time.time()
        try:
            response: httpx.Response | None = self.client.request(
                method, path, headers=headers, data=data
            )
        except httpx.HTTPError:
            response = None
        ended = time.time()
        body = ""
        if response is not None:
            self.session.read(self.client, response)
            body = response.text
        self.record.note(
            self.name,
            route_of(method, path, hx),
            path,
            response.status_code if response is not None else None,
            ended - started,
            body,
        )
        return response, started, ended

    def get(self, path: str, hx: bool = False) -> httpx.Response | None:
        return self.send("GET", path, hx=hx)[0]

    def post(self, path: str, data: dict[str, Any]) -> httpx.Response | None:
        return self.send("POST", path, data)[0]

    def login(self) -> None:
        for _ in range(20):
            self.get("/login/")
            r = self.post("/login/", {"username": self.name, "password": PASSWORD})
            if r is not None and r.status_code == 302:
                self.get("/")
                return
            time.sleep(1)
        raise SystemExit(f"sign-in as {self.name} failed")


class SoakFleet(Fleet):
    name = "soak"

    def ensure_full(self) -> None:
        with self.lock:
            self.restart_dead_workers()
            self.restart_dead_beat()

    def start(self) -> None:
        self.start_web("--access-logformat", '%(t)s %(p)s "%(r)s" %(s)s %(b)s %(L)s')
        self.start_workers_and_beat()


class SoakChaos(Chaos):
    """SIGKILL and SIGSTOP (resumed after a while) worker pool children and parents;
    SIGKILL beat (the sweeper, started again by the supervisor) and a gunicorn worker
    (a busy one when one is: mid-request)."""

    WEIGHTS = {
        "kill_child": 35,
        "kill_parent": 10,
        "pause_child": 25,
        "pause_worker": 10,
        "kill_beat": 4,
        "kill_web_worker": 6,
        "pause_web_worker": 3,
        "nothing": 20,
    }

    def act(self, action: str) -> None:
        if action == "kill_web_worker":
            self.kill_web_worker()
        elif action == "pause_web_worker":
            self.pause_web_worker()
        elif action == "kill_beat" and self.fleet.beat is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.fleet.beat.pid, signal.SIGKILL)


class Checker:
    """Compares what a page showed with the database (as a superuser, read only)."""

    def __init__(self, admin_url: str, record: Record) -> None:
        self.admin_url, self.record = admin_url, record
        self.local = threading.local()

    def _conn(self) -> psycopg.Connection[Any]:
        conn = getattr(self.local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(self.admin_url, autocommit=True)
            self.local.conn = conn
        return conn

    def runs_shown(self, who: str, path: str, shown: list[tuple[str, str, int]]) -> None:
        """Each (run, state, revision) a page showed: the event at that revision must exist
        and leave the run in that state."""
        if not shown:
            return
        ids = [r for r, _, _ in shown]
        rows = (
            self._conn()
            .execute(
                "SELECT e.run_id::text, e.sequence, e.next_state FROM runs_event e JOIN unnest(%s::uuid[], %s::int[]) AS s(run_id, seq) ON e.run_id = s.run_id AND e.sequence = s.seq",
                (ids, [rev for _, _, rev in shown]),
            )
            .fetchall()
        )
        at = {(r, seq): state for r, seq, state in rows}
        for run_id, state, rev in shown:
            self.record.checks["run state/revision"] += 1
            if rev == 0:
                continue
            real = at.get((run_id, rev))
            if real is None:
                self.record.contradictions.append(
                    f"{who} {path}: run {run_id} shown at revision {rev}, which has no event"
                )
            elif real != state:
                self.record.contradictions.append(
                    f"{who} {path}: run {run_id} shown {state} at revision {rev}; the event at {rev} left it {real}"
                )

    def terminal_counts(self) -> dict[str, int]:
        rows = (
            self._conn()
            .execute(
                "SELECT state, count(*) FROM runs_run WHERE namespace = 'live' AND tenant = 'north' AND state IN ('COMPLETED','FAILED','CANCELLED','ESCALATED') GROUP BY 1"
            )
            .fetchall()
        )
        return {state: n for state, n in rows}

    def counts_shown(
        self, who: str, html: str, before: dict[str, int], after: dict[str, int]
    ) -> None:
        """A terminal state's count only grows: the one shown lies between the counts
        before and after the request."""
        shown = {s: int(n) for s, n in re.findall(r'data-state="([A-Z_]+)">[A-Z_]+: (\d+)<', html)}
        for state in TERMINAL:
            self.record.checks["state count"] += 1
            low, high, got = before.get(state, 0), after.get(state, 0), shown.get(state, 0)
            if not low <= got <= high:
                self.record.contradictions.append(
                    f"{who} /operations/counts/: {state}: {got} shown, the database had {low} before the request and {high} after"
                )

    def winner_named(self, who: str, cid: str, html: str) -> None:
        """A refused decision that names who decided first names the decision recorded."""
        m = re.search(r"already (approved|declined|answered) by (?:you \()?([\w:.@-]+)", html)
        if not m:
            return
        self.record.checks["race loser told the winner"] += 1
        row = (
            self._conn()
            .execute(
                "SELECT verdict, decided_by_ref FROM approvals_decision WHERE checkpoint_id = %s",
                (cid,),
            )
            .fetchone()
        )
        said = (
            {"approved": "approve", "declined": "decline", "answered": "answer"}[m.group(1)],
            m.group(2),
        )
        if row is None or (row[0].lower(), row[1]) != said:
            self.record.contradictions.append(
                f"{who} POST /approvals/{cid}/decide/: told {m.group(0)!r}; the database holds {row}"
            )

    def checkpoints_pending(
        self, who: str, path: str, cps: list[str], started: float, what: str
    ) -> None:
        """Checkpoints a page offered as pending must not have closed before it was asked."""
        if not cps:
            return
        rows = (
            self._conn()
            .execute(
                "SELECT id, status, extract(epoch FROM closed_at) FROM approvals_checkpoint WHERE id = ANY(%s) AND closed_at IS NOT NULL",
                (cps,),
            )
            .fetchall()
        )
        self.record.checks[what] += len(cps)
        for cid, status, closed in rows:
            if closed is not None and float(closed) < started - 1.0:
                self.record.contradictions.append(
                    f"{who} {path}: {what} {cid} closed ({status}) {started - float(closed):.1f} s before the request"
                )


def main() -> int:  # one soak, read top to bottom
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument(
        "--settle", type=float, default=120, help="seconds of healthy workers after the load"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, default=8620)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slow", type=float, default=5.0)
    parser.add_argument(
        "--chaos-interval",
        type=float,
        nargs=2,
        default=list(Chaos.INTERVAL),
        metavar=("MIN", "MAX"),
        help="seconds between two chaos actions (a seeded draw between MIN and MAX)",
    )
    parser.add_argument(
        "--pause",
        type=float,
        nargs=2,
        default=list(Chaos.PAUSE),
        metavar=("MIN", "MAX"),
        help="how long a SIGSTOPped worker stays paused (seconds; over a lease to take it over)",
    )
    parser.add_argument("--tmp", default="/tmp/people-soak")
    args = parser.parse_args()
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    app_url, admin_url = os.environ["APP_DATABASE_URL"], os.environ["ADMIN_DATABASE_URL"]
    env = {**os.environ, "DATABASE_URL": app_url}
    rng = random.Random(args.seed)
    record = Record(args.slow)
    checker = Checker(admin_url, record)
    fleet = SoakFleet(args, env, tmp)
    fleet.start()
    base = f"http://127.0.0.1:{args.port}"
    for _ in range(60):
        with contextlib.suppress(httpx.HTTPError):
            if (
                httpx.get(base + "/healthz", headers={"X-Forwarded-Proto": "https"}).status_code
                == 200
            ):
                break
        time.sleep(0.5)
    names = [
        "op1",
        "op2",
        "op3",
        "op4",
        "ap1",
        "ap2",
        "ap3",
        "ap4",
        "cat1",
        "cat2",
        "lead",
        "ops-south",
    ]
    people = {n: Person(base, n, record) for n in names}
    for p in people.values():
        p.login()
    log("signed in:", ", ".join(names))
    chaos = SoakChaos(fleet, random.Random(rng.random()))
    chaos.INTERVAL = (args.chaos_interval[0], args.chaos_interval[1])
    chaos.PAUSE = (args.pause[0], args.pause[1])
    chaos.start()
    stop = threading.Event()
    rlock = threading.Lock()
    cancelled_applied: dict[str, str] = {}  # run -> qualification the bulk result showed

    def remember(run_id: str | None) -> None:
        if run_id:
            with rlock:
                record.run_ids.add(run_id)

    def some_runs(n: int) -> list[str]:
        with rlock:
            pool = sorted(record.run_ids)
        return rng.sample(pool, min(n, len(pool)))

    def read_list(
        p: Person, local: random.Random, path: str = "/", hx: bool = False
    ) -> list[tuple[str, str, int]]:
        r, _, _ = p.send("GET", path, hx=hx)
        if r is None or r.status_code != 200:
            return []
        rows = [(m.group(1), m.group(2), int(m.group(3))) for m in ROW.finditer(r.text)]
        checker.runs_shown(p.name, path, rows)
        if local.random() < 0.5:
            query = path.partition("?")[2]
            if query or p.name == "ops-south":
                p.get("/operations/counts/" + (f"?{query}" if query else ""), hx=True)
            else:
                before = checker.terminal_counts()
                c, _, _ = p.send("GET", "/operations/counts/", hx=True)
                after = checker.terminal_counts()
                if c is not None and c.status_code == 200:
                    checker.counts_shown(p.name, c.text, before, after)
        return rows

    def read_run(p: Person, local: random.Random, run_id: str) -> str:
        r = p.get(f"/runs/{run_id}/")
        if r is None or r.status_code != 200:
            return ""
        live = LIVE.search(r.text)
        if not live:
            return ""
        state, rev = live.group(1), int(live.group(2))
        checker.runs_shown(p.name, f"/runs/{run_id}/", [(run_id, state, rev)])
        for _ in range(local.randint(0, 3)):  # the page's live refresh, every 2 s
            if state in TERMINAL:
                break
            time.sleep(local.uniform(0.5, 2))
            kind = local.choice(["all", "all", "transitions", "control", "rejected"])
            f = p.get(f"/runs/{run_id}/?since={rev}&kind={kind}", hx=True)
            if f is not None and f.status_code == 200:
                m = LIVE.search(f.text)
                if m:
                    state, rev = m.group(1), int(m.group(2))
                    checker.runs_shown(p.name, f"/runs/{run_id}/?since=", [(run_id, state, rev)])
        if local.random() < 0.4:
            f = p.get(
                f"/runs/{run_id}/?kind={local.choice(['all', 'transitions', 'control'])}", hx=True
            )
            if f is not None and f.status_code == 200:
                older = re.search(r'id="timeline-older" href="\?([^"]+)"', f.text)
                if older:
                    p.get(f"/runs/{run_id}/?{older.group(1).replace('&amp;', '&')}", hx=True)
        return state

    def start_run(p: Person, local: random.Random, scenario: str) -> str | None:
        page = p.get("/")
        form = dict(HIDDEN.findall(page.text)) if page is not None else {}
        data = {"scenario": scenario, "equipment_id": "EQ-17", "location_id": "LOC-N1"}
        if "start_key" in form:
            data["start_key"] = form["start_key"]
        r = p.post("/runs/start/", data)
        if r is not None and r.status_code == 302:
            m = re.search(r"/runs/([0-9a-f-]{36})/", r.headers.get("location", ""))
            if m:
                remember(m.group(1))
                return m.group(1)
        return None

    def answer_questions(p: Person, local: random.Random) -> None:
        r, started, _ = p.send("GET", "/approvals/questions/")
        if r is None or r.status_code != 200:
            return
        cps = sorted(set(re.findall(r'href="/approvals/(cp-[0-9a-f]+)/"', r.text)))
        checker.checkpoints_pending(
            p.name, "/approvals/questions/", cps, started, "question listed"
        )
        for cid in cps[:2]:
            page, started, _ = p.send("GET", f"/approvals/{cid}/")
            if page is not None and f"/approvals/{cid}/answer/" in page.text:
                checker.checkpoints_pending(
                    p.name, f"/approvals/{cid}/", [cid], started, "answer form"
                )
                p.post(
                    f"/approvals/{cid}/answer/",
                    {
                        "answer": local.choice(
                            ["Use LOC-N1.", "LOC-N1 please", "the north depot, LOC-N1"]
                        )
                    },
                )

    def operator(name: str, share_starts: float) -> None:
        p, local = people[name], random.Random(rng.random())
        while not stop.is_set():
            roll = local.random()
            if roll < share_starts:
                rid = start_run(p, local, local.choice(SCENARIOS))
                if rid and local.random() < 0.5:
                    read_run(p, local, rid)
            elif roll < share_starts + 0.12:
                for rid in some_runs(1):
                    page = p.get(f"/runs/{rid}/")
                    if page is not None and f"/runs/{rid}/cancel/" in page.text:
                        p.post(f"/runs/{rid}/cancel/", {"reason": f"soak: {name} cancels"})
            elif roll < share_starts + 0.24:
                for rid in some_runs(1):
                    page = p.get(f"/runs/{rid}/")
                    if page is not None and f"/runs/{rid}/budget/" in page.text:
                        form = {
                            k: v for k, v in HIDDEN.findall(page.text) if k.startswith("shown_")
                        }
                        budget = local.choice(["turns", "proposals", "actions", "corrections"])
                        current = int(form.get(f"shown_{budget}", "10") or 10)
                        p.post(
                            f"/runs/{rid}/budget/",
                            {
                                **form,
                                "budget": budget,
                                "limit": str(max(1, current + local.choice([-2, 1, 4]))),
                                "reason": "soak: budget",
                            },
                        )
            elif roll < share_starts + 0.34:
                answer_questions(p, local)
            else:
                read_run(p, local, some_runs(1)[0]) if record.run_ids else None
            time.sleep(local.uniform(0.5, 2.0))

    def bulk_operator() -> None:
        p, local = people["op3"], random.Random(rng.random())
        while not stop.wait(local.uniform(3, 8)):
            roll = local.random()
            if roll < 0.45:
                rows = read_list(
                    p,
                    local,
                    local.choice(
                        [
                            "/",
                            "/?state=WAITING_HUMAN",
                            "/?state=DECIDING",
                            "/?scenario=never_progress",
                        ]
                    ),
                )
                chosen = [r for r, s, _ in rows if s not in TERMINAL][: local.randint(1, 4)]
                if chosen:
                    sent = p.post("/runs/cancel/", {"run": chosen, "reason": "soak: bulk"})
                    if sent is not None and sent.status_code == 302:
                        result = p.get(sent.headers.get("location", "/runs/cancel/result/"))
                        if result is not None and result.status_code == 200:
                            for rid, verdict, note in BULK_ROW.findall(result.text):
                                if verdict == "applied":
                                    with rlock:
                                        cancelled_applied[rid] = note
            elif roll < 0.6:
                state = local.choice(["WAITING_HUMAN", "DECIDING", ""])
                preview = p.get(f"/operations/cancel/?scenario=never_progress&state={state}")
                form = dict(HIDDEN.findall(preview.text)) if preview is not None else {}
                form.pop("csrfmiddlewaretoken", None)
                if form.get("previewed", "0") not in ("", "0"):
                    r = p.post(
                        "/operations/cancel/start/",
                        {**form, "reason": "soak: cancel by filter", "confirm": form["previewed"]},
                    )
                    if r is not None and r.status_code == 302:
                        p.get(r.headers.get("location", "/operations/"))
            elif roll < 0.85:
                rec = p.get("/recovery/")
                attempts = (
                    re.findall(r'name="attempt_id" value="([^"]+)"', rec.text)
                    if rec is not None
                    else []
                )
                if attempts:
                    p.post("/recovery/reconcile/", {"attempt_id": local.choice(attempts)})
                preview = p.get("/operations/reconcile/")
                form = dict(HIDDEN.findall(preview.text)) if preview is not None else {}
                form.pop("csrfmiddlewaretoken", None)
                if form.get("previewed", "0") not in ("", "0"):
                    p.post(
                        "/operations/reconcile/start/",
                        {**form, "confirm": form["previewed"], "reason": "soak: reconcile"},
                    )
            else:
                p.get("/operations/")
                p.get("/runbooks/")

    def browser(name: str) -> None:
        p, local = people[name], random.Random(rng.random())
        while not stop.is_set():
            state = local.choice(STATES)
            q = []
            if state:
                q.append(f"state={state}")
            if local.random() < 0.3:
                q.append(f"scenario={local.choice(['reservation', 'clarify', 'never_progress'])}")
            if local.random() < 0.2:
                q.append(f"age={local.choice(['1h', '24h'])}")
            if local.random() < 0.15 and record.run_ids:
                q.append("q=" + some_runs(1)[0][: local.choice([4, 8, 36])])
            path = "/" + ("?" + "&".join(q) if q else "")
            rows = read_list(p, local, path, hx=local.random() < 0.5)
            pages = 0
            while rows and pages < local.randint(0, 4):  # keyset pages: Older, then Newer
                r = p.get(path)
                older = (
                    re.search(r'href="\?([^"]*after=[^"]+)" rel="next"', r.text)
                    if r is not None
                    else None
                )
                if not older:
                    break
                nxt = "/?" + older.group(1).replace("&amp;", "&")
                rows = read_list(p, local, nxt)
                pages += 1
                if local.random() < 0.3:
                    newer = p.get(nxt)
                    back = (
                        re.search(r'href="\?([^"]*before=[^"]+)" rel="prev"', newer.text)
                        if newer is not None
                        else None
                    )
                    if back:
                        read_list(p, local, "/?" + back.group(1).replace("&amp;", "&"))
            for rid, _, _ in local.sample(rows, min(2, len(rows))):
                read_run(p, local, rid)
            time.sleep(local.uniform(0.3, 1.5))

    def approver(name: str, decline_share: float) -> None:
        p, local = people[name], random.Random(rng.random())
        while not stop.is_set():
            path = local.choice(
                [
                    "/approvals/",
                    "/approvals/",
                    "/approvals/?kind=approval",
                    "/approvals/?world=live",
                ]
            )
            r, started, _ = p.send("GET", path, hx=local.random() < 0.3)
            cps = CP_HREF.findall(r.text) if r is not None and r.status_code == 200 else []
            checker.checkpoints_pending(name, path, cps, started, "queue row")
            if not cps:
                if local.random() < 0.3:
                    p.get("/approvals/history/")
                time.sleep(local.uniform(0.5, 1.5))
                continue
            cid = local.choice(cps[:5])
            page, started, _ = p.send("GET", f"/approvals/{cid}/")
            if page is None or page.status_code != 200:
                continue
            if f"/approvals/{cid}/decide/" in page.text:
                checker.checkpoints_pending(
                    name, f"/approvals/{cid}/", [cid], started, "decide form"
                )
                seen = re.search(r'name="seen_hash" value="([0-9a-f]+)"', page.text)
                time.sleep(local.uniform(0.2, 2.5))  # reading the proposal
                if seen:
                    verdict = "decline" if local.random() < decline_share else "approve"
                    p.post(
                        f"/approvals/{cid}/decide/",
                        {
                            "verdict": verdict,
                            "seen_hash": seen.group(1),
                            "reason": f"soak: {name} {verdict}s",
                        },
                    )
            elif f"/approvals/{cid}/answer/" in page.text:
                pass  # a clarification: its requester answers it
            run = re.search(RUN_HREF, page.text)
            if run and local.random() < 0.4:
                read_run(p, local, run.group(1))
            time.sleep(local.uniform(0.3, 1.5))

    def catalog_admins() -> None:
        a, b, local = people["cat1"], people["cat2"], random.Random(rng.random())
        versions = {
            "read_equipment/1.0.1": 10,
            "check_inventory/1.1.0": 11,
            "search_manual/1.1.0": 9,
        }
        admitted: list[str] = []
        while not stop.wait(local.uniform(4, 10)):
            who, other = (a, b) if local.random() < 0.5 else (b, a)
            who.get(
                "/catalog/"
                + local.choice(["", "?lifecycle=ADMITTED", "?q=reserve", "?source=discovered"])
            )
            roll = local.random()
            todo = [v for v in versions if v not in admitted]
            if roll < 0.35 and todo:
                v = local.choice(todo)
                page = who.get(f"/catalog/{v}/")
                form = dict(HIDDEN.findall(page.text)) if page is not None else {}
                if form.get("lifecycle") == "ADMITTED":
                    admitted.append(v)  # admitted before (an earlier soak, the other admin)
                elif f"/catalog/versions/{versions[v]}/admit/" in (
                    page.text if page is not None else ""
                ):
                    # both admins press Admit on the same version now and then
                    other_form: dict[str, str] = {}
                    if local.random() < 0.4:
                        op = other.get(f"/catalog/{v}/")
                        other_form = dict(HIDDEN.findall(op.text)) if op is not None else {}
                    data = {
                        "lifecycle": form.get("lifecycle", ""),
                        "task_transition": "NEED_X -> HAVE_X",
                        "alternatives": "keep the admitted version",
                        "decision": "ADMIT_BOUNDED",
                        "expiry": "expires on contract change",
                        "reason": "soak: admit",
                    }
                    ts = [
                        threading.Thread(
                            target=who.post, args=(f"/catalog/versions/{versions[v]}/admit/", data)
                        )
                    ]
                    if other_form:
                        ts.append(
                            threading.Thread(
                                target=other.post,
                                args=(
                                    f"/catalog/versions/{versions[v]}/admit/",
                                    {**data, "lifecycle": other_form.get("lifecycle", "")},
                                ),
                            )
                        )
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                    admitted.append(v)
            elif roll < 0.5 and todo:
                v = local.choice(todo)
                page = who.get(f"/catalog/{v}/")
                form = dict(HIDDEN.findall(page.text)) if page is not None else {}
                if "lifecycle" in form:
                    who.post(
                        f"/catalog/versions/{versions[v]}/decide/",
                        {
                            "action": "defer",
                            "lifecycle": form["lifecycle"],
                            "reason": "soak: later",
                        },
                    )
            elif roll < 0.65 and admitted:
                v = local.choice(admitted)
                retire = f"/catalog/versions/{versions[v]}/retire/"
                page = who.get(retire)
                fields = dict(HIDDEN.findall(page.text)) if page is not None else {}
                keep = {k: val for k, val in fields.items() if k in ("lifecycle", "confirms")}
                who.post(retire, {**keep, "reason": "soak: retire", "acknowledge": "1"})
                page = other.get(retire)
                fields = dict(HIDDEN.findall(page.text)) if page is not None else {}
                keep = {k: val for k, val in fields.items() if k in ("lifecycle", "confirms")}
                if keep.get("confirms"):
                    other.post(
                        retire, {**keep, "reason": "soak: retire confirmed", "acknowledge": "1"}
                    )
            else:
                who.get("/catalog/reserve_part/1.0.0/")
                who.post("/catalog/versions/5/gate/", {"open": "0", "reason": "soak: gate closed"})
                time.sleep(local.uniform(0.5, 3))
                other.post(
                    "/catalog/versions/5/gate/", {"open": "1", "reason": "soak: gate reopened"}
                )

    def south() -> None:
        p, local = people["ops-south"], random.Random(rng.random())
        while not stop.wait(local.uniform(2, 5)):
            read_list(p, local, "/")
            p.get("/approvals/")
            for rid in some_runs(1):
                r = p.get(f"/runs/{rid}/")
                if r is not None and r.status_code == 200:
                    record.problems.append(f"ops-south read north run {rid}: HTTP 200")

    def racers() -> None:
        """The same checkpoint decided by two approvers (second tabs) at the same moment,
        now and then while an operator cancels its run."""
        a, b, o = (Person(base, n, record) for n in ("ap1", "ap2", "op4"))
        for tab in (a, b, o):
            tab.login()
        local = random.Random(rng.random())
        while not stop.wait(local.uniform(1, 4)):
            r = a.get("/approvals/?kind=approval")
            cps = CP_HREF.findall(r.text) if r is not None and r.status_code == 200 else []
            if not cps:
                continue
            cid = cps[-1]
            pages = [t.get(f"/approvals/{cid}/") for t in (a, b)]
            seen = [
                re.search(r'name="seen_hash" value="([0-9a-f]+)"', pg.text)
                if pg is not None
                else None
                for pg in pages
            ]
            run = re.search(RUN_HREF, pages[0].text) if pages[0] is not None else None
            barrier = threading.Barrier(3)

            def press(
                tab: Person,
                m: re.Match[str] | None,
                verdict: str,
                barrier: threading.Barrier = barrier,
                cid: str = cid,
            ) -> None:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=10)
                if m:
                    lost = tab.post(
                        f"/approvals/{cid}/decide/",
                        {
                            "verdict": verdict,
                            "seen_hash": m.group(1),
                            "reason": f"soak: race {verdict}",
                        },
                    )
                    if lost is not None and lost.status_code == 409:
                        checker.winner_named(tab.name, cid, lost.text)

            def cancel(
                barrier: threading.Barrier = barrier, run: re.Match[str] | None = run
            ) -> None:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=10)
                if run and local.random() < 0.4:
                    o.post(
                        f"/runs/{run.group(1)}/cancel/",
                        {"reason": "soak: cancel racing the approval"},
                    )

            threads = [
                threading.Thread(target=press, args=(a, seen[0], "approve")),
                threading.Thread(
                    target=press, args=(b, seen[1], local.choice(["approve", "decline"]))
                ),
                threading.Thread(target=cancel),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if run:
                read_run(a, local, run.group(1))

    actors = [
        threading.Thread(target=racers, daemon=True),
        threading.Thread(target=operator, args=("op1", 0.5), daemon=True),
        threading.Thread(target=operator, args=("op2", 0.5), daemon=True),
        threading.Thread(target=operator, args=("lead", 0.35), daemon=True),
        threading.Thread(target=bulk_operator, daemon=True),
        threading.Thread(target=browser, args=("op4",), daemon=True),
        threading.Thread(target=approver, args=("ap1", 0.1), daemon=True),
        threading.Thread(target=approver, args=("ap2", 0.1), daemon=True),
        threading.Thread(target=approver, args=("ap3", 0.25), daemon=True),
        threading.Thread(target=approver, args=("ap4", 0.05), daemon=True),
        threading.Thread(target=catalog_admins, daemon=True),
        threading.Thread(target=south, daemon=True),
    ]
    began = time.time()
    for t in actors:
        t.start()
    while time.time() - began < args.seconds:
        time.sleep(5)
        with record.lock:
            n = sum(len(v) for v in record.times.values())
        log(
            f"{n} requests, {len(record.fives)} 5xx, {len(record.slow_spans)} slow, {len(record.contradictions)} contradictions, {len(record.run_ids)} runs, chaos {dict(chaos.stats)}"
        )
    stop.set()
    for t in actors:
        t.join(timeout=90)
    chaos.calm_down()  # the thread goes on as the workers' supervisor
    fleet.ensure_full()
    load_ended = time.time()
    log("load stopped; approving and answering what waits, workers healthy")

    # Settle: workers healthy; whatever waits for a person is approved or answered.
    settle_end = time.time() + args.settle
    ap, requester = people["ap4"], {n: people[n] for n in ("op1", "op2", "lead")}
    while time.time() < settle_end:
        fleet.ensure_full()
        with psycopg.connect(admin_url, autocommit=True) as c:
            waiting = c.execute(
                "SELECT c.id, c.kind, r.principal_ref FROM approvals_checkpoint c JOIN runs_run r ON r.id = c.run_id WHERE c.status = 'PENDING' AND r.tenant = 'north'"
            ).fetchall()
        for cid, kind, principal in waiting:
            if kind == "clarification":
                who = next(
                    (p for n, p in requester.items() if principal.endswith(n) or n in principal),
                    None,
                )
                if who is not None:
                    who.post(f"/approvals/{cid}/answer/", {"answer": "LOC-N1"})
            else:
                page = ap.get(f"/approvals/{cid}/")
                seen = (
                    re.search(r'name="seen_hash" value="([0-9a-f]+)"', page.text)
                    if page is not None
                    else None
                )
                if seen:
                    ap.post(
                        f"/approvals/{cid}/decide/",
                        {
                            "verdict": "approve",
                            "seen_hash": seen.group(1),
                            "reason": "soak: settle",
                        },
                    )
        time.sleep(3)

    with psycopg.connect(admin_url, autocommit=True) as c:
        stuck = c.execute(
            "SELECT id::text, state, revision, scenario, waiting_checkpoint FROM runs_run WHERE state NOT IN ('COMPLETED','FAILED','CANCELLED','ESCALATED') ORDER BY created_at"
        ).fetchall()
        states = dict(c.execute("SELECT state, count(*) FROM runs_run GROUP BY 1").fetchall())
        ledger_cols = {
            r[0]
            for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'world_ledgerentry'"
            ).fetchall()
        }
        dup_keys: list[Any] = []
        if "idempotency_key" in ledger_cols:
            dup_keys = c.execute(
                "SELECT idempotency_key, count(*) FROM world_ledgerentry GROUP BY 1 HAVING count(*) > 1"
            ).fetchall()
        per_proposal = c.execute(
            "SELECT c.run_id::text, c.proposal_hash, count(*) FROM approvals_checkpoint c WHERE c.kind = 'approval' AND c.status = 'APPROVED' GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
        applied_not_cancelled = [
            [
                rid,
                note,
                *c.execute(
                    "SELECT state, terminal_reason FROM runs_run WHERE id = %s", (rid,)
                ).fetchone(),
            ]
            for rid, note in sorted(cancelled_applied.items())
        ]
        applied_not_cancelled = [r for r in applied_not_cancelled if r[2] != "CANCELLED"]
        ops_open = c.execute(
            "SELECT id::text, kind, status FROM operations_operation WHERE status IN ('running', 'paused')"
        ).fetchall()
        ledger_per_run = c.execute(
            "SELECT run_id::text, count(*) FROM world_ledgerentry GROUP BY 1 HAVING count(*) > 1"
        ).fetchall()
    replay = subprocess.run(
        [str(BIN / "python"), "manage.py", "replay", "--all"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    settled = counts_findings(lambda path: people["op1"].get(path, hx=True), admin_url)
    settled += exactly_once_findings(admin_url)
    fleet.stop()
    killed = [text for s, e, text in record.no_answers if chaos.killed_web_during(s, e)]
    record.problems += [text for s, e, text in record.no_answers if text not in killed]
    # A request served by a web worker the chaos paused waited for its resumption.
    killed += [text for s, e, text in record.slow_spans if chaos.killed_web_during(s, e)]
    record.slows = [text for s, e, text in record.slow_spans if text not in killed]
    record.problems += settled

    lock_lines: list[str] = []
    for logfile in sorted(tmp.glob("*.log")) + sorted(tmp.glob("*.out")):
        for line in logfile.read_text(errors="replace").splitlines():
            low = line.lower()
            if (
                "deadlock" in low
                or "lock timeout" in low
                or "canceling statement due to lock" in low
                or "lock_timeout" in low
            ):
                lock_lines.append(f"{logfile.name}: {line[:300]}")
    routes = {}
    for route, took in sorted(record.times.items()):
        ordered = sorted(took)
        routes[route] = {
            "n": len(ordered),
            "p50": round(ordered[len(ordered) // 2], 3),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
            "max": round(ordered[-1], 3),
            "errors": sum(
                v
                for k, v in record.statuses.items()
                if k.startswith(route + " ")
                and (k.endswith("error") or k.rsplit(" ", 1)[1] >= "500")
            ),
        }
    summary = {
        "seconds": args.seconds,
        "requests": sum(len(v) for v in record.times.values()),
        "statuses": Counter(k.rsplit(" ", 1)[1] for k in record.statuses.elements()),
        "routes": routes,
        "fives": record.fives,
        "slow": record.slows,
        "contradictions": record.contradictions,
        "checks": dict(record.checks),
        "problems": record.problems,
        "stuck_after_settle": [list(r) for r in stuck],
        "runs_by_state": states,
        "duplicate_ledger_keys": [list(r) for r in dup_keys],
        "approved_twice": [list(r) for r in per_proposal],
        "operations_open": [list(r) for r in ops_open],
        "bulk_cancel_applied": len(cancelled_applied),
        "bulk_cancel_applied_not_cancelled": applied_not_cancelled,
        "ledger_entries_per_run_over_1": [list(r) for r in ledger_per_run],
        "lock_lines": lock_lines[:50],
        "replay_rc": replay.returncode,
        "replay_tail": replay.stdout[-400:] + replay.stderr[-400:],
        "chaos": dict(chaos.stats),
        "no_answer_web_worker_killed": killed[:20],
        "worker_restarts": fleet.restarts,
        "load_ended": datetime.fromtimestamp(load_ended, UTC).isoformat(),
    }
    (tmp / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str))
    found = (
        record.fives
        or record.slows
        or record.contradictions
        or record.problems
        or stuck
        or dup_keys
        or per_proposal
        or ledger_per_run
        or lock_lines
        or replay.returncode
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
