"""Audit replay of a stored run: load its events and fold them (no policy, no capability)."""

from __future__ import annotations

import gc
import json
import json.scanner
import uuid
from collections.abc import Iterator
from typing import Any

from django.db import connection

from runs import event_rows
from runs.authority import config_of
from runs.domain.events import EventRecord
from runs.domain.replay import Finding, ReplayResult, compare_with_stored, replay
from runs.domain.states import EventType, State
from runs.models import Event, Evidence, Run

# Every column but run_id (the caller knows it), in EventRecord's order (event_rows.COLUMNS).
_READ_COLUMNS = tuple(c for c in event_rows.COLUMNS if c != "run_id")
# Column names are constants of event_rows, never input.
_ROWS_SQL = (
    f"SELECT {', '.join(_READ_COLUMNS)} FROM runs_event "  # noqa: S608  # nosec B608
    "WHERE run_id = %s ORDER BY sequence, id"
)
_RUN_ID = event_rows.COLUMNS.index("run_id")
_JSON = tuple(event_rows.COLUMNS.index(c) for c in sorted(event_rows.JSON_COLUMNS))
_TYPE, _PREV, _NEXT, _EVENT_ID, _SEQUENCE = (
    event_rows.COLUMNS.index(c)
    for c in ("type", "prev_state", "next_state", "event_id", "sequence")
)


class UndecodableEvent(ValueError):
    def __init__(self, sequence: int, detail: str) -> None:
        self.sequence = sequence
        super().__init__(detail)


def stored_records(run: Run) -> Iterator[EventRecord]:
    """The run's events as records, in stored order; UndecodableEvent on a corrupt row.

    Read with one plain cursor (no model instances) and JSON decoded here: audit replay
    reads every event of a run, so the per-row cost matters.
    """
    run_id = str(run.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            _ROWS_SQL, [Event._meta.get_field("run").get_db_prep_value(run.pk, connection)]
        )
        while rows := cursor.fetchmany(2000):
            for row in rows:
                yield _record(run_id, row)


_EVENT_TYPES = {t.value: t for t in EventType}
_STATES = {s.value: s for s in State}


def _record(run_id: str, row: tuple[Any, ...]) -> EventRecord:
    """The record of one stored row (every column but run_id, in ``_READ_COLUMNS`` order)."""
    fields = list(row)
    fields.insert(_RUN_ID, run_id)
    sequence = fields[_SEQUENCE]
    try:
        # Vocabulary by plain dict lookup (the enum constructor costs more, per event).
        fields[_TYPE] = _EVENT_TYPES[fields[_TYPE]]
        fields[_PREV], fields[_NEXT] = _STATES[fields[_PREV]], _STATES[fields[_NEXT]]
        event_id = fields[_EVENT_ID]
        if type(event_id) is not str:  # PostgreSQL returns a UUID
            fields[_EVENT_ID] = str(event_id)
        elif len(event_id) != 36:  # SQLite stores 32 hex digits
            fields[_EVENT_ID] = str(uuid.UUID(event_id))
    except (KeyError, ValueError) as exc:  # a stored value outside the vocabulary: corruption
        raise UndecodableEvent(sequence, f"not a known value: {str(exc)[:200]}") from exc
    try:
        for i in _JSON:
            fields[i] = _json(fields[i])
    except ValueError as exc:  # undecodable JSON: corruption
        raise UndecodableEvent(sequence, str(exc)[:200]) from exc
    return EventRecord(*fields)


# The C scanner behind json.loads, called directly: the stored text of a JSON column has no
# surrounding whitespace, so the wrapper's two whitespace scans per value are skipped.
_SCAN = json.scanner.make_scanner(json.JSONDecoder())


def _json(value: Any) -> Any:
    if type(value) is str:
        try:
            decoded, end = _SCAN(value, 0)
        except StopIteration:
            decoded, end = None, -1
        if end == len(value):
            return decoded
        return json.loads(value)  # anything unusual: the full decoder decides (or raises)
    return json.loads(value) if isinstance(value, bytes) else value


def _load(run: Run) -> tuple[list[EventRecord], Finding | None]:
    """The run's records up to the first undecodable one, and a finding for that one."""
    records: list[EventRecord] = []
    stream = stored_records(run)
    while True:
        try:
            records.append(next(stream))
        except StopIteration:
            return records, None
        except UndecodableEvent as exc:
            return records, Finding("undecodable_event", exc.sequence, str(exc))


def audit_replay(run: Run) -> tuple[ReplayResult, list[Finding]]:
    """Return the replay result and every finding, including disagreements with the row."""
    # Loading and folding allocate many short-lived objects and no cycles: pausing the
    # cyclic collector for their duration saves its repeated full traversals.
    collecting = gc.isenabled()
    gc.disable()
    try:
        records, undecodable = _load(run)
        evidence_ids = frozenset(Evidence.objects.filter(run=run).values_list("id", flat=True))
        result = replay(config_of(run), records, evidence_ids=evidence_ids)
    finally:
        if collecting:
            gc.enable()
    findings = list(result.findings)
    if undecodable is not None:
        findings.append(undecodable)
        return result, findings
    if result.stopped_at is None:
        stored = {
            "state": run.state,
            "revision": run.revision,
            "counters": run.counters,
            "limits": run.budget_limits,
            "cancel_revision": run.cancel_revision,
            "disposition": run.disposition,
            "terminal_reason": run.terminal_reason,
            "waiting_checkpoint": run.waiting_checkpoint,
            "waiting_correlation": run.waiting_correlation,
        }
        findings.extend(compare_with_stored(result, stored))
    return result, findings
