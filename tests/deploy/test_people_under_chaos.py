"""A seeded random drill of the PostgreSQL + Redis + Celery deployment (README): several
people act at once over real HTTP while worker processes are killed and paused.

The deployment as documented, as subprocesses on the production settings
(``fieldops.settings_production`` with the environment the README has a deployer set:
secret key, allowed hosts, callback key, ``DATABASE_URL``, ``CELERY_BROKER_URL``, and the
files ``collectstatic`` wrote), the test database, this test's Redis database and its own
queue: gunicorn started with ``-c gunicorn.conf.py`` and ``WEB_CONCURRENCY=3`` (three web
workers), two Celery workers (prefork, two pool processes each: ``make worker``'s
``--concurrency 2``) and one beat (the sweeper). The people reach gunicorn as through the
TLS-terminating proxy those settings require (``X-Forwarded-Proto: https``, the client in
``X-Forwarded-For``; the browsers send their HTTPS ``Origin`` and their ``Secure``
cookies); nothing in the settings is relaxed for the test.

Five people, each in their own thread with their own seeded choices:

- an operator in a browser (login, CSRF) who starts runs through the console's start form
  and cancels some of them through the run page's form;
- an operator's integration (bearer token) that starts runs with an ``Idempotency-Key``
  (sometimes sending the same start twice) and cancels some through the API;
- an approver in a browser who opens the approvals queue, the exact proposal, and approves
  (or now and then declines) the hash the page shows;
- an approver's integration that lists the pending checkpoints and decides through the API
  (both approvers race for the same checkpoints: the loser hears a 409; half of the seeds
  set a quorum of two, so they also race for its places; half of the integration's
  declines ask for a changed quantity, so the run proposes again);
- an operator watching: the run pages, the API's run, the recovery page, the runs list.

Meanwhile the chaos thread of ``tests/durable/chaos.py`` SIGKILLs pool processes and worker
parents (a supervisor restarts them) and SIGSTOPs a pool process or a whole worker for
longer than the lease, then SIGCONTs it. At seeded moments of each chaos phase (before
and after the host freeze) it also SIGKILLs beat once (the supervisor starts it again)
and one of gunicorn's web workers three times, aiming at one inside a request while a
person's write is under way (the arbiter starts another). A request that worker was serving gets no
answer: the person treats that action's outcome as unknown (the integration sends the
same Idempotency-Key again; a browser's start, cancel or decision stays unknown) and
the checks below accept either outcome for exactly that action.

Once, at a seeded moment, every worker process is frozen together (a hung host): the people
go on for a few seconds (their approvals hand runs to a queue nobody consumes), then pause
while the console is read. The run page must say "not moving" for exactly the runs the
record shows active without a live owner, and the recovery page must list exactly those;
then the workers resume and must pick them all up.

Then the people finish deciding what still waits, the fleet quiesces, and, from the
database, the world's ledger and the console:

- every run ended, or waits for a person with its checkpoint in the approvals queue;
- a completed run holds exactly one ledger reservation, a run never granted an approval
  none, no run more than one; ``effect_violations`` finds nothing and ``manage.py replay``
  (hash chains, audit replay) exits 0;
- what each person was told is what the record holds: an approval or decline answered
  "done" is one ``approval.granted`` / ``approval.declined`` event, a cancellation answered
  "done" the run's one ``run.cancelled`` (one that got no answer may add one event, never
  more, and a run has at most one); the same Idempotency-Key started one run; a start
  that got no answer started at most one run, which every check covers as any other;
- every run page and API answer the watcher got during the chaos showed the state the
  run's events fold to at the revision it named, and a page that said "not moving" was
  about a run that moves by itself (not one waiting for a person, nor one that ended);
- the sweeper reported after beat's last kill (beat came back and sweeps);
- nobody got a 5xx on a request that was answered; the run page (state and revision),
  the API's run and the recovery page's ledger lookup of each attempt answer 200 and
  match the database, and the recovery page lists none of the runs as stalled.

The seed is printed; ``FIELDOPS_DRILL_SEED=<seed>`` repeats every choice of the people and
of the chaos thread (process timing still varies). ``FIELDOPS_DRILL_RUNS`` (default 24) sets
how many runs are started. About 1.5-2.5 minutes with start-up and drain.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import Q

from approvals.models import Checkpoint
from runs.domain import effects
from runs.domain.states import TERMINAL_STATES, WAITING_STATES, EventType, State
from runs.models import EffectAttempt, Event, Run
from runs.replay.effect_audit import effect_violations
from sim.world.fixtures import LIVE_NAMESPACE
from sim.world.models import InventorySlot, LedgerEntry
from tests.conftest import make_user
from tests.deploy.servers import ROOT, Browser, NoAnswer, WebProcess, Writes, run_id_of
from tests.deploy.test_people_at_once import ApiClient
from tests.durable import conftest as durable
from tests.durable.chaos import Chaos, ChaosStats, Fleet, signal_group, started_fleet

cluster = durable.cluster  # real Celery workers on this test's Redis database and queue

pytestmark = [pytest.mark.celery, pytest.mark.postgres]

SEED = os.environ.get("FIELDOPS_DRILL_SEED", "")
RUNS = int(os.environ.get("FIELDOPS_DRILL_RUNS", "30"))
WORKERS, CONCURRENCY, LEASE_SECONDS = 2, 2, 3
IN_FLIGHT = 3  # runs each operator keeps going at once
CANCEL_SHARE = 0.2
DECLINE_SHARE = 0.2
MIN_CHAOS_SECONDS, MAX_CHAOS_SECONDS = 40.0, 90.0
DRAIN_SECONDS = 90.0
SWEEP_SECONDS = 20.0
STOCKED_SLOT, STOCK = "S-N1-01", 5_000
START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')
QUEUE_LINK = re.compile(r'id="queue-open-([^"]+)"')
LIVE_STATE = re.compile(r'data-state="([A-Z_]+)" data-revision="(\d+)"')
TERMINAL = [s.value for s in TERMINAL_STATES]
SWEPT_BY_NOW = effects.SWEEPER_PICKUP - {effects.AttemptStatus.UNRESOLVED}


@dataclass
class Record:
    """What the people did and were told, shared by their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: set[str] = field(default_factory=set)
    by_starter: Counter[str] = field(default_factory=Counter)
    keys: dict[str, set[str]] = field(default_factory=dict)  # Idempotency-Key -> run ids
    cancel_plan: dict[str, float] = field(default_factory=dict)  # run id -> when
    told_cancelled: Counter[str] = field(default_factory=Counter)  # run id -> "done" answers
    told_approved: Counter[str] = field(default_factory=Counter)  # checkpoint -> "done"
    told_declined: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    # Writes whose connection was cut by a killed web worker: their outcome is unknown.
    unknown_starts: int = 0
    maybe_cancelled: Counter[str] = field(default_factory=Counter)  # run id -> cut cancels
    maybe_decided: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verdict, cp)
    # (run id, state, revision, where) the watcher was shown while the chaos went on
    seen: list[tuple[str, str, int, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def note(self, who: str, action: str, status: int, what: str, ok: tuple[int, ...]) -> None:
        with self.lock:
            self.statuses[f"{action} {status}"] += 1
            if status not in ok:
                self.problems.append(f"{who} {action} {what}: HTTP {status}")

    def cut(self, action: str) -> None:
        """Note a request that got no answer (its web worker was killed)."""
        with self.lock:
            self.statuses[f"{action} no answer"] += 1


class Person(threading.Thread):
    """One person's loop, with its own seeded choices, until ``stop`` is set. A read that
    gets no answer (its web worker was killed) ends that action, as a person would look
    again; each write notes its own unknown outcome in the ``Record``."""

    def __init__(
        self,
        name: str,
        seed: int,
        act: Callable[[random.Random], None],
        hold: threading.Event,
        record: Record,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.rng = random.Random(f"{seed}:{name}")
        self.act = act
        self.hold = hold  # set: the person stops acting (after the action in hand)
        self.record = record
        self.idle = threading.Event()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.stop.is_set():
                if self.hold.is_set():
                    self.idle.set()
                    self.stop.wait(0.05)
                    continue
                self.idle.clear()
                try:
                    self.act(self.rng)
                except NoAnswer:
                    self.record.cut(f"{self.name} read")
                self.stop.wait(self.rng.uniform(0.05, 0.4))
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()


def _api_run_state(api: ApiClient, run_id: str) -> str:
    status, _, body = api.call("GET", f"/runs/{run_id}")
    return str(body["state"]) if status == 200 else f"HTTP {status}"


def _host_freeze(
    fleet: Fleet, people: list[Person], hold: threading.Event, watch: Browser, record: Record
) -> list[str]:
    """Every worker process frozen at once (a hung host): the people go on for a few
    seconds (approvals hand runs to a queue nobody consumes), then stop while the console
    is read. Once every lease has expired and no run has changed for longer than the
    console allows, the run page must say "not moving" for exactly the runs the record
    shows active with no live owner, and the recovery page must list exactly those. Then
    the workers resume, and the people with them.

    Returns a one-line summary, then the problems found."""
    web_and_beat = {p.pid for p in (fleet.beat, fleet.web and fleet.web.process) if p}
    groups = sorted(fleet.groups - web_and_beat)
    for group in groups:
        signal_group(group, signal.SIGSTOP)
    try:
        # The people keep acting against a frozen fleet, until a decision was taken (a run
        # handed to a queue nobody consumes) or for 10 s at most.
        def acted() -> tuple[int, int]:
            with record.lock:
                decided = sum(record.told_approved.values()) + sum(record.told_declined.values())
                return decided, len(record.runs)

        before, deadline = acted(), time.monotonic() + 10.0
        time.sleep(2.0)
        while acted()[0] == before[0] and time.monotonic() < deadline:
            time.sleep(0.2)
        after = acted()
        hold.set()
        for person in people:
            person.idle.wait(timeout=60)
        # Leases run out LEASE_SECONDS after the freeze at the latest; the console calls
        # a run stuck "stuck after" (2 s) past its lease, or 2 x that after its last change.
        time.sleep(2 * 2 + 2.0)
        moving = [s.value for s in State if s not in TERMINAL_STATES | WAITING_STATES]
        now = time.time()
        expected = set()
        for run_id, expires, updated in Run.objects.filter(
            pk__in=record.runs, state__in=moving
        ).values_list("pk", "lease_expires_at", "updated_at"):
            if expires is None:
                assert updated.timestamp() < now - 4, (run_id, updated)
            else:
                assert expires.timestamp() < now - 2, (run_id, expires)
            expected.add(str(run_id))
        problems = []
        for run_id in sorted(record.runs):
            page = watch.get(f"/runs/{run_id}/")
            said = 'id="run-stalled"' in page.body
            if page.status != 200 or said != (run_id in expected):
                problems.append(
                    f"host freeze: run {run_id}'s page ({page.status}) says"
                    f" {'not moving' if said else 'nothing about moving'}; the record shows"
                    f" {'an active run without a live owner' if run_id in expected else 'no stall'}"
                )
        recovery = watch.get("/recovery/")
        stalled = recovery.body.split('id="stalled-h"', 1)[-1].split('id="unknown-h"', 1)[0]
        listed = {r for r in record.runs if f"/runs/{r}/" in stalled}
        if recovery.status != 200 or listed != expected:
            problems.append(
                f"host freeze: the recovery page ({recovery.status}) lists {sorted(listed)}"
                f" as not moving, the record {sorted(expected)}"
            )
        return [
            f"{after[0] - before[0]} decisions and {after[1] - before[1]} starts while"
            f" frozen; {len(expected)} runs without a live owner",
            *problems,
        ]
    finally:
        for group in groups:
            signal_group(group, signal.SIGCONT)
        hold.clear()


@pytest.fixture
def fleet(cluster: Any, tmp_path: Path, collected_static: Path) -> Iterator[Fleet]:
    with started_fleet(
        cluster,
        tmp_path,
        size=WORKERS,
        concurrency=CONCURRENCY,
        lease_seconds=LEASE_SECONDS,
        static_root=collected_static,
    ) as f:
        yield f


def _web(fleet: Fleet, tmp_path: Path) -> WebProcess:
    """gunicorn as the README starts it: its own config file, workers from WEB_CONCURRENCY."""
    argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py")]
    argv += ["fieldops.wsgi:application", "--bind", "127.0.0.1:{port}", "--timeout", "30"]
    return WebProcess(argv, {**fleet.env(), "WEB_CONCURRENCY": "3"}, tmp_path / "web.log")


def test_people_acting_at_once_under_kills_and_pauses_leave_a_provable_record(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(SEED or random.SystemRandom().randrange(2**32))
    with capsys.disabled():
        print(f"\ndrill: seed {seed} (FIELDOPS_DRILL_SEED={seed} repeats its choices)")
    people_users = {
        "op-web": ("operator",),
        "op-api": ("operator",),
        "ap-web": ("approver",),
        "ap-api": ("approver",),
        "watch": ("operator",),
    }
    users = {
        name: make_user(f"drill-{name}", "north", *roles) for name, roles in people_users.items()
    }
    # Half of the seeds need two approvers to agree (an M-of-N policy): the two approvers
    # then race for the quorum's places as well as for the checkpoint.
    quorum = random.Random(f"{seed}:policy").choice([1, 2])
    if quorum == 2:
        call_command("approvals_policy", "--tenant", "north", "--name", "two", "--quorum", "2")
    InventorySlot.objects.filter(namespace=LIVE_NAMESPACE, slot_id=STOCKED_SLOT).update(
        available=STOCK
    )
    live_slots = InventorySlot.objects.filter(namespace=LIVE_NAMESPACE)
    stock_before = dict(live_slots.values_list("slot_id", "available"))
    web = _web(fleet, tmp_path)
    fleet.start(web)
    web_start = time.monotonic()

    writes = Writes()  # under way now, of every person: the web worker kills aim at them

    def browser(name: str) -> Browser:
        b = Browser(web.url, behind_tls_proxy=True, writes=writes)
        b.login(f"drill-{name}", f"pw-drill-{name}")
        return b

    op_web, ap_web, watch = browser("op-web"), browser("ap-web"), browser("watch")
    op_api, ap_api, watch_api = (
        ApiClient(web.url, users[name], behind_tls_proxy=True, writes=writes)
        for name in ("op-api", "ap-api", "watch")
    )
    record = Record()
    half = RUNS // 2
    hold = threading.Event()  # set: the people stop acting (the host freeze's check)
    deciding_all = threading.Event()  # set: approvers approve everything (the drain)

    def planned(run_id: str, starter: str, rng: random.Random) -> None:
        with record.lock:
            record.runs.add(run_id)
            record.by_starter[starter] += 1
            if rng.random() < CANCEL_SHARE / 2:  # at a random moment of its first seconds
                record.cancel_plan[run_id] = time.monotonic() + rng.uniform(0.0, 2.0)

    def in_flight(starter: str) -> int:
        with record.lock:
            mine = set(record.runs)
        return (
            Run.objects.filter(pk__in=mine, principal_ref__endswith=f"drill-{starter}")
            .exclude(state__in=TERMINAL)
            .count()
        )

    def due_cancels(rng: random.Random, share: int) -> list[str]:
        now = time.monotonic()
        with record.lock:
            due = sorted(r for r, t in record.cancel_plan.items() if t <= now)
            mine = [r for r in due if rng.random() < 0.5 or share]
            for r in mine:
                record.cancel_plan.pop(r)
        return mine

    def operator_web(rng: random.Random) -> None:
        if record.by_starter["op-web"] < half and in_flight("op-web") < IN_FLIGHT:
            try:
                response = op_web.post("/runs/start/", START_FORM)
            except NoAnswer:  # a run may have started: the final count allows for it
                record.cut("start")
                with record.lock:
                    record.unknown_starts += 1
                    record.by_starter["op-web"] += 1
                return
            record.note("op-web", "start", response.status, "form", (302,))
            if response.status == 302:
                planned(run_id_of(response), "op-web", rng)
        for run_id in due_cancels(rng, share=0):
            try:
                response = op_web.post(f"/runs/{run_id}/cancel/", {"reason": "drill: operator"})
            except NoAnswer:
                maybe_cancelled(run_id)
                continue
            record.note("op-web", "cancel", response.status, run_id, (302, 409))
            if response.status == 302:
                with record.lock:
                    record.told_cancelled[run_id] += 1

    def operator_api(rng: random.Random) -> None:
        if record.by_starter["op-api"] < RUNS - half and in_flight("op-api") < IN_FLIGHT:
            key = f"drill-{uuid.UUID(int=rng.getrandbits(128)).hex[:20]}"
            body = {"scenario": "reservation", "location_id": "LOC-N1"}
            sends, answered, cut = (2 if rng.random() < 0.3 else 1), 0, 0
            while answered < sends:  # a retried start: one run
                try:
                    status, _, answer = op_api.call("POST", "/runs", body, key=key)
                except NoAnswer:  # unknown: the integration sends the same start again
                    record.cut("start")
                    cut += 1
                    if cut == 5:  # given up on: it may have started a run
                        with record.lock:
                            record.unknown_starts += 1
                        break
                    continue
                answered += 1
                record.note("op-api", "start", status, key, (200, 201, 409))
                if status in (200, 201):
                    with record.lock:
                        record.keys.setdefault(key, set()).add(str(answer["id"]))
                        known = str(answer["id"]) in record.runs
                    if not known:  # 201, or 200 replaying a start whose answer was cut
                        planned(str(answer["id"]), "op-api", rng)
        for run_id in due_cancels(rng, share=1):
            try:
                status, _, answer = op_api.call(
                    "POST", f"/runs/{run_id}/cancel", {"reason": "drill: integration"}
                )
            except NoAnswer:
                maybe_cancelled(run_id)
                continue
            record.note("op-api", "cancel", status, run_id, (200, 409))
            if status == 200:
                with record.lock:
                    record.told_cancelled[run_id] += 1
            elif status == 409 and answer.get("code") == "busy":
                with record.lock:  # told to try again: it does, a moment later
                    record.cancel_plan[run_id] = time.monotonic() + 1.0

    def maybe_cancelled(run_id: str) -> None:
        record.cut("cancel")
        with record.lock:
            record.maybe_cancelled[run_id] += 1

    def maybe_decided(checkpoint: str, choice: str) -> None:
        record.cut(choice)
        with record.lock:
            record.maybe_decided[(choice, checkpoint)] += 1

    def verdict(rng: random.Random) -> str:
        if deciding_all.is_set():
            return "approve"
        return "decline" if rng.random() < DECLINE_SHARE else "approve"

    def told_done(checkpoint: str, choice: str, rng: random.Random) -> None:
        """Note a decision answered "done"; after some approvals an operator cancels the
        run at once, racing the worker that continues it to the reservation."""
        run_id = str(Checkpoint.objects.get(pk=checkpoint).run_id)
        with record.lock:
            told = record.told_approved if choice == "approve" else record.told_declined
            told[checkpoint] += 1
            if choice == "approve" and rng.random() < CANCEL_SHARE / 2:
                record.cancel_plan.setdefault(run_id, time.monotonic())

    def approver_web(rng: random.Random) -> None:
        queue = ap_web.get("/approvals/")
        record.note("ap-web", "queue", queue.status, "", (200,))
        pending = QUEUE_LINK.findall(queue.body)
        if not pending:
            return
        checkpoint = rng.choice(sorted(pending))
        page = ap_web.get(f"/approvals/{checkpoint}/")
        record.note("ap-web", "review", page.status, checkpoint, (200, 404))
        seen = SEEN_HASH.search(page.body)
        if page.status != 200 or seen is None:
            return
        choice = verdict(rng)
        try:
            response = ap_web.post(
                f"/approvals/{checkpoint}/decide/",
                {"verdict": choice, "seen_hash": seen.group(1), "reason": f"drill: {choice}"},
            )
        except NoAnswer:
            maybe_decided(checkpoint, choice)
            return
        record.note("ap-web", choice, response.status, checkpoint, (302, 409))
        if response.status == 302:
            told_done(checkpoint, choice, rng)

    def approver_api(rng: random.Random) -> None:
        status, _, pending = ap_api.call("GET", "/checkpoints")
        record.note("ap-api", "queue", status, "", (200,))
        if status != 200 or not pending:
            return
        checkpoint = rng.choice(sorted(c["id"] for c in pending))
        status, _, proposal = ap_api.call("GET", f"/checkpoints/{checkpoint}")
        record.note("ap-api", "review", status, checkpoint, (200,))
        if status != 200 or proposal["status"] != "PENDING":
            return
        choice = verdict(rng)
        decision: dict[str, Any] = {
            "verdict": choice,
            "seen_hash": proposal["proposal_hash"],
            "reason": "drill",
        }
        if choice == "decline" and rng.random() < 0.5:  # asks for a new proposal
            decision["requested_change"] = {"quantity": 2}
        try:
            status, _, answer = ap_api.call("POST", f"/checkpoints/{checkpoint}/decision", decision)
        except NoAnswer:
            maybe_decided(checkpoint, choice)
            return
        record.note("ap-api", choice, status, checkpoint, (200, 409))
        if status == 200 and answer["recorded"]:
            told_done(checkpoint, choice, rng)

    def watcher(rng: random.Random) -> None:
        with record.lock:
            known = sorted(record.runs)
        if known:
            run_id = rng.choice(known)
            page = watch.get(f"/runs/{run_id}/")
            record.note("watch", "run page", page.status, run_id, (200,))
            shown = LIVE_STATE.search(page.body)
            if page.status == 200 and shown:
                stalled = 'id="run-stalled"' in page.body
                seen = (run_id, shown.group(1), int(shown.group(2)), f"page{'+stalled' * stalled}")
                with record.lock:
                    record.seen.append(seen)
            status, _, body = watch_api.call("GET", f"/runs/{run_id}")
            record.note("watch", "api run", status, run_id, (200,))
            if status == 200:
                with record.lock:
                    record.seen.append((run_id, body["state"], body["revision"], "api"))
        if rng.random() < 0.3:
            page = watch.get("/recovery/")
            record.note("watch", "recovery", page.status, "", (200,))
        if rng.random() < 0.2:
            page = watch.get("/")
            record.note("watch", "runs list", page.status, "", (200,))

    people = [
        Person("op-web", seed, operator_web, hold, record),
        Person("op-api", seed, operator_api, hold, record),
        Person("ap-web", seed, approver_web, hold, record),
        Person("ap-api", seed, approver_api, hold, record),
        Person("watch", seed, watcher, hold, record),
    ]

    def chaos_phase(label: str) -> Chaos:
        return Chaos(
            fleet,
            random.Random(f"{seed}:{label}"),
            lease_seconds=LEASE_SECONDS,
            web_workers=True,
            writes=writes.any,
        )

    chaos = chaos_phase("chaos")
    stats = [chaos.stats]
    # While the operators are still starting runs (they start RUNS in about 20 s).
    freeze_at = random.Random(f"{seed}:freeze").uniform(5.0, 12.0)
    frozen: list[str] = []
    began = time.monotonic()
    chaos.start()
    for person in people:
        person.start()
    try:
        while time.monotonic() - began < MAX_CHAOS_SECONDS and chaos.error is None:
            if any(p.error for p in people):
                break
            with record.lock:
                started = len(record.runs)
            if started >= RUNS and time.monotonic() - began >= MIN_CHAOS_SECONDS:
                break
            if not frozen and time.monotonic() - began >= freeze_at:
                chaos.stop()  # resumes what it paused
                if chaos.error is not None:
                    break
                frozen = _host_freeze(fleet, people, hold, watch, record)
                chaos = chaos_phase("chaos2")
                stats.append(chaos.stats)
                chaos.start()
            time.sleep(0.5)
    finally:
        chaos.stop()
    chaos_seconds = time.monotonic() - began

    # Quiescence: every process resumed, the supervisor restarts the dead; the operators
    # stop, the approvers approve what still waits, until every run has ended.
    fleet.resume_everything()
    fleet.ensure_full()
    for person in people[:2]:
        person.stop.set()
    for person in people[:2]:
        person.join(timeout=60)
    # A start whose request got no answer may have started a run nobody was told of: the
    # record takes such runs from the database (at most one per start without an answer)
    # and every check below covers them.
    started = Run.objects.filter(
        Q(principal_ref__endswith="drill-op-web") | Q(principal_ref__endswith="drill-op-api")
    ).values_list("pk", flat=True)
    untold = {str(pk) for pk in started} - record.runs
    if len(untold) > record.unknown_starts:
        record.problems.append(
            f"{len(untold)} runs started that nobody was told of, after"
            f" {record.unknown_starts} starts without an answer: {sorted(untold)}"
        )
    record.runs |= untold
    deciding_all.set()
    drain_began = time.monotonic()
    while time.monotonic() - drain_began < DRAIN_SECONDS:
        if not Run.objects.filter(pk__in=record.runs).exclude(state__in=TERMINAL).exists():
            break
        time.sleep(0.5)
    for person in people:
        person.stop.set()
    for person in people:
        person.join(timeout=60)
    swept_began = time.monotonic()
    while time.monotonic() - swept_began < SWEEP_SECONDS:
        if not EffectAttempt.objects.filter(
            run_id__in=record.runs, run__state__in=TERMINAL, status__in=SWEPT_BY_NOW
        ).exists():
            break
        time.sleep(0.5)
    time.sleep(2.5)  # two more beats, so a sweep in flight has landed
    drain_seconds = time.monotonic() - drain_began

    problems: list[str] = [f"{p.name} failed: {p.error!r}" for p in people if p.error]
    problems += frozen[1:]
    if chaos.error is not None:
        problems.append(f"the chaos thread failed: {chaos.error!r}")
    problems += record.problems
    silent = fleet.sweeper_silent_since_beat_killed()
    problems += [silent] if silent else []
    runs = {str(r.pk): r for r in Run.objects.filter(pk__in=record.runs)}
    pending = {
        str(c.run_id): c.pk
        for c in Checkpoint.objects.filter(run_id__in=runs, status=Checkpoint.Status.PENDING)
    }

    # The console and the API, before the fleet stops: every run's page tells its state.
    queue_ids = {c["id"] for c in ap_api.call("GET", "/checkpoints")[2]}
    for run_id, run in sorted(runs.items()):
        page = watch.get(f"/runs/{run_id}/")
        shown = LIVE_STATE.search(page.body)
        said = (shown.group(1), int(shown.group(2))) if shown else None
        if page.status != 200 or said != (run.state, run.revision):
            problems.append(
                f"run {run_id}: page {page.status} shows {said}, the database"
                f" {(run.state, run.revision)}"
            )
        if run.state in TERMINAL and 'id="run-stalled"' in page.body:
            problems.append(f"run {run_id}: ended {run.state}, its page says it is not moving")
        api_state = _api_run_state(watch_api, run_id)
        if api_state != run.state:
            problems.append(f"run {run_id}: the API says {api_state}, the database {run.state}")
        if run.state not in TERMINAL:
            waiting = run.state == "WAITING_HUMAN" and pending.get(run_id) in queue_ids
            if not waiting:
                problems.append(f"run {run_id} did not end and waits for nobody: {run.state}")
    recovery = watch.get("/recovery/")
    if recovery.status != 200:
        problems.append(f"recovery page: HTTP {recovery.status}")
    stalled = recovery.body.split('id="stalled-h"', 1)[-1].split('id="unknown-h"', 1)[0]
    problems += [
        f"run {r}: listed as not moving on the recovery page after quiescence"
        for r in runs
        if f"/runs/{r}/" in stalled
    ]
    ledger = list(LedgerEntry.objects.filter(run_id__in=list(runs)))
    for attempt in EffectAttempt.objects.filter(run_id__in=list(runs)):
        lookup = watch.get(f"/recovery/?q={attempt.idempotency_key}")
        effect = next((e for e in ledger if e.idempotency_key == attempt.idempotency_key), None)
        if lookup.status != 200 or (effect is not None and effect.effect_id not in lookup.body):
            problems.append(
                f"run {attempt.run_id}: recovery lookup of {attempt.idempotency_key[:12]}"
                f" answered {lookup.status}"
                + ("" if effect is None else f", effect {effect.effect_id} shown: no")
            )
    fleet.shutdown()

    # The record, the ledger and what people were told.
    per_run = Counter(e.run_id for e in ledger)
    events = list(Event.objects.filter(run_id__in=list(runs)).values_list("run_id", "type", "refs"))
    attempts = dict(
        EffectAttempt.objects.filter(run_id__in=list(runs)).values_list("idempotency_key", "status")
    )
    granted = Counter(str(r) for r, t, _ in events if t == EventType.APPROVAL_GRANTED)
    took_effect: Counter[str] = Counter()  # writes without an answer that were done
    kinds: Counter[str] = Counter(t for _, t, _ in events)
    for run_id, run in runs.items():
        n = per_run[run_id]
        if n > 1:
            problems.append(f"run {run_id}: {n} ledger reservations")
        if run.state == "COMPLETED" and n != 1:
            problems.append(f"run {run_id}: COMPLETED with {n} ledger reservations")
        if n and not granted[run_id]:
            problems.append(f"run {run_id}: a reservation without an approval granted")
        for entry in (e for e in ledger if e.run_id == run_id):
            # Cancelled or not, a reservation is one an attempt passed its last
            # cancellation check for (SENDING): a run cancelled before had none.
            sent = attempts.get(entry.idempotency_key)
            if sent is None or sent in effects.NO_EFFECT or sent == effects.S.DISPATCH_RECORDED:
                problems.append(
                    f"run {run_id}: reservation {entry.effect_id}, its attempt is {sent}"
                )
        problems += [f"run {run_id}: {v}" for v in effect_violations(run)]
        cancelled = sum(
            1 for r, t, _ in events if str(r) == run_id and t == EventType.RUN_CANCELLED
        )
        # A cancel that got no answer may or may not have taken effect.
        told, maybe = record.told_cancelled[run_id], record.maybe_cancelled[run_id]
        took_effect["cancels"] += max(0, min(cancelled - told, maybe))
        if not told <= cancelled <= told + maybe or cancelled > 1:
            problems.append(
                f"run {run_id}: told cancelled {told} time(s) ({maybe} without an answer),"
                f" {cancelled} run.cancelled event(s), now {run.state}"
            )
    # What the console and the API showed during the chaos was the run at that revision
    # (the state its events fold to), and a run shown as not moving was one that moves by
    # itself: never one waiting for a person or ended.
    history: dict[str, list[tuple[int, str]]] = {}
    for run_id, sequence, next_state in (
        Event.objects.filter(run_id__in=list(runs))
        .order_by("run_id", "sequence")
        .values_list("run_id", "sequence", "next_state")
    ):
        history.setdefault(str(run_id), []).append((sequence, next_state))
    for run_id, state, revision, where in record.seen:
        folded = "CREATED"  # a run before its first event
        for sequence, next_state in history.get(run_id, []):
            if sequence > revision:
                break
            folded = next_state or folded
        if folded != state:
            problems.append(
                f"run {run_id}: the {where} showed {state} at revision {revision},"
                f" the record holds {folded} there"
            )
        if where.endswith("+stalled") and (state in TERMINAL or state == "WAITING_HUMAN"):
            problems.append(f"run {run_id}: the page called it not moving while {state}")
    decided = Counter(
        (t, refs.get("checkpoint"))
        for _, t, refs in events
        if t in (EventType.APPROVAL_GRANTED, EventType.APPROVAL_DECLINED)
    )
    # An approval answered "done" counted towards the quorum, or met it.
    decided += Counter(
        (EventType.APPROVAL_GRANTED, refs.get("checkpoint"))
        for _, t, refs in events
        if t == EventType.APPROVAL_COUNTED
    )
    # A decision that got no answer may or may not have been recorded.
    for choice, told_done_n, kind in (
        ("approve", record.told_approved, EventType.APPROVAL_GRANTED),
        ("decline", record.told_declined, EventType.APPROVAL_DECLINED),
    ):
        cut = {cp: n for (c, cp), n in record.maybe_decided.items() if c == choice}
        for checkpoint in sorted(told_done_n.keys() | cut.keys()):
            n, maybe = told_done_n[checkpoint], cut.get(checkpoint, 0)
            took_effect["decisions"] += max(0, min(decided[(kind, checkpoint)] - n, maybe))
            if not n <= decided[(kind, checkpoint)] <= n + maybe:
                problems.append(
                    f"checkpoint {checkpoint}: told {kind} {n} time(s) ({maybe} without an"
                    f" answer), {decided[(kind, checkpoint)]} event(s)"
                )
    for key, started in record.keys.items():
        if len(started) != 1:
            problems.append(f"Idempotency-Key {key} started {len(started)} runs")
    stock_after = dict(live_slots.values_list("slot_id", "available"))
    reserved: Counter[str] = Counter()
    for entry in ledger:
        reserved[entry.slot_id] += entry.quantity
    problems += [
        f"slot {slot}: {before - stock_after[slot]} units taken, {reserved[slot]} in the ledger"
        for slot, before in stock_before.items()
        if before - stock_after[slot] != reserved[slot]
    ]
    replay = subprocess.run(
        [sys.executable, "manage.py", "replay", *runs],
        cwd=ROOT,
        env={**os.environ, **fleet.env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if replay.returncode != 0:
        problems.append(f"manage.py replay exited {replay.returncode}: {replay.stderr[-1500:]}")
        problems += [line for line in replay.stdout.splitlines() if "FINDING" in line]
    web_log = web.log()
    if "Traceback" in web_log:
        problems.append(f"the web process logged a traceback: {web_log[-3000:]}")

    s = ChaosStats(
        **{k: sum(getattr(x, k) for x in stats) for k in vars(stats[0])}  # both halves
    )
    summary = "\n".join(
        [
            f"drill summary: seed {seed}; chaos {chaos_seconds:.1f} s, drain"
            f" {drain_seconds:.1f} s, total {time.monotonic() - web_start:.1f} s",
            f"  faults: {s.child_kills} child kills, {s.parent_kills} parent kills"
            f" ({s.restarts} restarts with beat's), {s.pauses} pauses ({s.worker_pauses} whole"
            f" workers), {s.busy_targets} aimed at a lease holder; {s.beat_kills} beat kills,"
            f" {s.web_kills} web worker kills; quorum {quorum}",
            f"  outcome unknown (no answer, not retried): {record.unknown_starts} starts,"
            f" {sum(record.maybe_cancelled.values())} cancels,"
            f" {sum(record.maybe_decided.values())} decisions; done all the same:"
            f" {len(untold)} starts (runs learnt from the database),"
            f" {took_effect['cancels']} cancels, {took_effect['decisions']} decisions",
            f"  host freeze: {frozen[0] if frozen else 'none'}",
            f"  runs {len(runs)}: "
            + ", ".join(
                f"{k} {n}" for k, n in sorted(Counter(r.state for r in runs.values()).items())
            )
            + f"; ledger reservations {len(ledger)}"
            + f" ({sum(1 for e in ledger if runs[e.run_id].state == 'CANCELLED')}"
            " of cancelled runs, cancelled after sending)",
            f"  events: recovered {kinds[EventType.RUN_RECOVERED]}, granted"
            f" {kinds[EventType.APPROVAL_GRANTED]}, declined {kinds[EventType.APPROVAL_DECLINED]},"
            f" cancelled {kinds[EventType.RUN_CANCELLED]}",
            "  http: " + ", ".join(f"{k} x{n}" for k, n in sorted(record.statuses.items())),
            f"  watched: {len(record.seen)} views of runs during the chaos"
            f" ({sum('+stalled' in w for *_, w in record.seen)} said not moving)",
            f"  problems: {len(problems)}",
        ]
    )
    with capsys.disabled():
        print(summary)
    if problems:
        pytest.fail(f"seed {seed}:\n" + "\n".join(problems[:60]) + f"\n\n{summary}", pytrace=False)
    # The drill must have bitten, or it proves nothing.
    assert s.child_kills + s.parent_kills > 0 and s.pauses > 0, summary
    assert s.beat_kills > 0 and s.web_kills > 0, summary
    assert kinds[EventType.APPROVAL_GRANTED] > 0 and ledger, summary
