"""Hot statements (fieldops/sql.py, runs/rows.py) give exactly what the ORM gives, on both
databases, and stay visible to query logging."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from django.db import DataError, IntegrityError, connection, transaction
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


def _prepared_names() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
        return [name for (name,) in cursor.fetchall()]


@pytest.mark.postgres
def test_a_run_s_statements_are_prepared_once_by_fieldops_alone_and_survive_rollbacks(
    world: None, approver: Any
) -> None:
    """Every statement a reservation run prepares is one of fieldops/sql.py's (psycopg
    prepares none, so it never sends its DEALLOCATE ALL after a rollback), and a rolled-back
    transaction leaves them all prepared, the one prepared inside it too: the statements
    sent inside a transaction through libpq can rely on their names."""
    from fieldops.sql import PREPARED_MAX, _native

    approve(make_run(), approver)
    first = _prepared_names()
    assert first and all(name.startswith("fieldops_") for name in first), first
    read = "SELECT revision FROM runs_run WHERE id = %s"
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        Statement(read).one([uuid.uuid4()])
        raise ZeroDivisionError
    approve(make_run(), approver)
    after = _prepared_names()
    assert set(first) <= set(after) and len(after) <= PREPARED_MAX
    assert _native(read, (2950,))[0].decode() in after  # a uuid parameter
    assert all(name.startswith("fieldops_") for name in after), after


@pytest.mark.postgres
def test_a_run_s_terminal_record_is_inserted_by_a_prepared_statement(
    world: None, approver: Any
) -> None:
    """The terminal record's insert (arrays of uuids, ints, JSON texts, bools, datetimes)
    is prepared once like the run's other statements, not parsed at every run's end; the
    record reads back as written."""
    from runs.models import TerminalRecord

    run = make_run()
    approve(run, approver)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements "
            "WHERE name LIKE 'fieldops_%%' AND statement LIKE 'INSERT INTO runs_terminalrecord%%'"
        )
        assert cursor.fetchone() == (1,)
    record = TerminalRecord.objects.get(run=run)
    assert record.disposition == "COMPLETED" and record.evidence_complete is True
    assert record.versions["contract"] == run.contract_version


# -- execute_prepared: statements straight through libpq ---------------------------------
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
    assert _own_prepared()
    assert Run.objects.get(pk=run.pk).revision == run.revision + 1
    assert (
        list(Run.objects.get(pk=run.pk).events.order_by("sequence").values_list("type", flat=True))[
            -1
        ]
        == "run.started"
    )
    again = _append(claim.row, claim.epoch)  # a second start is refused, and recorded
    assert not again.applied and again.control is not None
    assert _own_prepared()


_PROBE = "INSERT INTO runs_outbox (run_id, kind, created_at, attempts) VALUES (%s, %s, %s, 0)"
_PROBES = "SELECT COUNT(*) FROM runs_outbox WHERE kind = %s"


def _probes(kind: str) -> int:
    with connection.cursor() as cursor:  # Django's own cursor, not the path under test
        cursor.execute(_PROBES, [kind])
        return int(cursor.fetchone()[0])


@pytest.mark.postgres
def test_a_statement_deallocated_behind_its_back_is_prepared_again(world: None) -> None:
    from fieldops.sql import execute_prepared

    connection.ensure_connection()
    select = "SELECT 1 WHERE %s::text IS NOT NULL"
    with connection.wrap_database_errors:
        assert execute_prepared(connection, select, ["x"]) == 1
        connection.connection.execute("DEALLOCATE ALL")
        assert _own_prepared() == set()
        assert execute_prepared(connection, select, ["x"]) == 1  # in autocommit: sent again
    assert len(_own_prepared()) == 1


@pytest.mark.postgres
def test_inside_a_transaction_a_deallocated_statement_fails_it_and_the_next_one_recovers(
    world: None,
) -> None:
    """Nothing in FieldOps deallocates; if someone did, the statement fails the transaction
    it is in (it cannot be sent again there) with Django's error, and the connection's
    next statement is prepared again."""
    from django.db import ProgrammingError

    from fieldops.sql import execute_prepared

    connection.ensure_connection()
    select = "SELECT 1 WHERE %s::text IS NOT NULL"
    with connection.wrap_database_errors:
        assert execute_prepared(connection, select, ["x"]) == 1
    connection.connection.execute("DEALLOCATE ALL")
    with pytest.raises(ProgrammingError), transaction.atomic(), connection.wrap_database_errors:
        execute_prepared(connection, select, ["x"])
    with connection.wrap_database_errors:
        assert execute_prepared(connection, select, ["x"]) == 1


@pytest.mark.postgres
def test_a_statement_joins_the_transaction_django_opened(world: None) -> None:
    """The first statement of an atomic block begins the transaction (as psycopg's cursor
    would); what the block rolls back is gone, what it commits stays."""
    from fieldops.sql import execute_prepared

    run = make_run(advance=False)
    connection.ensure_connection()
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        with connection.wrap_database_errors:  # the block's first statement
            assert execute_prepared(connection, _PROBE, [run.pk, "rolled", run.created_at]) == 1
        assert connection.connection.info.transaction_status.name == "INTRANS"
        raise ZeroDivisionError
    assert _probes("rolled") == 0
    with transaction.atomic():
        Run.objects.exists()  # the transaction is open on the server already
        with connection.wrap_database_errors:
            assert execute_prepared(connection, _PROBE, [run.pk, "kept", run.created_at]) == 1
    assert _probes("kept") == 1
    with transaction.atomic():
        with connection.wrap_database_errors:
            execute_prepared(connection, _PROBE, [run.pk, "inner", run.created_at])
        try:
            with transaction.atomic(), connection.wrap_database_errors:  # a savepoint
                execute_prepared(connection, _PROBE, [run.pk, "inner", run.created_at])
                raise ZeroDivisionError
        except ZeroDivisionError:
            pass
    assert _probes("inner") == 1


@pytest.mark.postgres
def test_execute_prepared_stands_aside_where_the_cursor_must_run_the_statement(
    world: None,
) -> None:
    from fieldops.sql import execute_prepared

    connection.ensure_connection()
    select = "SELECT 1 WHERE %s::text IS NOT NULL"
    with connection.wrap_database_errors:
        assert execute_prepared(connection, select, ["x"]) == 1
        assert execute_prepared(connection, select, [1.5]) is None  # a type it does not encode
        assert execute_prepared(connection, select, [dt.datetime(2026, 1, 1)]) is None  # naive
        # libpq would cut a text at its NUL: the cursor refuses it instead.
        assert execute_prepared(connection, select, ["a\x00b"]) is None
        with CaptureQueriesContext(connection):  # someone counts statements
            assert execute_prepared(connection, select, ["x"]) is None
    with pytest.raises(DataError), transaction.atomic():
        with pytest.raises(DataError):
            Statement("SELECT 1 / %s").one([0])
        # The transaction failed: the cursor answers (PostgreSQL's refusal), not libpq.
        with connection.wrap_database_errors:
            assert execute_prepared(connection, select, ["x"]) is None
        raise DataError("the block fails as a whole")


@pytest.mark.postgres
def test_execute_prepared_raises_djangos_errors_and_changes_nothing(world: None) -> None:
    from fieldops.sql import execute_prepared

    run = make_run(advance=False)
    connection.ensure_connection()
    unknown_run = uuid.UUID("00000000-0000-4000-8000-000000000000")
    with pytest.raises(IntegrityError), connection.wrap_database_errors:
        execute_prepared(connection, _PROBE, [unknown_run, "probe", run.created_at])
    with connection.wrap_database_errors:
        assert execute_prepared(connection, _PROBE, [run.pk, "probe", run.created_at]) == 1
    assert Statement(_PROBES).one(["probe"]) == (1,)


@pytest.mark.postgres
def test_rows_read_through_libpq_are_the_cursor_s(world: None, approver: Any) -> None:
    """The same row read through libpq and through a cursor on the same connection: every
    column type the engine reads (uuid, aware datetimes, jsonb, ints, bools, text, NULL)."""
    from fieldops.sql import binding_cursor, execute_prepared

    run = make_run()
    approve(run, approver)
    read = "SELECT * FROM runs_run WHERE id = %s AND revision >= %s"
    connection.ensure_connection()
    with connection.wrap_database_errors:
        fast = execute_prepared(connection, read, [run.pk, 0], fetch=True)
        cursor = binding_cursor(connection)
        cursor.execute(read, [run.pk, 0])
        slow = cursor.fetchall()
        assert fast == slow and len(fast) == 1
        assert [type(v) for v in fast[0]] == [type(v) for v in slow[0]]
        assert execute_prepared(connection, read, [uuid.uuid4(), 0], fetch=True) == []
    assert Statement(read).one([run.pk, 2**40]) is None  # an int8 parameter: its own statement


def test_placeholders_become_numbered_and_a_doubled_percent_sign_one() -> None:
    from fieldops.sql import _native

    name, text = _native("UPDATE t SET a = %s::jsonb WHERE id = %s AND b LIKE 'x%%' || %s")
    assert text == b"UPDATE t SET a = $1::jsonb WHERE id = $2 AND b LIKE 'x%' || $3"
    assert name.startswith(b"fieldops_")
    # The parameters' types are part of the name: an int2 and an int8 are two statements.
    assert _native("SELECT %s", (21,))[0] != _native("SELECT %s", (20,))[0]


@pytest.mark.postgres
def test_a_connection_the_server_ended_is_django_s_operational_error(world: None) -> None:
    import psycopg
    from django.db import OperationalError

    from fieldops.sql import execute_prepared
    from tests.deploy.servers import shared_database_url

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(shared_database_url(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(OperationalError), connection.wrap_database_errors:
        execute_prepared(connection, "SELECT 1 WHERE %s::text IS NOT NULL", ["x"])
    assert not connection.is_usable()
    connection.close()


@pytest.mark.postgres
def test_arrays_and_text_enums_mean_through_libpq_what_they_mean_through_the_cursor(
    world: None,
) -> None:
    """Lists (texts with quotes, backslashes, braces, commas, NULLs and non-ASCII; ints of
    every width; aware datetimes) and a StrEnum read back the same both ways."""
    import enum

    from fieldops.sql import _encoded, binding_cursor, execute_prepared

    class Kind(enum.StrEnum):
        A = "kind-a"

    texts = ['pla"in', "back\\slash", "{brace},comma", None, "caf\u00e9 \u202e", "", "NULL"]
    ints = [1, -(2**15), 2**31, 2**63 - 1]
    when = [dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC), None]
    from psycopg.types.numeric import Int2, Int8

    ids = [uuid.UUID("00000000-0000-4000-8000-000000000000"), None, uuid.uuid4()]
    flags = [True, None, False]
    read = (
        "SELECT %s::text[], %s::bigint[], %b::numeric[], %s::timestamptz[], %s::text, %s, "
        "pg_typeof(%s)::text, pg_typeof(%s)::text, %s, %s, pg_typeof(%s)::text, "
        "pg_typeof(%s)::text"
    )
    params = [texts, ints[:3], [*ints, 2**70], when, Kind.A, [], Int2(3), Int8(3)]
    params += [ids, flags, ids, flags]
    assert _encoded(params) is not None
    connection.ensure_connection()
    with connection.wrap_database_errors:
        fast = execute_prepared(connection, read, params, fetch=True)
        cursor = binding_cursor(connection)
        cursor.execute(read, params)
        slow = cursor.fetchall()
    assert fast == slow
    assert fast[0][0] == texts and fast[0][4] == "kind-a"
    assert fast[0][6:] == ("smallint", "bigint", ids, flags, "uuid[]", "boolean[]")
    assert _encoded([[1, "a"]]) is None and _encoded([[True, 1]]) is None  # the cursor's


_TZ_MINUS = dt.timezone(-dt.timedelta(hours=9, minutes=30))
_TZ_PLUS = dt.timezone(dt.timedelta(hours=5, minutes=45))
# Values the engine sends, at the edges of their binary encodings: each integer width's
# bounds, negatives, timestamps with non-UTC offsets, microseconds and before 2000 (a
# negative count since PostgreSQL's epoch), JSON with non-ASCII text.
_EDGES: list[tuple[str, Any]] = [
    ("int2send(%s)", 0),
    ("int2send(%s)", -1),
    ("int2send(%s)", -(2**15)),
    ("int2send(%s)", 2**15 - 1),
    ("int4send(%s)", 2**15),
    ("int4send(%s)", -(2**31)),
    ("int4send(%s)", 2**31 - 1),
    ("int8send(%s)", 2**31),
    ("int8send(%s)", -(2**63)),
    ("int8send(%s)", 2**63 - 1),
    ("boolsend(%s)", True),
    ("boolsend(%s)", False),
    ("uuid_send(%s)", uuid.UUID("00000000-0000-4000-8000-000000000000")),
    ("uuid_send(%s)", uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff")),
    ("timestamptz_send(%s)", dt.datetime(2026, 12, 7, 23, 59, 59, 999999, tzinfo=_TZ_MINUS)),
    ("timestamptz_send(%s)", dt.datetime(2000, 1, 1, 5, 45, tzinfo=_TZ_PLUS)),  # the epoch
    ("timestamptz_send(%s)", dt.datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC)),
    ("timestamptz_send(%s)", dt.datetime(1970, 1, 1, tzinfo=_TZ_PLUS)),
    ("timestamptz_send(%s)", dt.datetime(1, 1, 1, tzinfo=dt.UTC)),
    ("timestamptz_send(%s)", dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)),
]


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    text = json.dumps(value, ensure_ascii=False)
    return Jsonb(value, dumps=lambda _value: text)


_JSON = {"caf\u00e9": ["\u202e", "\U0001f600", 1.5, None, True], "q": 'a"b\\c'}


@pytest.mark.postgres
@pytest.mark.parametrize(("send", "value"), [*_EDGES, ("jsonb_send(%s)", _jsonb(_JSON))])
def test_parameters_travel_in_postgresql_s_own_binary_format(send: str, value: Any) -> None:
    """Ints, bools, uuids, timestamptz and jsonb are sent in binary (the server copies them,
    it does not parse them): each as the bytes PostgreSQL's own send function gives."""
    from fieldops.sql import _encoded, _formats, binding_cursor

    encoded = _encoded([value])
    assert encoded is not None
    (data,), types = encoded
    assert _formats(types) == (1,)
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = binding_cursor(connection)
        cursor.execute(f"SELECT {send}", [value])
        (wire,) = cursor.fetchone()
    if send.startswith("jsonb"):  # the server's is its own rendering of the same value
        assert data == b"\x01" + value.dumps(value.obj).encode()
        assert json.loads(wire[1:]) == json.loads(data[1:]) == _JSON
    else:
        assert data == wire


