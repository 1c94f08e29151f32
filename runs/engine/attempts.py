"""Writes of effect attempts: every move is a compare-and-set along the lifecycle of
``runs/domain/effects.py``, made inside the transaction of the run event that records it.

The reads and writes a run makes of its attempts are prepared statements
(``fieldops.sql``), not the ORM: the same rows and values, without compiling the query
again at every call.
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection

from fieldops.sql import Loader, Statement, param
from kernel import clock
from runs import rows
from runs.authority import Refused
from runs.domain import effects
from runs.domain.effects import AttemptStatus
from runs.models import EffectAttempt

_ATTEMPT = Loader(EffectAttempt)
_RESOLVED_AT = EffectAttempt._meta.get_field("resolved_at")
# Column lists are the model's own (Loader), never input.
_LATEST = Statement(
    f"SELECT {_ATTEMPT.columns} FROM runs_effectattempt WHERE run_id = %s "  # noqa: S608  # nosec B608
    "ORDER BY dispatch_sequence DESC, created_at DESC LIMIT 1"
)
_IN_STATUS = Statement("SELECT id FROM runs_effectattempt WHERE id = %s AND status = %s LIMIT 1")
_IN_STATUS_LOCKED = Statement(
    "SELECT id FROM runs_effectattempt WHERE id = %s AND status = %s FOR UPDATE"
)
_SET_STATUS = Statement("UPDATE runs_effectattempt SET status = %s WHERE id = %s")


def latest(run_id: Any) -> EffectAttempt | None:
    """The run's latest dispatch record (highest dispatch sequence), or None."""
    found = _LATEST.one([rows.run_pk(run_id)])
    return _ATTEMPT.load(found) if found is not None else None


def in_status(attempt_id: str, status: AttemptStatus, *, lock: bool = False) -> bool:
    """Whether the attempt is in ``status``; with ``lock``, its row is locked for this
    transaction when it is (``select_for_update``; SQLite locks the whole database)."""
    statement = _IN_STATUS_LOCKED if lock and connection.vendor == "postgresql" else _IN_STATUS
    return statement.one([attempt_id, status.value]) is not None


def set_status(attempt_id: str, status: AttemptStatus) -> None:
    _SET_STATUS.write([status.value, attempt_id])


@functools.cache
def _move(columns: tuple[str, ...]) -> Statement:
    # The columns are this module's constants (attempt_move's field names), never input.
    assignments = ", ".join(f"{column} = %s" for column in columns)
    return Statement(
        f"UPDATE runs_effectattempt SET {assignments} WHERE id = %s AND status = %s"  # noqa: S608  # nosec B608
    )


def attempt_move(
    *,
    attempt_id: str,
    source: AttemptStatus,
    target: AttemptStatus,
    detail: str,
    error: str = "",
    answer: str = "",
    effect_id: str = "",
) -> None:
    """Compare-and-set the attempt from ``source`` to ``target`` (call inside the
    transaction of the event that records the move). Raise authority.Refused when the
    attempt is no longer in ``source``: someone else settled it, so the event is not
    written either. ``source`` equal to ``target`` only checks that the status still holds."""
    if source is target:
        # Nothing moves; the event only re-records the status, which must still hold.
        if not in_status(attempt_id, source):
            raise Refused("attempt_moved")
        return
    effects.check_move(source, target)
    fields: dict[str, Any] = {
        "status": target.value,
        "detail": detail[:500],
        "resolved_at": None if target in effects.UNRESOLVED else clock.now(),
    }
    if error:
        fields["error"] = error[:48]
    if answer:
        fields["answer"] = answer[:48]
    if effect_id:
        fields["effect_id"] = effect_id
    fields["resolved_at"] = param(_RESOLVED_AT, fields["resolved_at"])
    moved = _move(tuple(fields)).write([*fields.values(), attempt_id, source.value])
    if moved != 1:
        raise Refused("attempt_moved")
