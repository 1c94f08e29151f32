"""An embedded server killed while it advances a run does not leave the run stuck for a
lease: ``make run`` again (or a second server of the same host, sweeping) finds the
run's owner gone and hands the run over at once, through the usual recovery
(``run.recovered``, attempt + 1), long before the lease would have expired. A live
server's lease is never taken, however long the other one sweeps.

Real processes over real HTTP: ``serve_embedded`` as ``make run`` starts it, a run
started from the console by the operator, the server paused right after it claimed the run
(the pause drill, so the test knows it holds the lease) and then SIGKILLed, like an OOM
kill or a closed laptop lid's kill -9. On SQLite (the server's own database) and on
PostgreSQL (the suite's database, shared with the server).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from runs.engine import liveness
from sim.demo import DEMO_PASSWORD
from tests.conftest import require_service
from tests.deploy.servers import ROOT, Browser, WebProcess, shared_database_url

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
# Far longer than the test may take: a run handed over only at its lease's expiry fails it.
LEASE_SECONDS = 300
WITHIN = 60.0

# ``manage.py serve_embedded`` with the crash and pause drills installed first (as a Celery
# pool process installs them: inert unless their variables are set).
SERVE_EMBEDDED = [
    sys.executable,
    "-c",
    "import sys; from sim import crashpoints; crashpoints.install_from_env(); "
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', *sys.argv[1:]])",
    "serve_embedded",
]

pytestmark = pytest.mark.skipif(
    liveness.current() is None, reason="needs /proc (Linux) to tell when a process started"
)


@dataclass
class Database:
    """The database the servers share, read directly (autocommit) by the test."""

    url: str
    vendor: str

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.vendor == "sqlite":
            with sqlite3.connect(self.url.removeprefix("sqlite:///")) as db:
                return db.execute(sql).fetchall()
        with psycopg.connect(self.url, autocommit=True) as db:
            return db.execute(sql).fetchall()  # type: ignore[arg-type]

    def leases(self) -> list[tuple[str, str, Any]]:
        """(run id, lease owner, lease expiry) of every leased run."""
        found = self.rows(
            "SELECT id, lease_owner, lease_expires_at FROM runs_run WHERE lease_owner <> ''"
        )
        return [(str(r[0]).replace("-", ""), r[1], r[2]) for r in found]

    def recoveries(self, run_hex: str) -> list[dict[str, Any]]:
        found = self.rows("SELECT run_id, payload FROM runs_event WHERE type = 'run.recovered'")
        return [
            json.loads(p) if isinstance(p, str) else p
            for r, p in found
            if str(r).replace("-", "") == run_hex
        ]

    def state(self, run_hex: str) -> str:
        found = self.rows("SELECT id, state FROM runs_run")
        return next(s for r, s in found if str(r).replace("-", "") == run_hex)


# The PostgreSQL variant is marked for the database too: pytest-django sets the test
# database up for a marked test before its fixtures run.
POSTGRES = pytest.param(
    "postgres", marks=[pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
)


@pytest.fixture(params=["sqlite", POSTGRES])
def database(request: pytest.FixtureRequest) -> Database:
    """``make run``'s database: SQLite (migrate and seed_demo, as ``make run`` does), or
    the suite's PostgreSQL database seeded the same way."""
    return request.getfixturevalue(f"{request.param}_database")  # type: ignore[no-any-return]


@pytest.fixture
def postgres_database(transactional_db: None) -> Database:
    require_service(
        "PostgreSQL",
        connection.vendor == "postgresql",
        "the servers share the suite's PostgreSQL database",
    )
    from sim.setup import seed

    seed(demo_users=True)
    return Database(shared_database_url(), "postgresql")


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path}/db.sqlite3"
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env={**os.environ, **_env(url, tmp_path)},
            capture_output=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
    return Database(url, "sqlite")


def _env(url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "DATABASE_URL": url,
        "FIELDOPS_VAR_DIR": str(tmp_path),
        "FIELDOPS_EXECUTION": "inprocess",
        "FIELDOPS_LOG_LEVEL": "WARNING",
        "FIELDOPS_LEASE_SECONDS": str(LEASE_SECONDS),
        "FIELDOPS_SWEEP_INTERVAL_SECONDS": "1",
        "FIELDOPS_DRILL_DIR": str(tmp_path / "drills"),
        "DJANGO_SETTINGS_MODULE": "fieldops.settings",
    }


