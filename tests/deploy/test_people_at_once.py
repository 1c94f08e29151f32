"""Several people act on one run at the same moment, on the PostgreSQL + Redis + Celery
deployment (README): gunicorn started with ``-c gunicorn.conf.py`` and three workers, a
Celery worker process advancing the runs, every person in their own session over real
HTTP (browsers with their CSRF token, API clients with their bearer token).

Each conflict has one recorded outcome; every loser hears why with the right status (a
browser a 409 page, an API client a JSON 409, never a 500 or an HTML page), and the run's
record folds again without findings (audit replay).
"""

from __future__ import annotations

import http.client
import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from api.tokens import token_create
from approvals.models import Checkpoint
from catalog.models import CapabilityVersion, TenantEffectGate
from runs.domain.states import is_terminal
from runs.models import Event, Run
from runs.replay.audit import audit_replay
from sim.world.models import LedgerEntry
from tests.conftest import make_user, require_service
from tests.deploy.conftest import broker_at
from tests.deploy.servers import (
    REDIS_URL,
    ROOT,
    TLS_PROXY,
    Browser,
    NoAnswer,
    Response,
    WebProcess,
    Writes,
    no_answer,
    run_id_of,
    shared_database_url,
)
from tests.durable.conftest import Cluster, redis_up
from tests.helpers import make_run, together

pytestmark = pytest.mark.postgres

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
SEEN_HASH = re.compile(r'name="seen_hash" value="([0-9a-f]{64})"')


def _web(env: dict[str, str], log: Path) -> WebProcess:
    """The web process as the README starts it, with three workers: people's requests are
    served by different processes at the same moment."""
    argv = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py")]
    argv += ["fieldops.wsgi:application", "--bind", "127.0.0.1:{port}", "--workers", "3"]
    environment = {"DATABASE_URL": shared_database_url(), "FIELDOPS_LOG_LEVEL": "WARNING"}
    return WebProcess(argv, {**environment, **env}, log)


