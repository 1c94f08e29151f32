"""The transition authority, batched: many appends to many runs in one transaction.

A bulk operation cancels thousands of runs. Through ``authority.append`` every run costs
its own transaction and commit and a dozen statements around its compare-and-set; here a
caller that already holds the runs' rows (``SELECT ... FOR UPDATE`` in its transaction)
asks for one append per run and the writes are gathered:

- each append is decided by the authority's own ``_decide`` on the locked row, exactly as
  ``append`` decides it: expected revision, guards, history limits, the hash-linked event
  with its budget snapshot, the named invariants. Nothing is re-implemented or skipped;
- the decided events are stored with one multi-row compare-and-set of the runs
  (``UPDATE ... FROM unnest(...)`` on revision and owner epoch, as ``_store`` does per run)
  and one multi-row insert of the events (on SQLite: ``_store`` per event);
- the runs they end are closed by ``terminal.close_many`` (terminal records, checkpoints,
  correlations, leases), which is what ``terminal.close`` runs for one run.

Each append is still one ordinary authorized transition with its own event and result;
the batch only shares the transaction (and so the commit). It is for writers that need
nothing else in the event's transaction (no ``within`` callback, no outbox row): the
operator's cancellations of ``runs.services.run_cancel_many``.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from fieldops import points, sql, telemetry
from kernel import clock
from runs import event_rows, terminal
from runs.authority import (
    Result,
    _Ask,
    _check_request,
    _decide,
    _LostRace,
    _store,
    _Write,
    snapshot_of,
    stored_size,
)
from runs.domain.events import RunSnapshot, apply
from runs.domain.states import Actor, EventType
from runs.models import Event, Run

log = logging.getLogger("fieldops.authority")


@dataclass(frozen=True)
class Request:
    """One append of a batch: ``run`` is the row as the caller's transaction locked it (the
    append is decided from it at its current revision, for a non-owner writer)."""

    run: Run
    type: EventType
    actor: Actor
    reason_code: str = ""
    refs: Mapping[str, str] | None = None
    payload: Mapping[str, Any] | None = None
    counters_delta: Mapping[str, int] | None = None


@dataclass(frozen=True)
class Decision:
    """The authority's decision for one request: an event to store (the requested one, or a
    control event recording a refusal) in ``write``, or a refusal that stores nothing in
    ``refused``."""

    request: Request
    snapshot: RunSnapshot
    write: _Write | None = None
    refused: Result | None = None

    @property
    def applied(self) -> bool:
        return self.write is not None and self.write.applied

    @property
    def refusal(self) -> str:
        if self.write is not None:
            return self.write.refusal
        return self.refused.refusal if self.refused is not None else ""


class StaleRow(Exception):
    """A batch's compare-and-set matched fewer rows than it wrote: a run was not held by
    the caller's transaction after all. Nothing of the batch may stand; roll it back."""


def decide_many(requests: Sequence[Request]) -> list[Decision]:
    """Decide each request as ``append`` would (``_decide`` on the caller's locked row);
    write nothing. Raise ValueError for a malformed request, as ``append`` does."""
    decisions = []
    for request in requests:
        _check_request(request.type, request.actor, request.counters_delta, request.payload)
        run = request.run
        ask = _Ask(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=request.type,
            actor=request.actor,
            reason_code=request.reason_code,
            refs=request.refs,
            payload=request.payload,
            counters_delta=request.counters_delta,
            event_id=str(uuid.uuid4()),
            within=None,
            advance_after=False,
        )
        snapshot = snapshot_of(run)
        decided = _decide(ask, run, snapshot)
        if isinstance(decided, Result):
            decisions.append(Decision(request, snapshot, refused=decided))
        else:
            decisions.append(Decision(request, snapshot, write=decided))
    return decisions


