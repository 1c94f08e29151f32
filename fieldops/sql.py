"""Hot statements: the few queries the engine makes at every step, without the ORM's cost.

A Django query compiles its SQL on every call: measured here, ~345 us of client CPU for
``Run.objects.filter(pk=...).values_list(...).first()`` against ~12 us for the same
statement prepared once and bound server-side. A run makes dozens of such reads per
advance (safe points, evidence, catalog rules), so the runner's hot reads and writes are
``Statement``s: SQL written once, portable between PostgreSQL and SQLite (``%s``
placeholders, no casts), with the values prepared by the model's own fields.

- On PostgreSQL the statement is prepared once per connection and sent through libpq
  (``execute_prepared``: parsed and planned once, bound by the server, without the cursor's
  Python), or where that stands aside through a server-side-binding psycopg cursor.
- Elsewhere (the embedded SQLite default) it goes through Django's cursor.

Either way it runs on Django's connection, so it joins the caller's transaction and errors
are Django's (``IntegrityError``, ``OperationalError``); when someone watches statements
(``DEBUG``, the test suite's query counters, ``connection.execute_wrapper`` hooks) it goes
through Django's own cursor, so they see every statement.
Cold paths keep the ORM.

Batches (bulk cancel: ``runs/authority_batch.py``) write many rows in one statement:
``insert_many`` sends one binary array per column to ``INSERT ... SELECT FROM unnest``.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import itertools
import json
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from psycopg.adapt import Transformer
from psycopg.types.json import Jsonb
from psycopg.types.numeric import Int2, Int4, Int8

Row = tuple[Any, ...]


class Statement:
    """One SQL statement with ``%s`` placeholders (column and table names are constants of
    the module that defines it, never input)."""

    def __init__(self, sql: str) -> None:
        self.sql = " ".join(sql.split())

    def rows(self, params: Sequence[Any]) -> list[Row]:
        return _execute(self.sql, params, fetch=True)  # type: ignore[return-value]

    def one(self, params: Sequence[Any]) -> Row | None:
        rows = self.rows(params)
        return rows[0] if rows else None

    def write(self, params: Sequence[Any]) -> int:
        """Execute a write; return the number of rows it changed."""
        return _execute(self.sql, params, fetch=False)  # type: ignore[return-value]


@functools.cache
def with_lists(sql: str, **lengths: int) -> Statement:
    """The statement ``sql`` whose ``{name}`` fields are lists of ``lengths[name]``
    placeholders (``IN ({ids})``): one statement, prepared once, per combination of lengths.
    The fields are this module's callers' constants, never input."""
    return Statement(sql.format(**{name: ", ".join(["%s"] * n) for name, n in lengths.items()}))


def _execute(sql: str, params: Sequence[Any], *, fetch: bool) -> list[Row] | int:
    # One lookup of the connection: every attribute read through Django's ``connection``
    # proxy looks the connection up again (an asgiref local), a cost paid per statement.
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql" or db.execute_wrappers or db.queries_logged:
        # SQLite, or someone is watching (a query counter, DEBUG): Django's own cursor,
        # so the statement is logged and wrapped like any other.
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if fetch else cursor.rowcount
    # As Django's own cursor() does: a kept connection is health-checked once per task or
    # request (CONN_HEALTH_CHECKS) before it is used again.
    db.close_if_health_check_failed()
    if db.connection is None:
        db.ensure_connection()
    with db.wrap_database_errors:
        done = execute_prepared(db, sql, params, fetch=fetch)
        if done is not None:
            return done
        cursor = binding_cursor(db)
        cursor.execute(sql, params)
        return cursor.fetchall() if fetch else cursor.rowcount


def binding_cursor(db: Any) -> psycopg.Cursor[Any]:
    """The connection's server-side-binding cursor, made once per open psycopg connection
    and kept on Django's connection wrapper ``db``: the way a statement goes when
    ``execute_prepared`` stands aside (its parameters typed and bound by the server, as
    there, but not prepared). Call inside ``db.wrap_database_errors``."""
    held = getattr(db, "_fieldops_binding_cursor", None)
    if held is None or held.connection is not db.connection or held.closed:
        held = db._fieldops_binding_cursor = psycopg.Cursor(db.connection)
    return held


# At most this many statements prepared per connection by ``execute_prepared``: a worker's
# run path prepares ~65 (the authority's one per set of changed columns among them), sweeps
# and bulk operations add theirs; a statement beyond the limit goes through the cursor.
PREPARED_MAX = 512


def json_param(field: Field[Any, Any], value: Any, text: str) -> Any:
    """``value`` for the JSON column ``field`` when its JSON ``text`` is already made: on
    PostgreSQL the text is sent as is (no second encoding); elsewhere as the ORM sends it."""
    if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":
        return Jsonb(value, dumps=lambda _value: text)
    return param(field, value)


def param(field: Field[Any, Any], value: Any) -> Any:
    """``value`` as the database expects it for ``field`` (a UUID is hex text on SQLite, a
    JSON value is adapted to jsonb on PostgreSQL), exactly as the ORM would send it."""
    # The connection itself, not Django's ``connection`` proxy: a field reads several of
    # its attributes, and each read through the proxy looks the connection up again.
    return field.get_db_prep_save(value, connections[DEFAULT_DB_ALIAS])


def converted(field: Field[Any, Any], value: Any) -> Any:
    """A value of ``field``'s column as read by a ``Statement``, as the ORM would return it
    (SQLite's datetimes and UUIDs are text; JSON is decoded)."""
    db = connections[DEFAULT_DB_ALIAS]
    column = field.get_col(field.model._meta.db_table)
    for convert in db.ops.get_db_converters(column) + column.get_db_converters(db):
        value = convert(value, column, db)
    return value


def _plain_model(model: type[Model]) -> bool:
    """Whether instances of ``model`` may be made without ``Model.__init__``: neither it
    nor ``from_db`` is overridden and no receiver listens to its init signals."""
    return (
        model.__init__ is Model.__init__
        and model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]
        and not pre_init.has_listeners(model)
        and not post_init.has_listeners(model)
    )


