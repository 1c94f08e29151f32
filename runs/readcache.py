"""Reads of one advance, made once: the run's recorded history, evidence rows, the catalog.

An owner advancing a run asks the same questions at every turn: which observations has the
run admitted (its ``observation.recorded`` events and their evidence), which denials and
declined approvals came before, what is in the catalog. ``scope()`` (opened by the runner
around one advance) remembers the answers for that advance only:

- **The recorded history** of a run is cached *at a revision*: the events of
  ``RECORDED_TYPES`` with sequence ≤ that revision. A history is append-only and a
  revision names exactly one prefix of it, so the answer at a revision never changes. A
  read at another revision reads the database again, except that an event this process
  stored and saw committed (``roll``) moves the cache from its revision to the next.
- **Evidence rows** are immutable once stored (content-hashed): a row read or stored in
  this advance is not read again.
- **Catalog rows** for the visibility funnel (what the model is shown) are read once per
  advance. Enforcement is not cached: validation reads the catalog's lifecycle and effect
  gate at every decision (``runs.engine.inputs.capability_rules``).
- **What the latest decision showed** (``proposal.emitted``'s ``visible``) as of a
  revision: known only from an event this process stored and saw committed, and rolled
  on by its next ones like the history; any other revision reads the database.
- **Values derived from those** (``derived``: the context's scrubbed observations, made
  from immutable evidence) are kept as JSON text and decoded afresh at every use.

Outside a scope every function reads the database, as before. Nothing here writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from fieldops.sql import Loader, Statement, with_lists
from kernel.fastjson import json_copy
from runs import rows
from runs.domain.events import EventRecord
from runs.domain.states import EventType
from runs.models import Event, Evidence

# The events the context projection, validation's history and the admitted observations
# are made of.
RECORDED_TYPES: tuple[str, ...] = (
    EventType.OBSERVATION_RECORDED.value,
    EventType.PROPOSAL_DENIED.value,
    EventType.APPROVAL_DECLINED.value,
    EventType.COMPLETION_REJECTED.value,
)
RECORDED_FIELDS = ("sequence", "type", "refs", "reason_code", "payload")

# Both reads run at every advance: prepared statements (fieldops/sql.py). Column names are
# the models' own, never input.
_RECORDED_ROW = Loader(Event, RECORDED_FIELDS)
_RECORDED = Statement(
    f"SELECT {_RECORDED_ROW.columns} FROM runs_event "  # noqa: S608  # nosec B608
    f"WHERE run_id = %s AND type IN ({', '.join(['%s'] * len(RECORDED_TYPES))}) "
    "AND sequence <= %s ORDER BY sequence"
)
_EVIDENCE = Loader(Evidence)
_EVIDENCE_CHUNK = 100
_EVIDENCE_BY_IDS = f"SELECT {_EVIDENCE.columns} FROM runs_evidence WHERE id IN ({{ids}})"  # noqa: S608  # nosec B608


@dataclass
class _History:
    revision: int
    events: list[dict[str, Any]]


@dataclass
class _Decision:
    revision: int
    visible: Any


@dataclass
class Reads:
    histories: dict[str, _History] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)
    catalog: dict[str, list[Any]] = field(default_factory=dict)
    derived: dict[tuple[Any, ...], str] = field(default_factory=dict)
    decisions: dict[str, _Decision] = field(default_factory=dict)


_ACTIVE: ContextVar[Reads | None] = ContextVar("fieldops_advance_reads", default=None)


@contextmanager
def scope() -> Iterator[Reads]:
    """Cache this advance's reads (nested scopes share the outer one)."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    reads = Reads()
    token = _ACTIVE.set(reads)
    try:
        yield reads
    finally:
        _ACTIVE.reset(token)


def _committed() -> bool:
    """True when what this connection just wrote is committed (not inside a transaction
    that may still roll back)."""
    return not connection.in_atomic_block


def recorded_events(run_id: str, revision: int) -> list[dict[str, Any]]:
    """The run's events of ``RECORDED_TYPES`` with sequence ≤ ``revision``, in order, as
    dicts of ``RECORDED_FIELDS``."""
    reads = _ACTIVE.get()
    if reads is not None:
        cached = reads.histories.get(str(run_id))
        if cached is not None and cached.revision == revision:
            return cached.events
    events = [
        dict(zip(RECORDED_FIELDS, _RECORDED_ROW.load_values(row), strict=True))
        for row in _RECORDED.rows([rows.run_pk(run_id), *RECORDED_TYPES, revision])
    ]
    if reads is not None:
        reads.histories[str(run_id)] = _History(revision, events)
    return events


