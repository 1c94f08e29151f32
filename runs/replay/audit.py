"""Audit replay of a stored run: load its events and fold them (no policy, no capability)."""

from __future__ import annotations

import gc
import json
import json.scanner
import queue
import threading
import uuid
from collections.abc import Generator, Iterator
from contextlib import closing
from typing import Any

from django.db import connection, transaction

from kernel.fastjson import JsonFloat, digest_of_decoded
from runs import event_rows
from runs.authority import config_of
from runs.domain.events import EventRecord, record_of_values
from runs.domain.replay import Finding, ReplayResult, compare_with_stored, replay
from runs.domain.states import EventType, State
from runs.models import CapabilityUse, Event, Evidence, Run

# Every column but run_id (the caller knows it), in EventRecord's order (event_rows.COLUMNS).
_READ_COLUMNS = tuple(c for c in event_rows.COLUMNS if c != "run_id")
# The event id comes as text (CAST works on PostgreSQL and SQLite): turning psycopg's UUID
# objects back into text cost more per event than the cast costs the server.
_SELECT = ", ".join("CAST(event_id AS text)" if c == "event_id" else c for c in _READ_COLUMNS)
# Column names are constants of event_rows, never input.
_ROWS_SQL = (
    f"SELECT {_SELECT} FROM runs_event "  # noqa: S608  # nosec B608
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


# Rows fetched per round trip from the server-side cursor: what one replay holds at most.
CHUNK_ROWS = 2000


def stored_records(run: Run, *, chunk: int = CHUNK_ROWS) -> Iterator[EventRecord]:
    """The run's events as records, in stored order; UndecodableEvent on a corrupt row.

    Read with one plain cursor (no model instances) and JSON decoded here: audit replay
    reads every event of a run, so the per-row cost matters.
    """
    for records, _ in stored_chunks(run, chunk=chunk):
        yield from records


def stored_chunks(
    run: Run, *, chunk: int = CHUNK_ROWS
) -> Generator[tuple[list[EventRecord], Exception | None], None, None]:
    """The run's events, ``chunk`` rows per round trip, as decoded records; a chunk that
    holds an undecodable row ends the stream with that row's error (records before it
    are still given).

    On PostgreSQL the rows come through a server-side (named) cursor inside one
    transaction, and the next chunk is fetched while the caller verifies this one
    (``_ReadAhead``): at most three chunks are ever in this process, however long the
    history.
    """
    run_id = str(run.pk)
    key = Event._meta.get_field("run").get_db_prep_value(run.pk, connection)
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        cursor.execute(_ROWS_SQL, [key])
        ahead = _ReadAhead(cursor, chunk) if connection.vendor == "postgresql" else None
        try:
            chunks = iter(ahead) if ahead is not None else iter(lambda: cursor.fetchmany(chunk), [])
            for rows in chunks:
                records: list[EventRecord] = []
                try:
                    for row in rows:
                        records.append(_record(run_id, row))
                except UndecodableEvent as exc:
                    yield records, exc
                    return
                yield records, None
        finally:
            if ahead is not None:
                ahead.close()  # before the cursor closes: the thread is done with it


class _ReadAhead:
    """Fetches the next chunk of a server-side cursor while the caller works on this one.

    Audit replay is CPU work on this side (decode, hash, fold) and waiting on the other
    (the server reads the rows and writes their JSON as text): one thread issues the next
    FETCH as soon as the caller has taken a chunk, so the server's part of it overlaps the
    verification of the one before. The queue holds one chunk, so at most three are in
    memory (verified, queued, being fetched). The thread only calls the named cursor's
    ``fetchmany``; psycopg serializes it with the caller's own queries on the connection
    (the evidence lookup per chunk). A failure in the thread is raised to the caller.
    """

    _POLL_S = 0.05

    def __init__(self, cursor: Any, chunk: int) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._fetch, args=(cursor, chunk), name="audit-read-ahead", daemon=True
        )
        self._thread.start()

    def _fetch(self, cursor: Any, chunk: int) -> None:
        try:
            while not self._stop.is_set():
                rows = cursor.fetchmany(chunk)
                self._hand_over(rows)
                if not rows:
                    return
        except BaseException as exc:  # whatever it is, the caller raises it
            self._hand_over(exc)

    def _hand_over(self, item: Any) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=self._POLL_S)
                return
            except queue.Full:
                continue

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        while True:
            item = self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if not item:
                return
            yield item

    def close(self) -> None:
        """Stop fetching and wait for the thread (at most the FETCH under way)."""
        self._stop.set()
        self._thread.join()


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
        if len(event_id) != 36:  # SQLite stores 32 hex digits
            fields[_EVENT_ID] = str(uuid.UUID(event_id))
    except (KeyError, ValueError) as exc:  # a stored value outside the vocabulary: corruption
        raise UndecodableEvent(sequence, f"not a known value: {str(exc)[:200]}") from exc
    try:
        for i in _JSON:
            fields[i] = _json(fields[i])
    except ValueError as exc:  # undecodable JSON: corruption
        raise UndecodableEvent(sequence, str(exc)[:200]) from exc
    return _event_record(fields)