class Loader:
    """Turns rows of ``model``'s columns (``fields``, by attribute name, in that order)
    into model instances, applying the same converters the ORM applies (JSON decoding,
    SQLite's UUIDs and datetimes), so a loaded instance equals one the ORM would return."""

    def __init__(self, model: type[Model], fields: Sequence[str] | None = None) -> None:
        meta = model._meta
        self.model = model
        self.fields = (
            [meta.get_field(name) for name in fields] if fields else list(meta.concrete_fields)
        )
        self.attnames = [field.attname for field in self.fields]  # type: ignore[union-attr]
        # Quoted (standard SQL, both databases): a column may be a keyword ("group").
        self.columns = ", ".join(f'"{field.column}"' for field in self.fields)  # type: ignore[union-attr]
        self._converters: dict[str, list[tuple[int, Any, list[Callable[..., Any]]]]] = {}
        self._plain: bool | None = None  # decided at the first load (after apps are ready)

    def _chains(self, db: Any) -> list[tuple[int, Any, list[Callable[..., Any]]]]:
        """(index, column, converters) of every field that has converters on the database
        of ``db``, as the ORM's compiler finds them; computed once per vendor."""
        found = self._converters.get(db.vendor)
        if found is None:
            found = []
            for index, field in enumerate(self.fields):
                column = field.get_col(self.model._meta.db_table)  # type: ignore[union-attr]
                chain = db.ops.get_db_converters(column) + column.get_db_converters(db)
                if chain:
                    found.append((index, column, chain))
            self._converters[db.vendor] = found
        return found

    def load(self, row: Row) -> Any:
        """``row`` as a model instance."""
        db = connections[DEFAULT_DB_ALIAS]
        return self.make(self._converted(row, db), db)

    def make(self, values: Sequence[Any], db: Any = None) -> Any:
        """The instance of a stored row whose values (in this loader's field order) the
        caller has as the ORM gives them (converted): what ``load`` returns for its row."""
        db = db or connections[DEFAULT_DB_ALIAS]
        if self._plain is None:
            self._plain = _plain_model(self.model)
        if not self._plain:
            return self.model.from_db(db.alias, self.attnames, values)
        # What ``from_db`` does for a model that overrides neither it nor ``__init__`` and
        # whose init signals nobody hears, without ``Model.__init__``'s generic argument
        # handling: the state, then each loaded attribute (fields not loaded are deferred,
        # as with ``only()``).
        obj = self.model.__new__(self.model)
        obj._state = ModelState()
        for attname, value in zip(self.attnames, values, strict=True):
            setattr(obj, attname, value)
        obj._state.adding = False
        obj._state.db = db.alias
        return obj

    def load_values(self, row: Row) -> list[Any]:
        """``row``'s values as the ORM's ``values()`` would give them (converted)."""
        return self._converted(row, connections[DEFAULT_DB_ALIAS])

    def _converted(self, row: Row, db: Any) -> list[Any]:
        values = list(row)
        for index, column, chain in self._chains(db):
            value = values[index]
            for convert in chain:
                value = convert(value, column, db)
            values[index] = value
        return values


