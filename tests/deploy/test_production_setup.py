"""docker-compose's ``migrate`` service, step by step as it is written there, on a new
PostgreSQL database with the production settings; then the application role starts a
run. Before ``manage.py seed`` was one of those steps, the production deployment had an
empty catalog and world, and every run start was refused ("no admitted capability
versions to pin")."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.conftest import require_service
from tests.deploy.servers import ROOT
from tests.domain.deploy.test_compose import EXAMPLE, SERVICES, environment, interpolate

pytestmark = pytest.mark.postgres

SERVER = os.environ.get("FIELDOPS_TEST_PG_URL", "postgres://postgres@127.0.0.1:5432/x")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    parts = urlsplit(SERVER)
    return psycopg.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username or "postgres",
        dbname="postgres",
        autocommit=True,
        connect_timeout=3,
    )


@pytest.fixture
def fresh_database() -> Iterator[tuple[str, str]]:
    """A new, empty database and a unique application role (both dropped afterwards)."""
    try:
        admin = _admin()
    except psycopg.OperationalError as exc:
        require_service("PostgreSQL", False, str(exc))
    name = f"fieldops_test_prodsetup_{uuid.uuid4().hex[:8]}"
    role = f"fieldops_app_test_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield name, role
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def _url(user: str, database: str) -> str:
    parts = urlsplit(SERVER)
    return f"postgres://{user}@{parts.hostname}:{parts.port or 5432}/{database}"


def _manage(argv: list[str], database_url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    env.update(EXAMPLE)
    env.update({k: interpolate(v, EXAMPLE) for k, v in environment("migrate").items()})
    env.update(DATABASE_URL=database_url, FIELDOPS_LOG_LEVEL="WARNING", **extra)
    return subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_compose_migrate_service_leaves_a_database_where_runs_start(fresh_database):
    database, role = fresh_database
    owner_url = _url(urlsplit(SERVER).username or "postgres", database)
    steps = re.findall(r"python manage\.py ([^&\"\n]+)", SERVICES["migrate"]["command"])
    assert [s.split()[0] for s in steps] == ["migrate", "seed", "db_roles"]
    for step in steps:
        argv = shlex.split(step.replace("fieldops_app", role))
        if argv[0] == "db_roles":
            argv.append("--create")  # compose's postgres-init.sh creates the real one
        done = _manage(argv, owner_url)
        assert done.returncode == 0, f"{step}: {done.stdout}\n{done.stderr}"
    again = _manage(["seed"], owner_url)  # idempotent: the next deploy runs it again
    assert again.returncode == 0 and "catalog: 0 capability versions stored" in again.stdout

    # seed makes no demo users: the run's principal (start_run's user:operator) is a
    # user the deployment creates, as its people get theirs (start_run refuses nobody).
    user = _manage(
        ["set_user", "operator", "--tenant", "north", "--role", "operator"],
        owner_url,
        FIELDOPS_USER_PASSWORD="a-long-test-password-4821",
    )
    assert user.returncode == 0, user.stderr
    started = _manage(["start_run", "--scenario", "reservation"], _url(role, database))
    assert started.returncode == 0, started.stderr
    outcome = json.loads(started.stderr.strip().splitlines()[-1])
    assert outcome["state"] == "WAITING_HUMAN", outcome
    assert outcome["waiting_checkpoint"]


HEALTH = (
    "import os; from django.test import Client; "
    "token = 'Bearer ' + os.environ['FIELDOPS_OPS_TOKEN']; "
    "r = Client(HTTP_HOST='fieldops.example.com', secure=True, HTTP_AUTHORIZATION=token)"
    ".get('/healthz'); "
    "print(r.status_code, r.content.decode())"
)


def test_healthz_says_the_database_is_unusable_when_the_app_role_was_never_granted(
    fresh_database,
):
    """Migrate and seed as the owner, but no ``db_roles``: the application role can connect
    and read no table, so every sign-in and every run start is a 500 ("permission denied for
    table auth_user"). ``/healthz`` asked only ``SELECT 1`` and answered
    ``"database": {"ok": true}``; it now reads a table the application role is granted."""
    database, role = fresh_database
    owner_url = _url(urlsplit(SERVER).username or "postgres", database)
    for argv in (["migrate", "--noinput"], ["db_roles", "--app-role", role, "--create"]):
        done = _manage(argv, owner_url)
        assert done.returncode == 0, done.stderr
    no_broker = {"FIELDOPS_EXECUTION": "inprocess"}  # the database alone is judged here
    granted = _manage(["shell", "-c", HEALTH], _url(role, database), **no_broker)
    assert granted.stdout.splitlines()[-1].startswith("200 "), granted.stdout + granted.stderr
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
    refused = _manage(["shell", "-c", HEALTH], _url(role, database), **no_broker)
    status, _, body = refused.stdout.strip().splitlines()[-1].partition(" ")
    assert status == "503", refused.stdout + refused.stderr
    report = json.loads(body)
    assert report["database"]["ok"] is False and report["status"] == "unhealthy"
    assert "db_roles" in report["database"]["hint"]


def test_a_command_run_as_a_role_never_granted_the_tables_says_what_to_run(fresh_database):
    """``set_user`` (or any command) as the application role before ``db_roles`` granted it
    the tables printed a 40-line psycopg traceback ("permission denied for table auth_user");
    on a database never migrated, one about a missing relation. Each is now one line naming
    the command that fixes it, with exit status 1 and nothing written."""
    database, role = fresh_database
    owner_url = _url(urlsplit(SERVER).username or "postgres", database)
    password = {"FIELDOPS_USER_PASSWORD": "a-long-enough-pass-phrase-2026"}
    unmigrated = _manage(
        ["set_user", "dana", "--tenant", "north", "--role", "approver"], owner_url, **password
    )
    assert unmigrated.returncode == 1
    assert "Traceback" not in unmigrated.stderr, unmigrated.stderr
    assert "manage.py migrate" in unmigrated.stderr, unmigrated.stderr
    for argv in (["migrate", "--noinput"], ["db_roles", "--app-role", role, "--create"]):
        done = _manage(argv, owner_url)
        assert done.returncode == 0, done.stderr
    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
    refused = _manage(
        ["set_user", "dana", "--tenant", "north", "--role", "approver"],
        _url(role, database),
        **password,
    )
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"db_roles --app-role {role}" in refused.stderr, refused.stderr
    with psycopg.connect(owner_url, autocommit=True) as owner:
        assert owner.execute("SELECT count(*) FROM auth_user").fetchone() == (0,)