# ``EventRecord(*fields)`` without the frozen dataclass's per-field ``object.__setattr__``.
_event_record = record_of_values


# The C scanner behind json.loads, called directly: the stored text of a JSON column has no
# surrounding whitespace, so the wrapper's two whitespace scans per value are skipped.
# Floats are read as JsonFloat (a plain float to everything else), which is what lets the
# content hash take the fast encoder (``kernel.fastjson.canonical_bytes_of_decoded``).
_DECODER = json.JSONDecoder(parse_float=JsonFloat)
_SCAN = json.scanner.make_scanner(_DECODER)


def _json(value: Any) -> Any:
    if type(value) is str:
        try:
            decoded, end = _SCAN(value, 0)
        except StopIteration:
            decoded, end = None, -1
        if end == len(value):
            return decoded
        return _DECODER.decode(value)  # anything unusual: the full decoder decides (or raises)
    if isinstance(value, bytes):
        return _DECODER.decode(value.decode("utf-8"))
    # A driver that hands over decoded JSON: read it back through its text, so that its
    # floats are JsonFloat too.
    return _DECODER.decode(json.dumps(value))


def stored_content_hash(record: EventRecord) -> str:
    """The content hash of a record read by ``stored_chunks`` (its JSON decoded by
    ``_json``): ``record.recomputed_content_hash()``, through the fast encoder that such
    decoded values allow."""
    return digest_of_decoded(record.content())


class _Stream:
    """The run's records, chunk by chunk, and the evidence the current chunk references.

    The fold consumes the records as they come (``records``); before each chunk is handed
    over, the evidence ids it references are looked up (one query per chunk) into
    ``evidence``, which the fold consults for exactly those events. Nothing of an earlier
    chunk is kept: memory does not grow with the history.
    """

    def __init__(self, run: Run, chunk: int) -> None:
        self.run = run
        self.chunk = chunk
        self.evidence: set[str] = set()
        self.undecodable: Finding | None = None
        # Each capability's first admitted call, as the events read so far record it
        # (``CapabilityUse`` must say the same): one entry per capability, not per event.
        self.called: dict[str, int] = {}

    def records(self) -> Generator[EventRecord, None, None]:
        with closing(stored_chunks(self.run, chunk=self.chunk)) as chunks:
            yield from self._records(chunks)

    def _records(
        self, chunks: Iterator[tuple[list[EventRecord], Exception | None]]
    ) -> Iterator[EventRecord]:
        for records, error in chunks:
            referenced = {ref for record in records for ref in record.refs.values() if ref}
            self.evidence.clear()
            if referenced:
                self.evidence.update(
                    Evidence.objects.filter(run=self.run, id__in=referenced).values_list(
                        "id", flat=True
                    )
                )
            for record in [r for r in records if r.type == EventType.PROPOSAL_ALLOWED]:
                capability = event_rows.capability_called(record)
                if capability is not None:
                    self.called.setdefault(capability, record.sequence)
            yield from records
            if isinstance(error, UndecodableEvent):
                self.undecodable = Finding("undecodable_event", error.sequence, str(error))


def audit_replay(run: Run, *, chunk: int = CHUNK_ROWS) -> tuple[ReplayResult, list[Finding]]:
    """Return the replay result and every finding, including disagreements with the row.

    The history is streamed (``stored_chunks``) and verified as it is read: hashes,
    links, invariants and evidence references of each event, then the next; memory stays
    that of one chunk whatever the history's length.
    """
    # Loading and folding allocate many short-lived objects and no cycles: pausing the
    # cyclic collector for their duration saves its repeated full traversals.
    collecting = gc.isenabled()
    gc.disable()
    stream = _Stream(run, chunk)
    records = stream.records()
    try:
        result = replay(
            config_of(run),
            records,
            evidence_ids=stream.evidence,
            ordered=True,
            content_hash=stored_content_hash,
        )
    finally:
        records.close()  # a fold that stopped early ends the read (and its transaction)
        if collecting:
            gc.enable()
    undecodable = stream.undecodable
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
        findings.extend(_capability_uses(run, stream.called))
    return result, findings


def _capability_uses(run: Run, called: dict[str, int]) -> list[Finding]:
    """Disagreements between the run's ``CapabilityUse`` rows (the runs list's capability
    filter reads them) and the first admitted call of each capability its events record."""
    stored = dict(
        CapabilityUse.objects.filter(run=run).values_list("capability_id", "first_sequence")
    )
    findings = []
    for capability in sorted(called.keys() | stored.keys()):
        recorded, use = called.get(capability), stored.get(capability)
        if recorded != use:
            findings.append(
                Finding(
                    "capability_use_mismatch",
                    recorded or use or 0,
                    f"{capability}: first admitted call at sequence {recorded}, "
                    f"capability use row says {use}",
                )
            )
    return findings