class ApiClient:
    """An integration with its own bearer token."""

    def __init__(
        self,
        base_url: str,
        user: Any,
        *,
        behind_tls_proxy: bool = False,
        writes: Writes | None = None,
    ) -> None:
        self.base_url = base_url
        self.writes = writes or Writes()  # as Browser's
        self.headers = dict(TLS_PROXY) if behind_tls_proxy else {}  # as Browser's
        _, self.secret = token_create(user=user, name=f"integration of {user.username}")

    def call(
        self, method: str, path: str, body: Any = None, *, key: str = ""
    ) -> tuple[int, str, Any]:
        """(status, content type, parsed JSON or the text when it is not JSON); ``key``:
        the request's Idempotency-Key."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + "/api/v1" + path, data, method=method)
        request.add_header("Authorization", f"Bearer {self.secret}")
        for name, value in self.headers.items():
            request.add_header(name, value)
        if key:
            request.add_header("Idempotency-Key", key)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with self.writes.under_way(request), urllib.request.urlopen(request, timeout=60) as r:
                status, kind, text = r.status, r.headers["Content-Type"], r.read().decode()
        except urllib.error.HTTPError as r:
            status, kind, text = r.code, r.headers["Content-Type"], r.read().decode()
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
            if no_answer(exc):
                raise NoAnswer(f"{method} {path}: {exc!r}") from exc
            raise
        kind = kind.split(";")[0]
        return status, kind, json.loads(text) if kind == "application/json" else text


def _said(answer: Response | tuple[int, str, Any] | None) -> Any:
    """An answer in a failure message: a page's status and redirect, the API's JSON."""
    if isinstance(answer, Response):
        return (answer.status, answer.location)
    return answer


def _signed_in(server: WebProcess, username: str) -> Browser:
    browser = Browser(server.url)
    browser.login(username, "pw-" + username)
    return browser


@pytest.fixture
def held_row() -> Iterator[Callable[[Run], None]]:
    """Another transaction that locks a run's row and then does nothing (a stalled
    worker): what the web process meets is the run being busy."""
    db = connection.settings_dict
    holder = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"],
        dbname=db["NAME"],
    )

    def lock(run: Run) -> None:
        holder.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [run.pk])

    try:
        yield lock
    finally:
        holder.rollback()
        holder.close()


def test_a_busy_run_is_cancelled_by_no_one_and_both_hear_it_is_busy(
    transactional_db: Any, world: None, tmp_path: Path, held_row: Callable[[Run], None]
) -> None:
    """An operator's browser and an integration cancel a run another transaction holds:
    nothing is written, and both hear that the run is busy and to try again. The API
    used to answer "The run is WAITING_HUMAN and cannot be cancelled now." under the code
    ``busy``: a client reading the message gave up on a run it could cancel a moment
    later."""
    make_user("operator", "north", "operator")
    integration = make_user("operator-2", "north", "operator")
    run = make_run(namespace="live", principal="user:operator")
    assert run.state == "WAITING_HUMAN"
    revision = run.revision
    # Nothing runs on commit; a lock wait gives up after 300 ms (the default 5 s is slow).
    env = {"FIELDOPS_EXECUTION": "deferred", "FIELDOPS_LOCK_TIMEOUT_MS": "300"}
    server = _web(env, tmp_path / "web.log")
    server.start(timeout=40)
    try:
        browser, api = _signed_in(server, "operator"), ApiClient(server.url, integration)
        held_row(run)
        page, (status, kind, body) = together(
            lambda: browser.post(f"/runs/{run.pk}/cancel/", {"reason": "duplicate"}),
            lambda: api.call("POST", f"/runs/{run.pk}/cancel", {"reason": "duplicate"}),
        )
        assert page.status == 409 and "The run is busy" in page.body, page.body
        assert (status, kind, body["code"]) == (409, "application/json", "busy"), body
        assert "busy" in body["message"] and "try again" in body["message"].lower(), body
        assert "cannot be cancelled" not in body["message"], body
        run.refresh_from_db()
        assert (run.state, run.revision) == ("WAITING_HUMAN", revision)
        assert not Event.objects.filter(run=run, type="run.cancelled").exists()
    finally:
        server.stop()
    assert "Traceback" not in server.log()


@pytest.fixture
def deployment(
    transactional_db: Any, world: None, tmp_path: Path, queue_name: str
) -> Iterator[WebProcess]:
    """gunicorn (three workers) and a Celery worker process (two children) on this test's
    database, queue and Redis database, as the README's PostgreSQL + Redis + Celery
    section runs them."""
    require_service("Redis", redis_up(), f"Celery needs its broker at {REDIS_URL}")
    cluster = Cluster(
        queue=queue_name,
        database_url=shared_database_url(),
        drill_dir=str(tmp_path / "drills"),
        log_dir=tmp_path,
    )
    env = {"FIELDOPS_EXECUTION": "celery", "CELERY_BROKER_URL": REDIS_URL}
    server = _web({**env, "FIELDOPS_QUEUE": queue_name}, tmp_path / "web.log")
    with broker_at(REDIS_URL, queue_name):  # the worker's readiness ping goes there
        try:
            cluster.start_worker(concurrency=2)
            server.start(timeout=40)
            yield server
        finally:
            server.stop()
            cluster.stop_all()
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    assert "Traceback" not in logs, logs[-4000:]


def _settled(run_id: str, timeout: float = 60) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if is_terminal(run.state):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} is still {run.state} after {timeout}s")


def _waiting_checkpoint(api: ApiClient, run_id: str, timeout: float = 60) -> str:
    """The checkpoint the run waits at, as an integration polls for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _, body = api.call("GET", f"/runs/{run_id}")
        assert status == 200, body
        if body["waiting_checkpoint"]:
            return str(body["waiting_checkpoint"])
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} reached no checkpoint in {timeout}s")


@dataclass
class People:
    """Who acts: an operator and two approvers in browsers, an operator's and an
    approver's integration through the API."""

    operator: Browser
    approver: Browser
    lead: Browser
    operator_api: ApiClient
    approver_api: ApiClient