@pytest.fixture
def servers(database: Database, tmp_path: Path) -> Iterator[Callable[..., WebProcess]]:
    """Start ``serve_embedded`` on the shared database (``pause``: the pause drill's
    ``point:seconds``); every server still running is stopped afterwards."""
    started: list[WebProcess] = []

    def start(*, pause: str = "") -> WebProcess:
        env = _env(database.url, tmp_path) | ({"FIELDOPS_PAUSE_AT": pause} if pause else {})
        name = f"server{len(started)}.log"
        server = WebProcess([*SERVE_EMBEDDED, "127.0.0.1:{port}"], env, tmp_path / name)
        started.append(server)
        return server.start(timeout=60)

    yield start
    for server in started:
        server.stop()


def _holding_a_run(server: WebProcess, database: Database) -> tuple[str, str, Any]:
    """The operator starts a run on ``server`` (started with the pause drill after the
    claim): return its lease once ``server`` holds it, paused."""
    operator = Browser(server.url)
    operator.login("operator", DEMO_PASSWORD)
    # The request advances the run in-process and stays paused after the claim: it gets
    # no answer (the server is killed), so it is left to its own thread.
    threading.Thread(
        target=lambda: _ignore_errors(operator.post, "/runs/start/", START_FORM), daemon=True
    ).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        leases = database.leases()
        if leases:
            (lease,) = leases
            owner = liveness.parse(lease[1])
            assert owner is not None and owner.pid == server.process.pid, lease  # type: ignore[union-attr]
            return lease
        time.sleep(0.1)
    raise AssertionError(f"no run was claimed:\n{server.log()}")


def _ignore_errors(call: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(OSError):  # the server was killed under the request
        call(*args)


def _kill(server: WebProcess) -> float:
    assert server.process is not None
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    return time.monotonic()


def _recovered(
    database: Database, run_hex: str, since: float, server: WebProcess
) -> dict[str, Any]:
    while time.monotonic() - since < WITHIN:
        found = database.recoveries(run_hex)
        if found:
            (recovered,) = found
            return recovered
        time.sleep(0.2)
    raise AssertionError(
        f"the run was not handed over within {WITHIN:.0f} s of its owner's death "
        f"(its lease runs {LEASE_SECONDS} s):\n{server.log()}"
    )


def _moves_on(database: Database, run_hex: str) -> None:
    deadline = time.monotonic() + WITHIN
    while database.state(run_hex) != "WAITING_HUMAN":
        assert time.monotonic() < deadline, database.state(run_hex)
        time.sleep(0.2)


def _before(expiry: Any, recovered_at: float) -> bool:
    """Whether the recovery (``recovered_at``, monotonic) came before the lease expiry."""
    if isinstance(expiry, str):  # SQLite stores the timestamp as text
        expiry = dt.datetime.fromisoformat(expiry)
    if expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=dt.UTC)
    wall = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=time.monotonic() - recovered_at)
    return bool(wall < expiry - dt.timedelta(seconds=LEASE_SECONDS / 2))


def test_a_killed_server_started_again_hands_its_run_over_at_once(
    database: Database, servers: Callable[..., WebProcess]
) -> None:
    first = servers(pause="after_claim:600")
    run_hex, owner, expiry = _holding_a_run(first, database)
    killed = _kill(first)
    assert database.leases() == [(run_hex, owner, expiry)]  # the dead server's lease stays

    again = servers()  # make run, again
    recovered = _recovered(database, run_hex, killed, again)
    assert _before(expiry, time.monotonic()), "the run waited its lease out"
    assert recovered["previous_owner"] == owner
    again_pid = again.process.pid  # type: ignore[union-attr]
    assert liveness.parse(recovered["worker"]).pid == again_pid  # type: ignore[union-attr]
    _moves_on(database, run_hex)
    assert " 500 " not in again.log()


def test_a_live_servers_lease_is_never_taken_and_its_death_is_noticed_by_a_sweeper(
    database: Database, servers: Callable[..., WebProcess]
) -> None:
    """Two embedded servers of one host on one database: the second sweeps every second
    while the first, alive but paused, holds a run; it never takes it. Once the first is
    killed, the second's next sweeps hand the run over, without a restart."""
    holder = servers(pause="after_claim:600")
    run_hex, owner, expiry = _holding_a_run(holder, database)
    other = servers()
    time.sleep(5)  # five sweeps of the other server at least
    assert database.leases() == [(run_hex, owner, expiry)]
    assert database.recoveries(run_hex) == []

    killed = _kill(holder)
    recovered = _recovered(database, run_hex, killed, other)
    assert time.monotonic() - killed < 15  # a sweep or a few, not a lease
    assert recovered["previous_owner"] == owner
    other_pid = other.process.pid  # type: ignore[union-attr]
    assert liveness.parse(recovered["worker"]).pid == other_pid  # type: ignore[union-attr]
    _moves_on(database, run_hex)