def latest_visible(run_id: str, revision: int, read: Callable[[], Any]) -> Any:
    """The ``visible`` of the run's latest ``proposal.emitted`` payload (None: absent) when
    its revision is ``revision``: known when this process stored that event and every
    later one up to ``revision`` (the same object at every call: read it, never change
    it); otherwise ``read()`` (the database's latest)."""
    reads = _ACTIVE.get()
    known = reads.decisions.get(str(run_id)) if reads is not None else None
    if known is not None and known.revision == revision:
        return known.visible
    return read()


def _roll_decision(reads: Reads, run_id: str, event: EventRecord) -> None:
    if not _committed():
        reads.decisions.pop(run_id, None)
    elif event.type is EventType.PROPOSAL_EMITTED:
        # As the row reads back: the JSON column through JSON.
        visible = event.payload.get("visible")
        reads.decisions[run_id] = _Decision(event.sequence, json_copy(visible))
    else:
        known = reads.decisions.get(run_id)
        if known is not None and known.revision == event.sequence - 1:
            known.revision = event.sequence
        elif known is not None:
            del reads.decisions[run_id]


def roll(event: EventRecord) -> None:
    """``event`` was stored by this process: move a history (and a latest decision)
    cached at the revision before it to the event's (or forget it when that cannot be
    proven)."""
    reads = _ACTIVE.get()
    if reads is None:
        return
    run_id = str(event.run_id)
    _roll_decision(reads, run_id, event)
    cached = reads.histories.get(run_id)
    if cached is None:
        return
    if not _committed() or cached.revision != event.sequence - 1:
        del reads.histories[run_id]
        return
    if event.type.value in RECORDED_TYPES:
        # As the row reads back: JSON columns through JSON, refs as stored.
        cached.events = [
            *cached.events,
            {
                "sequence": event.sequence,
                "type": event.type.value,
                "refs": json_copy(dict(event.refs)),
                "reason_code": event.reason_code,
                "payload": json_copy(dict(event.payload)),
            },
        ]
    cached.revision = event.sequence


def evidence_rows(ids: Iterable[str]) -> dict[str, Evidence]:
    """Evidence rows by id (ids not stored are absent)."""
    wanted = list(dict.fromkeys(i for i in ids if i))
    reads = _ACTIVE.get()
    if reads is None:
        return {e.pk: e for e in _evidence_by_ids(wanted)}
    missing = [i for i in wanted if i not in reads.evidence]
    if missing:
        for row in _evidence_by_ids(missing):
            reads.evidence[row.pk] = row
    return {i: reads.evidence[i] for i in wanted if i in reads.evidence}


def _evidence_by_ids(ids: list[str]) -> list[Evidence]:
    rows_found: list[Evidence] = []
    for start in range(0, len(ids), _EVIDENCE_CHUNK):
        chunk = ids[start : start + _EVIDENCE_CHUNK]
        statement = with_lists(_EVIDENCE_BY_IDS, ids=len(chunk))
        rows_found.extend(_EVIDENCE.load(row) for row in statement.rows(chunk))
    return rows_found


def remember_evidence(row: Evidence) -> None:
    """A row this process just stored (kept only once committed)."""
    reads = _ACTIVE.get()
    if reads is not None and _committed():
        reads.evidence[row.pk] = row


def catalog_rows(key: str, load: Callable[[], Iterable[Any]]) -> list[Any]:
    """Catalog rows for ``key``, loaded once per advance."""
    reads = _ACTIVE.get()
    if reads is None:
        return list(load())
    if key not in reads.catalog:
        reads.catalog[key] = list(load())
    return reads.catalog[key]


def derived(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """``make()``, a JSON value that depends only on ``key`` (immutable rows it names),
    made once per advance: each call returns a new value equal to ``make()``'s, key order
    and types included (it is kept as JSON text)."""
    reads = _ACTIVE.get()
    if reads is None:
        return make()
    text = reads.derived.get(key)
    if text is None:
        value = make()
        reads.derived[key] = json.dumps(value)
        return value
    return json.loads(text)


def admitted_observation_ids(events: Iterable[Mapping[str, Any]]) -> list[str]:
    return [
        e["refs"]["observation"]
        for e in events
        if e["type"] == EventType.OBSERVATION_RECORDED.value and e["refs"].get("observation")
    ]
