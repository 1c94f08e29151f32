"""The one mapping between an event record (``runs/domain/events.py``) and its stored row,
and between a run snapshot and the run row's state columns.

The authority's compare-and-set and insert, audit replay's read and the benchmark loader
all use these lists: a column added to the record is added here once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from runs.domain.events import EventRecord, RunSnapshot
from runs.domain.states import EventType, State
from runs.models import Event

# Every column of runs_event but its surrogate id, in EventRecord's field order (so a row
# in this order is EventRecord's positional arguments).
COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EventRecord))
JSON_COLUMNS: frozenset[str] = frozenset({"budget", "refs", "payload"})
ENUM_COLUMNS: frozenset[str] = frozenset({"type", "prev_state", "next_state"})

# The run row's state columns the authority writes with each event, and the snapshot field
# each one holds (the row calls the current limits ``budget_limits``).
RUN_STATE: tuple[tuple[str, str], ...] = (
    ("state", "state"),
    ("revision", "revision"),
    ("counters", "counters"),
    ("budget_limits", "limits"),
    ("cancel_revision", "cancel_revision"),
    ("last_hash", "last_hash"),
    ("disposition", "disposition"),
    ("terminal_reason", "terminal_reason"),
    ("waiting_checkpoint", "waiting_checkpoint"),
    ("waiting_correlation", "waiting_correlation"),
    ("current_proposal", "current_proposal"),
    ("pending_observation", "pending_observation"),
)
RUN_JSON_COLUMNS: frozenset[str] = frozenset({"counters", "budget_limits"})


# One encoder for the stored JSON text (``json.dumps`` with ``default`` builds a new encoder
# on every call; this is on the authority's path, once per JSON column per event).
_TEXT = json.JSONEncoder(default=str)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, (EventType, State)) else value


def values(event: EventRecord, *, json_text: bool = False) -> list[Any]:
    """The event's column values in COLUMNS order: enums as their text, JSON columns as
    dicts (or as JSON text with ``json_text``, for SQL and COPY)."""
    out = []
    for column in COLUMNS:
        value = _plain(getattr(event, column))
        if column in JSON_COLUMNS:
            value = _TEXT.encode(dict(value)) if json_text else dict(value)
        out.append(value)
    return out


def model_fields(event: EventRecord) -> dict[str, Any]:
    """Keyword arguments for ``Event.objects.create``."""
    return dict(zip(COLUMNS, values(event), strict=True))


def from_model(row: Event) -> EventRecord:
    """The record of a stored Event."""
    fields = {column: getattr(row, column) for column in COLUMNS}
    fields["event_id"], fields["run_id"] = str(row.event_id), str(row.run_id)
    fields["type"] = EventType(row.type)
    fields["prev_state"], fields["next_state"] = State(row.prev_state), State(row.next_state)
    return EventRecord(**fields)


def run_state(after: RunSnapshot, *, json_text: bool = False) -> dict[str, Any]:
    """The run row's state columns after an event (column -> value)."""
    out: dict[str, Any] = {}
    for column, field in RUN_STATE:
        value = _plain(getattr(after, field))
        if column in RUN_JSON_COLUMNS:
            value = _TEXT.encode(dict(value)) if json_text else dict(value)
        out[column] = value
    return out


def apply_to_row(row: Any, after: RunSnapshot) -> None:
    """Bring a run row object up to ``after`` in place (what the compare-and-set wrote)."""
    for column, value in run_state(after).items():
        setattr(row, column, value)


def decoded(row: Mapping[str, Any]) -> dict[str, Any]:
    return {column: row[column] for column in COLUMNS}