# -- single-row writes of model instances ---------------------------------------------------
class _Insert:
    """The prepared INSERT of every concrete column of ``model`` (an auto primary key is the
    database's: left out, and read back with ``RETURNING``)."""

    def __init__(self, model: type[Model]) -> None:
        meta = model._meta
        pk = meta.pk
        self.auto_pk = (
            pk if pk is not None and pk.get_internal_type().endswith("AutoField") else None
        )
        self.fields = [field for field in meta.concrete_fields if field is not self.auto_pk]
        columns = ", ".join(f'"{field.column}"' for field in self.fields)  # type: ignore[union-attr]
        placeholders = ", ".join(["%s"] * len(self.fields))
        returning = f" RETURNING {self.auto_pk.column}" if self.auto_pk is not None else ""
        # Table and column names come from the model, never from input.
        self.statement = Statement(
            f"INSERT INTO {meta.db_table} ({columns}) VALUES ({placeholders}){returning}"  # noqa: S608  # nosec B608
        )


@functools.cache
def _insert_of(model: type[Model]) -> _Insert:
    return _Insert(model)


def insert(obj: Model) -> Model:
    """Save the new instance ``obj`` (``Model.objects.create`` without the ORM's per-call
    query compilation): one prepared INSERT of all its columns, each value prepared by its
    field exactly as the ORM's insert prepares it (``pre_save``, ``get_db_prep_save``). An
    auto primary key is set from the database. No signals are sent (the project has no
    receivers of model signals). Return ``obj``."""
    plan = _insert_of(type(obj))
    db = connections[DEFAULT_DB_ALIAS]
    values = [field.get_db_prep_save(field.pre_save(obj, True), db) for field in plan.fields]  # type: ignore[union-attr]
    if plan.auto_pk is not None:
        row = plan.statement.one(values)
        assert row is not None
        setattr(obj, plan.auto_pk.attname, converted(plan.auto_pk, row[0]))
    else:
        plan.statement.write(values)
    obj._state.adding = False
    obj._state.db = DEFAULT_DB_ALIAS
    return obj


# -- batches: many rows in one statement ----------------------------------------------------
def batch_cursor() -> Any:
    """A server-side-binding cursor on the default connection (PostgreSQL), wrapped as
    Django wraps its own (errors translated, statements captured when queries are logged).

    Django's cursors quote every parameter into the SQL text on the client, which for an
    array of a thousand JSON texts is most of a bulk statement's client work; parameters
    of this cursor travel separately (with ``%b``: in binary, nothing escaped).
    """
    connection.ensure_connection()
    return connection._prepare_cursor(psycopg.Cursor(connection.connection))


def _columns_of(model: Any) -> dict[str, Any]:
    return {field.column: field for field in model._meta.concrete_fields}