def _one_round(people: People, round_: int, *, cancelling: bool) -> None:
    """Start a run, wait for its checkpoint, then everyone acts at once; check what each
    was told against the run's record."""
    run_id = run_id_of(people.operator.post("/runs/start/", START_FORM))
    cp = _waiting_checkpoint(people.approver_api, run_id)
    pages = [b.get(f"/approvals/{cp}/").body for b in (people.approver, people.lead)]
    hashes = [found.group(1) for page in pages if (found := SEEN_HASH.search(page))]
    assert len(hashes) == 2, f"round {round_}: the approval page offers no decision"
    status, _, checkpoint = people.approver_api.call("GET", f"/checkpoints/{cp}")
    assert status == 200 and checkpoint["quorum"] == 2, checkpoint

    def web_approve(browser: Browser, seen: str) -> Callable[[], Response]:
        data = {"verdict": "approve", "seen_hash": seen, "reason": "matches the manual"}
        return lambda: browser.post(f"/approvals/{cp}/decide/", data)

    decision = {"verdict": "approve", "seen_hash": checkpoint["proposal_hash"], "reason": "ok"}
    cancels = [
        lambda: people.operator.post(f"/runs/{run_id}/cancel/", {"reason": "duplicate"}),
        lambda: people.operator_api.call("POST", f"/runs/{run_id}/cancel", {"reason": "later"}),
    ]
    answers = together(
        web_approve(people.approver, hashes[0]),
        web_approve(people.lead, hashes[1]),
        lambda: people.approver_api.call("POST", f"/checkpoints/{cp}/decision", decision),
        *(cancels if cancelling else []),
    )
    answers += [] if cancelling else [None, None]
    what = f"round {round_}: {[_said(a) for a in answers]}"
    for page in (answers[0], answers[1], answers[3]):
        if page is not None:
            assert page.status == 302 or (page.status == 409 and "409 · Conflict" in page.body), (
                what
            )
    for answer in (answers[2], answers[4]):
        if answer is not None:
            status, kind, body = answer
            assert status in (200, 409) and kind == "application/json", what
            if status == 409:
                assert body["code"] and body["message"], what
            if body.get("code") == "busy":
                assert "try again" in body["message"].lower(), what

    run = _settled(run_id)
    types = [e.type for e in Event.objects.filter(run_id=run_id).order_by("sequence")]
    what += f" -> {run.state} {types[-6:]}"
    approved = [answers[0].status == 302, answers[1].status == 302, answers[2][0] == 200]
    cancelled = [answers[3] is not None and answers[3].status == 302]
    cancelled += [answers[4] is not None and answers[4][0] == 200]
    votes = types.count("approval.counted") + types.count("approval.granted")
    assert votes == sum(approved) <= 2, what
    assert types.count("approval.granted") == (sum(approved) == 2), what
    assert types.count("run.cancelled") == sum(cancelled) <= 1, what
    assert types.count("effect.recorded") <= 1, what
    assert LedgerEntry.objects.filter(run_id=run_id).count() <= 1, what
    if not cancelling:  # two approvals counted, the third refused: one effect
        assert sum(approved) == 2 and run.state == "COMPLETED", what
        assert types.count("effect.recorded") == 1, what
    else:  # a cancellation that lost met a run that had completed
        assert run.state == ("CANCELLED" if sum(cancelled) else "COMPLETED"), what
    assert Checkpoint.objects.get(pk=cp).status != Checkpoint.Status.PENDING, what
    _, findings = audit_replay(run)
    assert not findings, (what, findings)


def test_approvers_and_operators_acting_on_one_run_at_once_leave_one_outcome(
    deployment: WebProcess,
) -> None:
    """A quorum of two. Even rounds: three approvers approve at the same moment (two in
    browsers, one through the API) while two operators cancel the run (a browser, the
    API). Odd rounds: the three approvers race for the quorum's two places. The record
    holds exactly the answers that said "done": two approvals at most and the grant only
    with two, one cancellation at most, one effect at most; everyone else got a 409 with
    the reason (JSON for the API), nobody a 500; the run folds without findings.

    Checked able to fail: with the counted approval's compare-and-set made against a
    fresh read of the revision (a lost update), an odd round counts three approvals."""
    call_command("approvals_policy", "--tenant", "north", "--name", "two", "--quorum", "2")
    for name, roles in {
        "operator": ("operator",),
        "operator-2": ("operator",),
        "approver": ("approver",),
        "approver-2": ("approver",),
        "lead": ("operator", "approver"),
    }.items():
        make_user(name, "north", *roles)
    users = {u.username: u for u in get_user_model().objects.all()}
    people = People(
        operator=_signed_in(deployment, "operator"),
        approver=_signed_in(deployment, "approver"),
        lead=_signed_in(deployment, "lead"),
        operator_api=ApiClient(deployment.url, users["operator-2"]),
        approver_api=ApiClient(deployment.url, users["approver-2"]),
    )
    for round_ in range(6):
        _one_round(people, round_, cancelling=round_ % 2 == 0)


