"""The production database roles: the application connects as a role that owns nothing.

The test creates an application role with ``manage.py db_roles``, reconnects Django as
that role, runs a real reservation to completion (the console and engine need nothing
more), and then tries what an attacker holding the application's credentials would: every
UPDATE, DELETE and TRUNCATE of the events, and disabling or dropping the immutability
trigger, is refused by PostgreSQL; the events and the trigger are unchanged afterwards.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.db.utils import DatabaseError

from runs import db_roles
from runs.models import Event
from tests.conftest import make_user
from tests.helpers import approve, make_run

pytestmark = pytest.mark.postgres


@pytest.fixture
def app_role(transactional_db: Any) -> Iterator[str]:
    """A fresh application role (roles are cluster-wide: a unique name, dropped after)."""
    from sim.setup import seed

    seed(demo_users=False)
    name = f"fieldops_app_test_{uuid.uuid4().hex[:10]}"
    call_command("db_roles", app_role=name, create=True, stdout=io.StringIO())
    yield name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP OWNED BY {db_roles.quoted(name)}")  # its grants, this database
        cursor.execute(f"DROP ROLE {db_roles.quoted(name)}")


@contextmanager
def connected_as(role: str) -> Iterator[None]:
    """Django's own connection, reconnected as ``role``; back as the owner afterwards."""
    owner = connection.settings_dict["USER"]
    connection.close()
    connection.settings_dict["USER"] = role
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == role
        yield
    finally:
        connection.close()
        connection.settings_dict["USER"] = owner
        connection.ensure_connection()


def _events_digest() -> str:
    rows = Event.objects.order_by("id").values_list("id", "hash", "reason_code", "payload")
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()


def _trigger_state() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgenabled FROM pg_trigger WHERE tgname = 'runs_event_immutable' "
            "AND tgrelid = 'runs_event'::regclass"
        )
        return str(cursor.fetchone()[0])


REFUSED = [
    ("UPDATE runs_event SET reason_code = 'edited' WHERE id = %(id)s", "permission denied"),
    ("DELETE FROM runs_event WHERE id = %(id)s", "permission denied"),
    ("TRUNCATE runs_event", "permission denied"),
    ("UPDATE runs_capabilityuse SET first_sequence = 0", "permission denied"),
    ("DELETE FROM runs_capabilityuse", "permission denied"),
    ("TRUNCATE runs_event CASCADE", "permission denied"),
    ("ALTER TABLE runs_event DISABLE TRIGGER runs_event_immutable", "must be owner"),
    ("ALTER TABLE runs_event DISABLE TRIGGER ALL", "must be owner"),
    ("DROP TRIGGER runs_event_immutable ON runs_event", "must be owner"),
    ("ALTER TABLE runs_event OWNER TO CURRENT_USER", "must be owner"),
    ("DROP TABLE runs_event", "must be owner"),
    ("CREATE TABLE smuggled (id int)", "permission denied for schema public"),
    (
        "INSERT INTO django_migrations (app, name, applied) VALUES ('runs', 'fake', now())",
        "permission denied",
    ),
]


def test_the_application_role_runs_the_console_but_cannot_alter_the_record(app_role: str):
    operator = make_user("operator", "north", "operator")
    approver = make_user("approver", "north", "approver")
    with connected_as(app_role):
        run = make_run(principal="user:operator", requested_by=operator)
        approve(run, approver)
        assert run.state == "COMPLETED"  # a whole reservation, as the application role
        event = Event.objects.filter(run=run).order_by("sequence").first()
        assert event is not None
        before, trigger = _events_digest(), _trigger_state()
        for statement, refusal in REFUSED:
            with (
                pytest.raises(DatabaseError, match=refusal),
                transaction.atomic(),
                connection.cursor() as cursor,
            ):
                cursor.execute(statement, {"id": event.pk})
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_class WHERE relowner = "
                "(SELECT oid FROM pg_roles WHERE rolname = current_user)"
            )
            assert cursor.fetchone()[0] == 0  # it owns nothing
    assert _events_digest() == before
    assert trigger == "O" and _trigger_state() == "O"  # enabled, as migrations left it


def test_db_roles_prints_the_set_up_without_running_it(transactional_db: Any):
    out = io.StringIO()
    call_command("db_roles", app_role="fieldops_app", print=True, stdout=out)
    script = out.getvalue()
    assert 'CREATE ROLE "fieldops_app" LOGIN NOSUPERUSER' in script
    assert (
        "REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON runs_event, runs_capabilityuse "
        'FROM "fieldops_app"' in script
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = 'fieldops_app'")
        assert cursor.fetchone() is None  # printed, not run


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"app_role": "Robert'); DROP TABLE runs_event;--"}, "role and database names"),
        ({"app_role": "fieldops_nobody_here"}, "does not exist: pass --create"),
    ],
)
def test_db_roles_refuses_bad_input_without_any_change(transactional_db, options, message):
    with pytest.raises(CommandError, match=message):
        call_command("db_roles", stdout=io.StringIO(), **options)
    assert Event.objects.count() == 0 and _trigger_state() == "O"


def test_db_roles_refuses_to_treat_the_owner_as_the_application(transactional_db):
    owner = connection.settings_dict["USER"]
    with pytest.raises(CommandError, match="must not be the owner"):
        call_command("db_roles", app_role=owner, stdout=io.StringIO())