def array_type(model: Any, column: str) -> str:
    """The SQL array type ``column``'s values travel in (JSON as text, cast per element)."""
    field = _columns_of(model)[column]
    if field.get_internal_type() == "JSONField":
        return "text[]"
    return f"{field.db_type(connection)}[]"


def unnest_value(model: Any, column: str, alias: str) -> str:
    """``alias.column`` as the column's type (JSON text cast to jsonb)."""
    is_json = _columns_of(model)[column].get_internal_type() == "JSONField"
    return f"{alias}.{column}::jsonb" if is_json else f"{alias}.{column}"


@functools.cache
def _insert_sql(model: Any, columns: tuple[str, ...]) -> str:
    arrays = ", ".join(f"%b::{array_type(model, column)}" for column in columns)
    selects = ", ".join(unnest_value(model, column, "v") for column in columns)
    # Table and column names come from the model, never from input.
    return (
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) "  # noqa: S608  # nosec B608
        f"SELECT {selects} FROM unnest({arrays}) AS v({', '.join(columns)})"
    )


def insert_many(model: Any, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rows`` (values in ``columns`` order, JSON columns as JSON text) into
    ``model``'s table in one statement on PostgreSQL: ``INSERT ... SELECT FROM unnest``
    of one binary array per column, through ``batch_cursor``; a few rows (a run's terminal
    record) go through ``execute_prepared`` instead, the arrays as text: prepared once,
    not parsed and planned at each insert as the cursor's statement is (~0.2 ms of the
    server's CPU a run for the terminal record)."""
    if not rows:
        return
    sql, arrays = _insert_sql(model, tuple(columns)), columns_of(rows)
    if len(rows) <= PREPARED_ROWS_MAX:
        db = connections[DEFAULT_DB_ALIAS]
        db.ensure_connection()
        with db.wrap_database_errors:
            if execute_prepared(db, sql, arrays) is not None:
                return
    with batch_cursor() as cursor:
        cursor.execute(sql, arrays)


# At most this many rows inserted by ``insert_many`` through ``execute_prepared``: larger
# batches (bulk cancel's events) keep the cursor's binary arrays, which cost no Python
# escaping per value.
PREPARED_ROWS_MAX = 8


def columns_of(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Rows as one list per column: the arrays ``unnest`` turns back into rows."""
    return [list(column) for column in zip(*rows, strict=True)]


def create_many(model: Any, objects: Sequence[Any]) -> None:
    """``model.objects.bulk_create(objects)`` for new rows whose primary key the database
    assigns, sent through ``insert_many`` on PostgreSQL (JSON encoded as the JSONField
    encodes it); other databases use ``bulk_create``. The objects' primary keys stay unset."""
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects)
        return
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    rows = []
    for obj in objects:
        row = []
        for field in fields:
            value = getattr(obj, field.attname)
            if field.get_internal_type() == "JSONField":
                value = json.dumps(value, cls=field.encoder)
            row.append(value)
        rows.append(row)
    insert_many(model, [field.column for field in fields], rows)


# -- statements through libpq's own call --------------------------------------------------
# psycopg's cursor costs ~40-60 us of Python per execute on these hosts (query conversion,
# dumpers, result bookkeeping): for the engine's statements, more than the work they ask
# for. ``execute_prepared`` calls libpq's PQprepare/PQexecPrepared through psycopg's ``pq``
# binding instead (they release the GIL while they wait, as the cursor does) and reads the
# rows with psycopg's own loaders (the connection's adapters: what the cursor would return).
# Parameters go as the cursor sends them: the same types, binary where it sends binary
# (``_encoded``, ``_formats``).
#
# The statements are prepared under this module's names, once per connection, and only
# this module prepares: Django's connections are opened with psycopg's preparation off
# (``prepare_threshold`` None, fieldops/settings.py), so psycopg holds no prepared
# statement and never sends the ``DEALLOCATE ALL`` it sends after a rollback when it does.
# A prepared statement is not transactional in PostgreSQL: one prepared inside a
# transaction that rolls back stays prepared. So inside a transaction a name once prepared
# is there; in autocommit, a statement whose name is gone anyway (someone deallocated it)
# is prepared again and sent once more (it failed without running).
#
# In a transaction Django has asked for but psycopg has not begun yet (``autocommit`` off,
# the server idle), the transaction is begun first, exactly as psycopg's cursor begins it.
_NAME_GONE = b"26000"  # invalid_sql_statement_name: not prepared on this connection (now)
_DONE = (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK)
_IDLE = psycopg.pq.TransactionStatus.IDLE
_INTRANS = psycopg.pq.TransactionStatus.INTRANS


def execute_prepared(
    db: Any, sql: str, params: Sequence[Any], *, fetch: bool = False
) -> list[Row] | int | None:
    """Run ``sql`` (``%s`` placeholders) as a prepared statement through libpq and return
    its rows (``fetch``) or its row count; or None when this path does not apply and nothing
    was sent: not PostgreSQL, prepared statements switched off
    (``FIELDOPS_PREPARED_STATEMENTS``), the transaction failed or busy, someone watches
    statements (a query counter, ``DEBUG``, an ``execute_wrapper``), a parameter is not a
    str, int, bool, None, UUID, aware datetime or a ``Jsonb`` with its text made, or the
    connection holds ``PREPARED_MAX`` of them already. The caller then runs it through a
    cursor. Call inside ``db.wrap_database_errors``, on an open connection: a failure
    raises psycopg's error, which that translates to Django's (``IntegrityError``...)."""
    conn = db.connection
    if (
        db.vendor != "postgresql"
        or not settings.FIELDOPS_PREPARED_STATEMENTS
        or db.execute_wrappers
        or db.queries_logged
        or conn is None
    ):
        return None
    status = conn.pgconn.transaction_status
    if status != _IDLE and status != _INTRANS:
        return None
    encoded = _encoded(params)
    if encoded is None:
        return None
    values, types = encoded
    formats = _formats(types)
    name, text = _native(sql, types)
    prepared = _prepared_on(db)
    if name not in prepared and len(prepared) >= PREPARED_MAX:
        return None
    if status == _IDLE and not conn.autocommit:
        conn.wait(conn._start_query())  # BEGIN, as psycopg's cursor sends it
    pgconn = conn.pgconn
    if name not in prepared:
        _prepare(conn, name, text, types)
        prepared.add(name)
    result = pgconn.exec_prepared(name, values, formats)
    if (
        result.status == psycopg.pq.ExecStatus.FATAL_ERROR
        and result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == _NAME_GONE
    ):
        prepared.clear()  # whoever deallocated this one deallocated the others too
        if pgconn.transaction_status != _IDLE:  # the failure ended the transaction
            raise _error(conn, result)
        _prepare(conn, name, text, types)
        prepared.add(name)
        result = pgconn.exec_prepared(name, values, formats)
    if result.status not in _DONE:
        raise _error(conn, result)
    if fetch:
        return _rows(db, result)
    return result.command_tuples or 0


def _rows(db: Any, result: Any) -> list[Row]:
    """The rows of ``result`` as the connection's cursor would return them (its adapters:
    Django's time zone and JSON loaders included)."""
    if not result.ntuples:
        return []
    held = getattr(db, "_fieldops_transformer", None)
    if held is None or held[0] is not db.connection:
        held = db._fieldops_transformer = (db.connection, Transformer(db.connection))
    transformer = held[1]
    transformer.set_pgresult(result)
    rows: list[Row] = transformer.load_rows(0, result.ntuples, tuple)
    return rows


_PLACEHOLDER = re.compile(r"%[%sb]")


@functools.cache
def _native(sql: str, types: tuple[int, ...] = ()) -> tuple[bytes, bytes]:
    """(statement name, text with ``$n`` placeholders and ``%%`` as ``%``) of a statement
    written for psycopg's cursor (``%b`` is a placeholder like ``%s``: each parameter's
    format is ``_formats``'s), its parameters sent as ``types``; the name is this module's
    own (psycopg names its prepared statements ``_pg3_n``)."""
    numbers = itertools.count(1)
    text = _PLACEHOLDER.sub(lambda m: "%" if m.group() == "%%" else f"${next(numbers)}", sql)
    key = f"{sql}\x00{','.join(map(str, types))}"
    name = "fieldops_" + hashlib.sha256(key.encode()).hexdigest()[:24]
    return name.encode(), text.encode()


def _prepared_on(db: Any) -> set[bytes]:
    """Names this module prepared on ``db``'s current psycopg connection."""
    held = getattr(db, "_fieldops_prepared", None)
    if held is None or held[0] is not db.connection:
        held = db._fieldops_prepared = (db.connection, set())
    return held[1]


def _prepare(conn: psycopg.Connection[Any], name: bytes, text: bytes, types: Sequence[int]) -> None:
    result = conn.pgconn.prepare(name, text, types)
    if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
        raise _error(conn, result)


def _error(conn: psycopg.Connection[Any], result: Any) -> psycopg.Error:
    """psycopg's exception for a failed ``result``, as its cursor would raise it."""
    if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
        # The connection is gone (the server ended it, the network dropped): the cursor's
        # error for that, so callers and Django treat it alike.
        said = result.error_message.decode(conn.info.encoding, "replace").strip()
        return psycopg.OperationalError(said or "the connection to the server was lost")
    return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


# The type each parameter is sent as: the one psycopg's cursor gives it (a str and None are
# ``unknown``, so the server takes the type the statement gives the placeholder; an int is
# the smallest of int2, int4, int8 and numeric that holds it), so a statement means on this
# path what it means through the cursor. Types are part of a prepared statement's name.
_UNKNOWN, _BOOL, _INT2, _INT4, _INT8, _NUMERIC = 0, 16, 21, 23, 20, 1700
_UUID, _TIMESTAMPTZ, _JSONB = 2950, 1184, 3802
_WIDTH = [_INT2, _INT4, _INT8, _NUMERIC]
_SIZED_INTS = {Int2: _INT2, Int4: _INT4, Int8: _INT8}

# Bools, int2/4/8, uuids, timestamptz and jsonb travel in PostgreSQL's binary format, as the
# cursor sends them: the server reads them without parsing text (measured on the server:
# ~0.2 us saved per uuid or timestamptz, next to nothing for ints, bools and jsonb, whose
# binary form still carries the JSON text; ~0.03 ms of a run). Texts and NULLs
# (``unknown``: only text can be sent for a type the server has yet to choose), arrays and
# numerics stay text.
_BINARY = frozenset({_BOOL, _INT2, _INT4, _INT8, _UUID, _TIMESTAMPTZ, _JSONB})
_PACK_INT = {_INT2: struct.Struct(">h").pack, _INT4: struct.Struct(">i").pack}
_PACK_INT[_INT8] = struct.Struct(">q").pack
_PACK_TIME = struct.Struct(">q").pack
_PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # timestamptz: microseconds since it
_TRUE, _FALSE = b"\x01", b"\x00"
_JSONB_VERSION = b"\x01"  # jsonb's binary format: a version byte, then the JSON text


@functools.cache
def _formats(types: tuple[int, ...]) -> tuple[int, ...] | None:
    """The format of each parameter sent as ``types`` (1 binary, 0 text), or None if all
    are text (libpq's default)."""
    formats = tuple(int(oid in _BINARY) for oid in types)
    return formats if any(formats) else None


def _int(value: int, oid: int) -> bytes:
    """``value`` sent as ``oid``: big-endian of its width, a numeric as its text."""
    pack = _PACK_INT.get(oid)
    return pack(value) if pack is not None else str(value).encode()


def _timestamptz(value: dt.datetime) -> bytes:
    since = value - _PG_EPOCH
    return _PACK_TIME((since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds)


# Arrays as PostgreSQL's text input, typed as psycopg types them: a list of texts (or
# NULLs, or empty) ``unknown``, of ints the array of the smallest integer type holding them
# all, of aware datetimes ``timestamptz[]``, of UUIDs ``uuid[]``, of bools ``bool[]``.
# Anything else is the cursor's.
_ARRAY_OF = {_INT2: 1005, _INT4: 1007, _INT8: 1016, _NUMERIC: 1231}
_TIMESTAMPTZ_ARRAY = 1185
_ARRAY_OF_KIND = {uuid.UUID: 2951, bool: 1000}


def _array(values: list[Any]) -> tuple[bytes, int] | None:
    items: list[str] = []
    kinds = {type(v) for v in values if v is not None}
    if not kinds or all(issubclass(k, str) for k in kinds):
        oid = _UNKNOWN
    elif kinds == {int}:
        oid = _ARRAY_OF[max((_int_type(v) for v in values if v is not None), key=_WIDTH.index)]
    elif kinds == {dt.datetime} and all(v is None or v.utcoffset() is not None for v in values):
        oid = _TIMESTAMPTZ_ARRAY
    elif len(kinds) == 1 and (kind := next(iter(kinds))) in _ARRAY_OF_KIND:
        oid = _ARRAY_OF_KIND[kind]
    else:
        return None
    for value in values:
        if value is None:
            items.append("NULL")
            continue
        text = (
            value.isoformat()
            if isinstance(value, dt.datetime)
            else str.__str__(value)
            if isinstance(value, str)
            else str(value)
        )
        if "\x00" in text:
            return None
        items.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return ("{" + ",".join(items) + "}").encode(), oid


def _int_type(value: int) -> int:
    if -(2**15) <= value < 2**15:
        return _INT2
    if -(2**31) <= value < 2**31:
        return _INT4
    if -(2**63) <= value < 2**63:
        return _INT8
    return _NUMERIC


def _encoded(params: Sequence[Any]) -> tuple[list[bytes | None], tuple[int, ...]] | None:
    """Each parameter as PostgreSQL's input (binary or text: ``_formats``) and the type it
    is sent as (see above), or None if one is of a type not encoded here or a text holds a
    NUL."""
    out: list[bytes | None] = []
    types: list[int] = []
    for value in params:
        kind = type(value)
        if kind is str or isinstance(value, str):  # a StrEnum too: its value, as psycopg
            if "\x00" in value:
                # libpq reads a text parameter up to its first NUL: the cursor refuses it
                # instead (DataError), never a value silently cut short.
                return None
            out.append(str.encode(value))
            types.append(_UNKNOWN)
        elif kind is list:
            array = _array(value)
            if array is None:
                return None
            out.append(array[0])
            types.append(array[1])
        elif kind is int:
            oid = _int_type(value)
            out.append(_int(value, oid))
            types.append(oid)
        elif kind in _SIZED_INTS:  # psycopg's Int2/Int4/Int8 wrappers: the type they name
            oid = _SIZED_INTS[kind]
            try:
                out.append(_int(int(value), oid))
            except struct.error:  # too wide for the type it names: the cursor refuses it
                return None
            types.append(oid)
        elif value is None:
            out.append(None)
            types.append(_UNKNOWN)
        elif kind is bool:
            out.append(_TRUE if value else _FALSE)
            types.append(_BOOL)
        elif kind is uuid.UUID:
            out.append(value.bytes)
            types.append(_UUID)
        elif kind is dt.datetime and value.utcoffset() is not None:
            out.append(_timestamptz(value))
            types.append(_TIMESTAMPTZ)
        elif kind is Jsonb and value.dumps is not None:
            # Only a value whose text its maker gave (``json_param``): any other is dumped
            # by the cursor with the connection's own JSON dumper.
            text = value.dumps(value.obj)
            data = text.encode() if isinstance(text, str) else bytes(text)
            if b"\x00" in data:
                return None
            out.append(_JSONB_VERSION + data)
            types.append(_JSONB)
        else:
            return None
    return out, tuple(types)
