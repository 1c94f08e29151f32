"""Hot statements (fieldops/sql.py, runs/rows.py) give exactly what the ORM gives, on both
databases, and stay visible to query logging."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from fieldops.sql import Loader, Statement, param
from runs import evidence, rows
from runs.engine import ownership
from runs.models import Evidence, Run
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db(transaction=True)


def same_fields(a: Model, b: Model) -> None:
    for field in type(a)._meta.concrete_fields:
        assert getattr(a, field.attname) == getattr(b, field.attname), field.attname


def test_it_loads_a_run_row_equal_to_the_orm_row(world: None, approver: Any) -> None:
    run = make_run()
    approve(run, approver)  # counters, hashes, JSON columns, datetimes all set
    loaded = rows.run_row(run.pk)
    assert loaded is not None
    same_fields(loaded, Run.objects.get(pk=run.pk))
    assert loaded._state.adding is False and loaded._state.db == connection.alias
    assert rows.run_position(run.pk) == (loaded.revision, loaded.owner_epoch)
    assert rows.run_state(str(run.pk)) == loaded.state


def test_it_answers_none_for_a_missing_run(world: None) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    assert rows.run_row(missing) is None
    assert rows.run_position(missing) is None
    assert rows.run_state(missing) is None


def test_stored_evidence_reads_back_as_the_orm_reads_it(world: None) -> None:
    run = make_run(advance=False)
    content = {"b": [1, 2.5, "é"], "a": {"nested": True, "none": None}}
    evidence_id = evidence.store(run_id=str(run.pk), kind="observation", content=content)
    row = Evidence.objects.get(pk=evidence_id)
    assert row.content == content
    assert row.run_id == run.pk
    assert row.size == len(row_text(content))
    loaded = Loader(Evidence).load(
        Statement(
            f"SELECT {Loader(Evidence).columns} FROM runs_evidence WHERE id = %s"  # noqa: S608
        ).one([evidence_id])
    )
    same_fields(loaded, row)


def row_text(content: dict[str, Any]) -> str:
    from kernel.canonical import canonical_json

    return canonical_json(content)


def test_a_statement_joins_the_callers_transaction_and_raises_djangos_errors(
    world: None,
) -> None:
    run = make_run(advance=False)
    insert = Statement(
        "INSERT INTO runs_outbox (run_id, kind, created_at, attempts) VALUES (%s, %s, %s, 0)"
    )
    created = param(Run._meta.get_field("created_at"), run.created_at)
    with transaction.atomic():
        insert.write([rows.run_pk(run.pk), "probe", created])
        transaction.set_rollback(True)
    count = Statement("SELECT COUNT(*) FROM runs_outbox WHERE kind = %s")
    assert count.one(["probe"]) == (0,)
    unknown_run = rows.run_pk("00000000-0000-4000-8000-000000000000")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert.write([unknown_run, "probe", created])


def test_statements_are_counted_by_query_logging(world: None) -> None:
    run = make_run(advance=False)
    with CaptureQueriesContext(connection) as queries:
        rows.run_position(run.pk)
        rows.run_row(run.pk)
    assert len(queries.captured_queries) == 2
    assert "SELECT revision, owner_epoch FROM runs_run" in queries.captured_queries[0]["sql"]


def test_a_claim_leaves_the_row_it_wrote(world: None) -> None:
    run = make_run(advance=False)
    claim = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(claim, ownership.Claim) and claim.row is not None
    same_fields(claim.row, Run.objects.get(pk=run.pk))
    assert ownership.renew(claim)
    ownership.release(claim)
    after = Run.objects.get(pk=run.pk)
    assert (after.lease_owner, after.lease_expires_at) == ("", None)
    assert after.owner_epoch == claim.epoch


@pytest.mark.postgres
def test_a_connection_keeps_every_statement_of_a_run_prepared(world: None, approver: Any) -> None:
    """A reservation run's statements all stay prepared on the worker's connection (psycopg's
    default of 100 would start deallocating and re-preparing once sweeps and bulk
    operations add theirs)."""
    from fieldops.sql import PREPARED_MAX, binding_cursor

    approve(make_run(), approver)
    assert connection.connection.prepared_max == PREPARED_MAX
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        prepared = cursor.fetchone()[0]
    assert 0 < prepared <= PREPARED_MAX
    assert binding_cursor(connection).connection is connection.connection


# -- execute_alone: the authority's statement straight through libpq --------------------
def _own_prepared() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'fieldops_%%'")
        return {name for (name,) in cursor.fetchall()}


def _append(run: Run, epoch: int) -> Any:
    from runs import authority
    from runs.domain.states import Actor, EventType

    return authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=epoch,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="contract_valid",
        refs={"observation": "rq-execute-alone"},
        run=run,
    )


@pytest.mark.postgres
def test_an_append_alone_in_autocommit_goes_through_libpq(
    world: None,
) -> None:
    run = make_run(advance=False)
    claim = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(claim, ownership.Claim)
    connection.ensure_connection()
    connection.connection.execute("DEALLOCATE ALL")
    result = _append(claim.row, claim.epoch)
    assert result.applied, result.refusal
    assert len(_own_prepared()) == 1
    assert Run.objects.get(pk=run.pk).revision == run.revision + 1
    assert (
        list(Run.objects.get(pk=run.pk).events.order_by("sequence").values_list("type", flat=True))[
            -1
        ]
        == "run.started"
    )
    again = _append(claim.row, claim.epoch)  # a second start is refused, and recorded
    assert not again.applied and again.control is not None
    assert len(_own_prepared()) == 2


@pytest.mark.postgres
def test_a_statement_deallocated_behind_its_back_is_prepared_again(world: None) -> None:
    from fieldops.sql import execute_alone

    connection.ensure_connection()
    select = "SELECT 1 WHERE %s::text IS NOT NULL"
    with connection.wrap_database_errors:
        assert execute_alone(connection, select, ["x"]) == 1
        # psycopg sends DEALLOCATE ALL after a rollback, when it holds prepared statements.
        connection.connection.execute("DEALLOCATE ALL")
        assert _own_prepared() == set()
        assert execute_alone(connection, select, ["x"]) == 1
    assert len(_own_prepared()) == 1


@pytest.mark.postgres
def test_execute_alone_stands_aside_where_the_cursor_must_run_the_statement(
    world: None,
) -> None:
    from fieldops.sql import execute_alone

    connection.ensure_connection()
    select = "SELECT 1 WHERE %s::text IS NOT NULL"
    with connection.wrap_database_errors:
        assert execute_alone(connection, select, ["x"]) == 1
        assert execute_alone(connection, select, [1.5]) is None  # a type it does not encode
        assert execute_alone(connection, select, [dt.datetime(2026, 1, 1)]) is None  # naive
        # libpq would cut a text at its NUL: the cursor refuses it instead.
        assert execute_alone(connection, select, ["a\x00b"]) is None
        with transaction.atomic():
            Run.objects.exists()  # the transaction is open on the server
            assert execute_alone(connection, select, ["x"]) is None
        with CaptureQueriesContext(connection):  # someone counts statements
            assert execute_alone(connection, select, ["x"]) is None


@pytest.mark.postgres
def test_execute_alone_raises_djangos_errors_and_changes_nothing(world: None) -> None:
    from fieldops.sql import execute_alone

    run = make_run(advance=False)
    insert = "INSERT INTO runs_outbox (run_id, kind, created_at, attempts) VALUES (%s, %s, %s, 0)"
    connection.ensure_connection()
    unknown_run = uuid.UUID("00000000-0000-4000-8000-000000000000")
    with pytest.raises(IntegrityError), connection.wrap_database_errors:
        execute_alone(connection, insert, [unknown_run, "probe", run.created_at])
    with connection.wrap_database_errors:
        assert execute_alone(connection, insert, [run.pk, "probe", run.created_at]) == 1
    assert Statement("SELECT COUNT(*) FROM runs_outbox WHERE kind = %s").one(["probe"]) == (1,)


def test_placeholders_become_numbered_and_literal_percent_signs_are_refused() -> None:
    from fieldops.sql import _native

    name, text = _native("UPDATE t SET a = %s::jsonb WHERE id = %s AND b = %s")
    assert text == b"UPDATE t SET a = $1::jsonb WHERE id = $2 AND b = $3"
    assert name.startswith(b"fieldops_")
    with pytest.raises(ValueError):
        _native("SELECT 1 WHERE a LIKE 'x%%'")


@pytest.mark.postgres
def test_a_connection_the_server_ended_is_django_s_operational_error(world: None) -> None:
    import psycopg
    from django.db import OperationalError

    from fieldops.sql import execute_alone
    from tests.deploy.servers import shared_database_url

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(shared_database_url(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(OperationalError), connection.wrap_database_errors:
        execute_alone(connection, "SELECT 1 WHERE %s::text IS NOT NULL", ["x"])
    assert not connection.is_usable()
    connection.close()