def store_many(decisions: Sequence[Decision]) -> list[Result]:
    """Store the decided events of ``decisions`` (each run at most once) and close the runs
    they end, in the caller's transaction; return each decision's result in order.

    The caller holds every run's row lock, so the compare-and-set cannot miss; if it does
    (a row that was not locked), StaleRow is raised and the caller must roll back.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("store_many writes inside the caller's transaction, under its locks")
    writes = [d for d in decisions if d.write is not None]
    if len({str(d.request.run.pk) for d in writes}) != len(writes):
        raise ValueError("a batch appends at most one event per run")
    afters = _store_writes(writes)
    closing = [
        (d.request.run, d.write.event)
        for d in writes
        if d.write is not None and d.write.applied and d.write.closes_run(d.snapshot)
    ]
    terminal.close_many(closing)
    _log(writes)
    results: list[Result] = []
    for decision in decisions:
        write = decision.write
        if write is None:
            assert decision.refused is not None
            result = decision.refused
        else:
            after = afters[str(decision.request.run.pk)]
            if write.applied:
                result = Result(True, after, event=write.event)
            else:
                result = Result(False, after, refusal=write.refusal, control=write.event)
            # Everything of this event is written and holds the run's row lock until commit.
            points.reach(f"authority.in_transaction:{write.event.type}", write.event.run_id)
        telemetry.transition_in_batch(str(decision.request.type), result)
        results.append(result)
    return results


def append_many(requests: Sequence[Request]) -> list[Result]:
    """Decide and store one append per request (runs locked by the caller's transaction),
    refusals recorded as control events exactly as ``append`` records them."""
    return store_many(decide_many(requests))


def _store_writes(writes: Sequence[Decision]) -> dict[str, RunSnapshot]:
    """The compare-and-set and insert of every decided event; each run's snapshot after."""
    afters: dict[str, RunSnapshot] = {}
    if not writes:
        return afters
    if connection.vendor != "postgresql":
        # The embedded SQLite database has one writer at a time: the per-event path.
        for decision in writes:
            assert decision.write is not None
            run, snapshot = decision.request.run, decision.snapshot
            try:
                afters[str(run.pk)] = _store(run, snapshot, decision.write.event, snapshot.revision)
            except _LostRace:
                raise StaleRow(f"run {run.pk} changed under the batch") from None
        return afters
    now = clock.now()
    runs, events, sizes = [], [], {}
    for decision in writes:
        assert decision.write is not None
        run, snapshot, event = decision.request.run, decision.snapshot, decision.write.event
        after = apply(snapshot, event)
        texts = event_rows.values(event, json_text=True)
        sizes[str(run.pk)] = size = stored_size(texts)
        runs.append(
            [
                run.pk,
                snapshot.revision,
                run.owner_epoch,
                *event_rows.run_state(after, json_text=True).values(),
                run.event_bytes + size,
            ]
        )
        events.append(texts)
        afters[str(run.pk)] = after
    with sql.batch_cursor() as cursor:
        cursor.execute(_runs_cas_sql(), [now, *sql.columns_of(runs)])
        if cursor.rowcount != len(runs):
            raise StaleRow(f"{len(runs) - cursor.rowcount} run(s) changed under the batch")
    sql.insert_many(Event, event_rows.COLUMNS, events)
    # What the compare-and-set wrote, on the caller's row objects (as ``_store`` does).
    for decision in writes:
        run = decision.request.run
        event_rows.apply_to_row(run, afters[str(run.pk)])
        run.event_bytes += sizes[str(run.pk)]
        run.updated_at = now
    return afters


@functools.cache
def _runs_cas_sql() -> str:
    """The compare-and-set of many runs: ``_store``'s ``WHERE id AND revision AND
    owner_epoch``, one row of ``unnest`` per run; the run state columns come from
    ``event_rows.RUN_STATE``, as the single path's do. Arrays travel in binary (``%b``):
    no per-element quoting on the client."""
    state = [column for column, _ in event_rows.RUN_STATE]
    arrays = ", ".join(
        ["%b::uuid[]", "%b::integer[]", "%b::integer[]"]
        + [f"%b::{sql.array_type(Run, column)}" for column in state]
        + ["%b::bigint[]"]
    )
    names = ", ".join(["cas_id", "cas_revision", "cas_epoch", *state, "event_bytes"])
    sets = ", ".join(f"{column} = {sql.unnest_value(Run, column, 'v')}" for column in state)
    # Column names are constants of runs/event_rows.py, never input.
    return (
        f"UPDATE runs_run AS r SET {sets}, event_bytes = v.event_bytes, updated_at = %s "  # noqa: S608  # nosec B608
        f"FROM unnest({arrays}) AS v({names}) "
        "WHERE r.id = v.cas_id AND r.revision = v.cas_revision AND r.owner_epoch = v.cas_epoch"
    )


def _log(writes: Sequence[Decision]) -> None:
    """One line per batch (its events are the record of each transition; a bulk cancel of
    10,000 runs need not log 10,000 lines at INFO)."""
    if not writes or not log.isEnabledFor(logging.INFO):
        return
    stored: dict[str, int] = {}
    for decision in writes:
        assert decision.write is not None
        key = str(decision.write.event.type)
        stored[key] = stored.get(key, 0) + 1
    log.info("batch of %d appends stored: %s", len(writes), stored)
