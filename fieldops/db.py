"""Database helpers shared by the engine and the world double."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from django.db import OperationalError, connection

# PostgreSQL's SQLSTATE for a lock wait that gave up (lock_timeout or NOWAIT).
LOCK_NOT_AVAILABLE = "55P03"


def lock_wait_failed(exc: BaseException) -> bool:
    """True when ``exc`` is a bounded lock wait that gave up: PostgreSQL's ``lock_timeout``
    (or NOWAIT), or SQLite's busy timeout. Nothing was written by the failed statement."""
    if not isinstance(exc, OperationalError):
        return False
    if getattr(exc.__cause__, "sqlstate", None) == LOCK_NOT_AVAILABLE:
        return True
    return connection.vendor == "sqlite" and "locked" in str(exc)


@contextlib.contextmanager
def lock_timeout(milliseconds: int) -> Iterator[None]:
    """Bound the lock waits of the enclosing transaction (PostgreSQL; a no-op elsewhere).

    Call inside ``transaction.atomic()``: ``SET LOCAL`` lasts until that transaction ends.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{milliseconds}ms"])
    yield


def binding_cursor() -> Any:
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
    json = _columns_of(model)[column].get_internal_type() == "JSONField"
    return f"{alias}.{column}::jsonb" if json else f"{alias}.{column}"


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
    of one binary array per column, through ``binding_cursor``."""
    if not rows:
        return
    with binding_cursor() as cursor:
        cursor.execute(_insert_sql(model, tuple(columns)), columns_of(rows))


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
