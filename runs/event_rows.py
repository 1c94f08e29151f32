"""The one mapping between an event record (``runs/domain/events.py``) and its stored row,
and between a run snapshot and the run row's state columns.

The authority's compare-and-set and insert, audit replay's read and the benchmark loader
all use these lists: a column added to the record is added here once.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Mapping
from typing import Any

from kernel.fastjson import plain_json_text
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


# The encoder for stored JSON text that is not plain (``json.dumps`` with ``default`` builds
# a new encoder on every call; this is on the authority's path, once per JSON column).
_TEXT = json.JSONEncoder(default=str)
# The vocabulary's enums and their text (a dict lookup costs less than ``.value``, which
# goes through the enum's descriptor); anything else is its own text.
_TEXT_OF: dict[Any, str] = {member: member.value for enum in (EventType, State) for member in enum}


def _plain(value: Any) -> Any:
    return _TEXT_OF.get(value, value)


def stored_json(payload: Mapping[str, Any]) -> str:
    """A JSON column's value as stored JSON text (what ``values(json_text=True)`` holds
    for a dict; the authority measures an event's payload with it): compact text through
    orjson when the value is plain (``kernel.fastjson.plain_json_text``: jsonb keeps the
    value, not the text), else ``json.dumps(value, default=str)``."""
    text = plain_json_text(payload)
    if text is not None:
        return text
    return _TEXT.encode(payload if type(payload) is dict else dict(payload))


# The capability-use projection (``runs.models.CapabilityUse``): its columns, and the
# event that records a use.
CAPABILITY_ID_MAX = 64


def capability_called(event: EventRecord) -> str | None:
    """The capability whose call ``event`` admitted: a ``proposal.allowed`` event's
    ``payload.capability`` (validation names it on every call it admits), else None."""
    if event.type != EventType.PROPOSAL_ALLOWED:
        return None
    capability = event.payload.get("capability")
    if type(capability) is not str or not 0 < len(capability) <= CAPABILITY_ID_MAX:
        return None
    return capability


_ROW = operator.attrgetter(*COLUMNS)
_ENUM_AT = tuple(i for i, column in enumerate(COLUMNS) if column in ENUM_COLUMNS)
_JSON_AT = tuple(i for i, column in enumerate(COLUMNS) if column in JSON_COLUMNS)
_PAYLOAD_AT = COLUMNS.index("payload")


def values(
    event: EventRecord, *, json_text: bool = False, payload_text: str | None = None
) -> list[Any]:
    """The event's column values in COLUMNS order: enums as their text, JSON columns as
    dicts (or as JSON text with ``json_text``, for SQL and COPY).

    ``payload_text``: the payload's JSON text when the caller already has it (exactly
    ``stored_json(dict(event.payload))``); used with ``json_text`` instead of encoding
    the payload again."""
    out = list(_ROW(event))
    for i in _ENUM_AT:  # only these columns hold the vocabulary's enums (EventRecord's types)
        out[i] = _plain(out[i])
    for i in _JSON_AT:
        if not json_text:
            out[i] = dict(out[i])
        elif i == _PAYLOAD_AT and payload_text is not None:
            out[i] = payload_text
        else:
            out[i] = stored_json(out[i])
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


_RUN_STATE = operator.attrgetter(*(field for _, field in RUN_STATE))
_RUN_COLUMNS = tuple(column for column, _ in RUN_STATE)
_STATE_AT = _RUN_COLUMNS.index("state")  # the one enum among them (RunSnapshot's types)
_RUN_JSON_AT = tuple(i for i, column in enumerate(_RUN_COLUMNS) if column in RUN_JSON_COLUMNS)


def run_state(after: RunSnapshot, *, json_text: bool = False) -> dict[str, Any]:
    """The run row's state columns after an event (column -> value)."""
    row = list(_RUN_STATE(after))
    row[_STATE_AT] = _plain(row[_STATE_AT])
    for i in _RUN_JSON_AT:
        row[i] = stored_json(row[i]) if json_text else dict(row[i])
    return dict(zip(_RUN_COLUMNS, row, strict=True))


def state_changes(before: RunSnapshot, after: RunSnapshot) -> dict[str, Any]:
    """The run row's state columns that an event changes from ``before`` to ``after``:
    column -> value after it (the state as its text, JSON columns as dicts), in RUN_STATE
    order; the revision always.

    Only the authority writes these columns, each time with a new revision, so a row that
    the compare-and-set finds at ``before``'s revision holds ``before`` in every column:
    writing the changed ones writes ``run_state(after)``."""
    changes: dict[str, Any] = {}
    for column, old, new in zip(_RUN_COLUMNS, _RUN_STATE(before), _RUN_STATE(after), strict=True):
        if new != old:
            changes[column] = dict(new) if column in RUN_JSON_COLUMNS else _plain(new)
    return changes


def state_params(
    changes: Mapping[str, Any], *, event: EventRecord, event_texts: list[Any]
) -> list[Any]:
    """The SQL parameters of ``state_changes`` (JSON as text), for the event stored with
    them (``event_texts``: its ``values(event, json_text=True)``).

    The run's counters after an event are the event's budget (``apply``): when they are
    equal, the budget's text is reused. The limits change only with a budget change: their
    text is kept from the last append that had the same limits."""
    out = []
    for column, value in changes.items():
        if column == "counters":
            value = event_texts[_BUDGET_AT] if value == event.budget else stored_json(value)
        elif column == "budget_limits":
            value = _limits_text(value)
        out.append(value)
    return out


_BUDGET_AT = COLUMNS.index("budget")
# The last limits encoded and their text (one entry: a run's limits rarely change).
_last_limits: tuple[dict[str, Any], str] = ({}, "{}")


def _limits_text(limits: Mapping[str, Any]) -> str:
    global _last_limits
    held, text = _last_limits
    if type(limits) is dict and limits == held:
        return text
    text = stored_json(limits)
    _last_limits = (dict(limits), text)
    return text


def apply_to_row(row: Any, after: RunSnapshot, *, state: Mapping[str, Any] | None = None) -> None:
    """Bring a run row object up to ``after`` in place (what the compare-and-set wrote);
    ``state``: ``run_state(after)`` if the caller already made it."""
    for column, value in (run_state(after) if state is None else state).items():
        setattr(row, column, value)


def decoded(row: Mapping[str, Any]) -> dict[str, Any]:
    return {column: row[column] for column in COLUMNS}
