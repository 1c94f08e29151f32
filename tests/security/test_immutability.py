"""The record is immutable: the database refuses changes to events, and the hash chain
detects a one-byte change made behind its back."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError

from runs.models import Event
from runs.replay.audit import audit_replay
from tests.helpers import make_run


@pytest.mark.postgres
def test_the_application_role_cannot_update_or_delete_events(world):
    run = make_run()
    event = Event.objects.filter(run=run).first()
    for statement in (
        "UPDATE runs_event SET reason_code = 'edited' WHERE id = %s",
        "DELETE FROM runs_event WHERE id = %s",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(statement, [event.pk])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(reason_code="edited")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(run=run).delete()
    assert Event.objects.get(pk=event.pk).reason_code == event.reason_code


def _tamper(event_id: int, column: str, value: object) -> None:
    """Change a stored event as an attacker with table-owner rights would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # flush pending FK checks first
            cursor.execute("ALTER TABLE runs_event DISABLE TRIGGER runs_event_immutable")
        cursor.execute(
            f"UPDATE runs_event SET {column} = %s WHERE id = %s",  # noqa: S608
            [value, event_id],
        )
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE runs_event ENABLE TRIGGER runs_event_immutable")


@pytest.mark.parametrize(
    "column", ["reason_code", "occurred_at", "actor", "type", "next_state", "prev_hash"]
)
def test_a_one_byte_change_in_any_stored_event_is_detected(world, column):
    run = make_run()
    events = list(Event.objects.filter(run=run).order_by("sequence"))
    target = events[len(events) // 2]
    original = getattr(target, column)
    changed = original[:-1] + ("X" if original[-1:] != "X" else "Y")
    _tamper(target.pk, column, changed)
    _, findings = audit_replay(run)
    assert findings, f"a change to {column} went unnoticed"
    assert findings[0].sequence == target.sequence
    assert findings[0].kind in ("broken_hash_link", "illegal_edge", "undecodable_event")


def test_an_untouched_chain_replays_clean(world):
    run = make_run()
    assert audit_replay(run)[1] == []
