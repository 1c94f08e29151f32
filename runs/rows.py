"""The run row as the engine reads it at every step: prepared statements, not the ORM.

The runner reads its run before each step and at each safe point (cancellation must be
seen before every model and capability call): dozens of reads per run. Through the ORM each
costs ~440 us of client CPU (a full row) or ~345 us (two columns); as prepared statements
~70 us and ~12 us (``fieldops/sql.py``). The rows are the same ``Run`` instances the ORM
returns (``tests/runs/test_rows.py`` compares them field by field).
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections

from fieldops.sql import Loader, Statement, param
from runs.models import Run

_RUN = Loader(Run)
_PK = Run._meta.pk
# Column lists are the model's own (Loader), never input.
_BY_ID = Statement(f"SELECT {_RUN.columns} FROM runs_run WHERE id = %s")  # noqa: S608  # nosec B608
# Claims lock the row without waiting: SKIP LOCKED reads a row another transaction holds as
# absent; NO KEY lets rows that merely reference the run (evidence, attempts) be inserted
# meanwhile. SQLite has no row locks (its write transactions lock the database).
_BY_ID_LOCKED = Statement(f"{_BY_ID.sql} FOR NO KEY UPDATE SKIP LOCKED")
_POSITION = Statement("SELECT revision, owner_epoch FROM runs_run WHERE id = %s")
_STATE = Statement("SELECT state FROM runs_run WHERE id = %s")


# The column list of a whole run row, for statements that return one (``RETURNING``).
RUN_COLUMNS = _RUN.columns


def load_run(row: Any) -> Run:
    """A whole run row (``RUN_COLUMNS``, in order) as the ``Run`` the ORM would return."""
    return _RUN.load(row)


def run_pk(run_id: Any) -> Any:
    """``run_id`` as the database stores the run's primary key (a UUID on PostgreSQL, its
    hex text on SQLite). Asked at nearly every statement of a run: remembered per run id."""
    return _run_pk(connections[DEFAULT_DB_ALIAS].vendor, run_id)


@functools.lru_cache(maxsize=1024)
def _run_pk(vendor: str, run_id: Any) -> Any:
    return param(_PK, run_id)  # type: ignore[arg-type]


def run_row(run_id: Any) -> Run | None:
    """The whole run row (None: no such run)."""
    row = _BY_ID.one([run_pk(run_id)])
    return load_run(row) if row is not None else None


def run_row_locked(run_id: Any) -> Run | None:
    """The whole run row, locked for this transaction; None when it is missing or another
    transaction holds it (call inside ``transaction.atomic()``)."""
    statement = _BY_ID_LOCKED if connection.vendor == "postgresql" else _BY_ID
    row = statement.one([run_pk(run_id)])
    return load_run(row) if row is not None else None


def run_position(run_id: Any) -> tuple[int, int] | None:
    """The run's revision and owner epoch: whether a copy read earlier is still current
    (every change to the run's columns but the lease is an event, so bumps the revision)."""
    row = _POSITION.one([run_pk(run_id)])
    return (row[0], row[1]) if row is not None else None


def run_state(run_id: Any) -> str | None:
    row = _STATE.one([run_pk(run_id)])
    return row[0] if row is not None else None
