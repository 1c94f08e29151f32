"""Database helpers shared by the engine and the world double."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import InterfaceError, OperationalError, connection

# PostgreSQL's SQLSTATE for a lock wait that gave up (lock_timeout or NOWAIT).
LOCK_NOT_AVAILABLE = "55P03"
# What a request sees when its database connection broke under it (a restart, a failover,
# a terminated backend): Django's wrappers of the driver's errors. The API answers a JSON
# 503 (api/v1.py), the console a 503 page (fieldops.middleware); both with Retry-After.
CONNECTION_LOST: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5


# What a console action is told when a lock wait of its gave up (lock_wait_failed).
BUSY_MESSAGE = (
    "The action is busy: another transaction (a colleague's action, a worker's step) holds "
    "the record it needs, and it waited too long. What it was doing was not written. Try "
    "again in a few seconds."
)


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` means the database connection broke under the request: whether a
    write committed before the break is unknown, so the client must read before retrying.
    A bounded lock wait that gave up (``lock_wait_failed``) is not one: the connection
    answered, and the statement that waited wrote nothing."""
    return isinstance(exc, CONNECTION_LOST) and not lock_wait_failed(exc)


def connection_lost_under(exc: BaseException | None) -> bool:
    """True when ``exc`` or an exception it was raised from (or while handling) is a lost
    connection: Django's session save turns one into ``UpdateError`` and then into
    ``SessionInterrupted`` (a 400), though the request's action may have committed."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if connection_lost(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


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


# SQLSTATEs that mean the deployment's set-up is unfinished, not that a command failed.
_INSUFFICIENT_PRIVILEGE, _UNDEFINED_TABLE = "42501", "42P01"


def setup_problem(exc: BaseException, role: str) -> str | None:
    """One line saying which set-up step a database error means is missing (None: the
    error is something else). For the command line: a management command run before
    ``migrate``, or as a role ``db_roles`` never granted the tables, is told what to run
    instead of printing the driver's traceback; a database that does not answer (or does
    not exist) is named in one line too."""
    cause = exc.__cause__
    said = str(getattr(getattr(cause, "diag", None), "message_primary", None) or exc)
    said = said.strip().splitlines()[0] if said.strip() else type(exc).__name__
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate == _INSUFFICIENT_PRIVILEGE:
        return (
            f"{said}: the database role {role!r} was not granted the tables; as the "
            f"tables' owner run `manage.py db_roles --app-role {role}` (docs/security.md)"
        )
    if sqlstate == _UNDEFINED_TABLE or said.startswith("no such table"):
        return f"{said}: this database is not migrated; run `manage.py migrate` first"
    if isinstance(exc, OperationalError) and sqlstate is None:
        return f"cannot use the database: {said}"
    return None