@pytest.fixture
def held_version() -> Iterator[Callable[[CapabilityVersion], None]]:
    """Another transaction that reads a catalog version FOR SHARE, as a worker's send gate
    does before it dispatches, and then stalls there."""
    db = connection.settings_dict
    holder = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"],
        dbname=db["NAME"],
    )

    def lock(version: CapabilityVersion) -> None:
        sql = "SELECT 1 FROM catalog_capabilityversion WHERE id = %s FOR SHARE"
        holder.execute(sql, [version.pk])

    try:
        yield lock
    finally:
        holder.rollback()
        holder.close()


def test_closing_a_gate_a_stalled_dispatch_holds_says_busy_not_database_unreachable(
    transactional_db: Any,
    world: None,
    tmp_path: Path,
    held_version: Callable[[CapabilityVersion], None],
) -> None:
    """A catalog admin closes the deployment gate, and an operator on call their tenant's
    gate, of the version a stalled dispatch holds. Each change waits for the dispatch (the
    lock that keeps a send and a gate change apart) and gives up after lock_timeout:
    nothing is written. Both were told "503 · The database is unreachable ... it may or
    may not have been recorded", though the database answered and nothing was recorded;
    they hear a 409 that says what held them, and the gates stay open."""
    make_user("catalog-admin", "north", "catalog-admin")
    make_user("operator", "north", "operator")
    version = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    env = {"FIELDOPS_EXECUTION": "deferred", "FIELDOPS_LOCK_TIMEOUT_MS": "300"}
    server = _web(env, tmp_path / "web.log")
    server.start(timeout=40)
    try:
        admin, operator = _signed_in(server, "catalog-admin"), _signed_in(server, "operator")
        tenant_gate = {"capability_id": "reserve_part", "version": "1.0.0"}
        held_version(version)
        pages = together(
            lambda: admin.post(
                f"/catalog/versions/{version.pk}/gate/", {"open": "0", "reason": "outage"}
            ),
            lambda: operator.post(
                "/runbooks/repeated-reservation-attempts/gate/",
                {**tenant_gate, "open": "0", "reason": "outage"},
            ),
        )
        for page in pages:
            assert page.status == 409, (page.status, page.body[:600])
            assert "busy" in page.body and "was not written" in page.body, page.body
            assert "unreachable" not in page.body and page.headers.get("retry-after")
        version.refresh_from_db()
        assert version.effect_gate_open
        assert not TenantEffectGate.objects.filter(version=version, open=False).exists()
    finally:
        server.stop()
    assert "Traceback" not in server.log()


def test_a_retried_start_whose_first_request_stalls_is_told_busy_not_database_lost(
    transactional_db: Any, world: None, tmp_path: Path
) -> None:
    """An integration retries a start with its Idempotency-Key while the first request's
    transaction, which holds that key, stalls before committing. The retry waits for the
    key (one run per key) and gives up after lock_timeout, writing nothing. It was told
    503 ``database_unavailable`` ("the connection to the database was lost ... may or may
    not have taken effect"); it is told 409 ``busy``, to try again in a few seconds, and
    the same key then starts the run (the stalled request rolled back)."""
    operator = make_user("operator", "north", "operator")
    other_run = make_run(namespace="live", principal="user:operator", advance=False)
    env = {"FIELDOPS_EXECUTION": "deferred", "FIELDOPS_LOCK_TIMEOUT_MS": "300"}
    server = _web(env, tmp_path / "web.log")
    server.start(timeout=40)
    db = connection.settings_dict
    stalled = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"],
        dbname=db["NAME"],
    )
    try:
        api = ApiClient(server.url, operator)
        # The first request, stalled inside its transaction after it wrote the key.
        stalled.execute(
            "INSERT INTO runs_runstartkey (tenant, principal_ref, key, request_digest, run_id,"
            " created_at) VALUES ('north', 'user:operator', 'retry-1', 'x', %s, now())",
            [other_run.pk],
        )
        body = {"scenario": "reservation"}
        status, kind, answer = api.call("POST", "/runs", body, key="retry-1")
        assert (status, kind) == (409, "application/json"), (status, answer)
        assert answer["code"] == "busy" and "try again" in answer["message"].lower(), answer
        assert not Run.objects.filter(start_key__key="retry-1").exists()
        stalled.rollback()
        status, _, answer = api.call("POST", "/runs", body, key="retry-1")
        assert status == 201, answer
    finally:
        stalled.close()
        server.stop()
    assert "Traceback" not in server.log()