@pytest.mark.postgres
def test_binary_parameters_round_trip_through_a_statement(world: None) -> None:
    """The edge values and JSON read back through a prepared statement as sent, as the
    cursor reads them, with the types the cursor gives them; texts and NULLs beside them
    stay text (``unknown``, typed by the statement)."""
    from fieldops.sql import _encoded, _formats, binding_cursor, execute_prepared

    values = [value for _send, value in _EDGES]
    placeholders = ", ".join(["%s, pg_typeof(%s)::text"] * len(values))
    read = f"SELECT {placeholders}, %s, %s::text, %s::int"
    doubled = [v for value in values for v in (value, value)]
    doubled += [_jsonb(_JSON), "caf\u00e9", None]
    encoded = _encoded(doubled)
    assert encoded is not None
    assert _formats(encoded[1])[-3:] == (1, 0, 0)  # type: ignore[index]
    connection.ensure_connection()
    with connection.wrap_database_errors:
        fast = execute_prepared(connection, read, doubled, fetch=True)
        cursor = binding_cursor(connection)
        cursor.execute(read, doubled)
        slow = cursor.fetchall()
    assert fast == slow
    row = fast[0]  # type: ignore[index]
    assert list(row[0 : 2 * len(values) : 2]) == values
    assert json.loads(row[-3]) == _JSON  # Django's connection reads jsonb as its text
    assert row[-2:] == ("caf\u00e9", None)
    typed = {"int2": "smallint", "int4": "integer", "int8": "bigint", "bool": "boolean"}
    typed |= {"uuid_": "uuid", "timestamptz_": "timestamp with time zone"}
    assert list(row[1 : 2 * len(values) : 2]) == [
        typed[send[: -len("send(%s)")]] for send, _ in _EDGES
    ]


@pytest.mark.postgres
def test_a_sized_int_too_wide_for_its_type_is_left_to_the_cursor(world: None) -> None:
    from psycopg.types.numeric import Int2

    from fieldops.sql import _encoded

    assert _encoded([Int2(2**15)]) is None
