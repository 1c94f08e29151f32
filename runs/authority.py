"""The transition authority: the only code that changes a run's state.

Each transition is one database transaction: check expected revision and owner epoch,
check non-terminal, check the edge exists, check budgets and history size, assert the
named invariants, append the hash-linked event, and compare-and-set the run row
(``revision+1``). When a guard fails, a control event is appended instead and state is
left unchanged. Concurrent writers race on the revision; exactly one wins.

Callers never hold a transaction across a capability or model call: they call
``append`` after the I/O, with the revision they started from.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    OperationalError,
    connections,
    transaction,
)
from django.dispatch import receiver

from fieldops import points, telemetry
from fieldops.db import lock_wait_failed
from fieldops.sql import binding_cursor, execute_prepared
from kernel import clock, retry
from kernel.fastjson import json_copy
from runs import event_rows, evidence, outbox, terminal
from runs.domain import guards, invariants
from runs.domain.events import EventRecord, RunConfig, RunSnapshot, apply, build_event
from runs.domain.states import (
    CONTROL_EVENTS,
    Actor,
    EventType,
    State,
    is_terminal,
)
from runs.domain.transitions import edge
from runs.models import CapabilityUse, Event, Run

log = logging.getLogger("fieldops.authority")

Within = Callable[[Run, EventRecord], None]


@dataclass(frozen=True)
class Result:
    """What became of a requested append.

    ``applied``: the requested event was appended. Otherwise ``refusal`` names the reason
    and ``control`` is the control event recorded for it (None for a plain revision
    conflict, which records nothing: the caller re-reads and decides again).
    """

    applied: bool
    snapshot: RunSnapshot
    event: EventRecord | None = None
    refusal: str = ""
    control: EventRecord | None = None

    @property
    def conflict(self) -> bool:
        return self.refusal == "revision_conflict"

    @property
    def stale_owner(self) -> bool:
        return self.refusal == "stale_owner"

    @property
    def busy(self) -> bool:
        """Another transaction held the run past the lock timeout; nothing was written."""
        return self.refusal == "busy"


class IntegrityConflict(Exception):
    """The same event id was offered with different content: the run must stop."""


class Refused(Exception):
    """Raised by a ``within`` callback when what the event records no longer holds (e.g.
    the effect attempt it settles was settled by someone else): the whole append is rolled
    back and answered as a refusal with ``reason``; nothing is written."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def _new_event_id() -> str:
    """``str(uuid.uuid4())`` at half the cost (every append names its event): the same 122
    random bits with the version-4 and RFC 4122 variant bits set, in the same text form."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def config_of(run: Run) -> RunConfig:
    return RunConfig(
        run_id=str(run.pk),
        task_id=run.task_id,
        contract_version=run.contract_version,
        policy_version=run.policy_version,
        model_adapter_version=run.model_adapter_version,
        component_set=run.component_set,
        tenant=run.tenant,
        principal_ref=run.principal_ref,
        scope=tuple(run.scope),
        limits=dict(run.limits),
        deadline=clock.iso(run.deadline),
        created_at=clock.iso(run.created_at),
    )


def _held_config(run: Run) -> RunConfig:
    """The run's configuration, built once per row object and kept on it.

    A run's configuration is fixed at creation (nothing assigns these columns afterwards),
    so the row a runner holds across its appends needs it built only once. The kept copy
    is used only while the row still shows the same id and pinned versions, the fields
    an event carries; anything else rebuilds it.
    """
    held = run.__dict__.get("_fieldops_config")
    key = (run.id, run.contract_version, run.policy_version, run.component_set)
    if held is not None and held[0] == key:
        return held[1]  # type: ignore[no-any-return]
    config = config_of(run)
    run.__dict__["_fieldops_config"] = (key, config)
    return config


_NEW = object.__new__
_STATE_OF = {state.value: state for state in State}


def snapshot_of(run: Run, *, config: RunConfig | None = None) -> RunSnapshot:
    """The run row as a snapshot (``config``: the run's immutable configuration, if the
    caller already has it).

    Built like ``RunSnapshot(...)`` but without the frozen dataclass's per-field
    ``object.__setattr__`` (every append builds one; the result is equal, tests check it).
    """
    snapshot: RunSnapshot = _NEW(RunSnapshot)
    snapshot.__dict__.update(
        config=config or _held_config(run),
        state=_STATE_OF.get(run.state) or State(run.state),
        revision=run.revision,
        attempt=run.attempt,
        owner_epoch=run.owner_epoch,
        counters=dict(run.counters),
        limits=dict(run.budget_limits),
        cancel_revision=run.cancel_revision,
        last_hash=run.last_hash,
        disposition=run.disposition,
        terminal_reason=run.terminal_reason,
        terminal_sequence=run.terminal_record.deciding_sequence
        if run.disposition and hasattr(run, "terminal_record")
        else 0,
        waiting_checkpoint=run.waiting_checkpoint,
        waiting_correlation=run.waiting_correlation,
        current_proposal=run.current_proposal,
        pending_observation=run.pending_observation,
    )
    return snapshot


def elapsed_ms(run: Run, *, now: dt.datetime | None = None) -> int:
    """The run's elapsed time for its next event: the time since it was created, or, once
    it has ended, the time of its end (its final counters: a late event recorded as
    rejected afterwards adds nothing to them)."""
    if is_terminal(run.state):
        return int(run.counters.get("elapsed_ms", 0))
    return max(0, int(((now or clock.now()) - run.created_at).total_seconds() * 1000))


@telemetry.traced_transition
def append(
    *,
    run_id: str,
    expected_revision: int,
    expected_epoch: int | None,
    type: EventType,
    actor: Actor,
    reason_code: str = "",
    refs: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    counters_delta: Mapping[str, int] | None = None,
    event_id: str | None = None,
    within: Within | None = None,
    advance_after: bool = False,
    run: Run | None = None,
    evidence: Sequence[evidence.Made] = (),
) -> Result:
    """Append one event to a run under compare-and-set; see the module docstring.

    ``expected_epoch`` is the caller's ownership epoch (None for non-owner writers such as
    approvers, operators and the clock). ``within`` runs inside the same transaction after
    the event is stored (checkpoints, dispatch records, ...). ``advance_after`` puts the
    run in the outbox, committed with the event, to be advanced after commit (as a resume:
    a waiting run someone answered, handed over ahead of queued work).

    ``run`` is the caller's copy of the run row, read at ``expected_revision``: the
    authority decides from it instead of reading the row again. The compare-and-set on
    revision and epoch proves the copy was current; when it fails, the authority re-reads
    the row and decides again, exactly as without ``run``. An applied event brings the
    caller's row up to date in place.

    ``evidence``: evidence rows the event references, made but not yet written
    (``evidence.make``): they are written by the same statement as the event, or the
    control event recording a refusal (each row at most once, so a retried append may
    offer them again). A refusal that stores nothing writes them only when it lost a
    race to another writer: an unreferenced evidence row, as one stored before a failed
    append always could be.
    """
    if event_id is not None:
        prior = _prior_result(event_id, run_id, type, reason_code, refs, payload)
        if prior is not None:
            return prior
    payload_text = _check_request(type, actor, counters_delta, payload)
    ask = _Ask(
        run_id=run_id,
        expected_revision=expected_revision,
        expected_epoch=expected_epoch,
        type=type,
        actor=actor,
        reason_code=reason_code,
        refs=refs,
        payload=payload,
        counters_delta=counters_delta,
        event_id=event_id or _new_event_id(),
        within=within,
        advance_after=advance_after,
        payload_text=payload_text,
        evidence=evidence,
    )
    result: Result | None = None
    try:
        if (
            run is not None
            and run.revision == expected_revision
            and _held_config(run).run_id == str(run_id)
        ):
            result = _decide_from_copy(ask, run)
        if result is None:
            result = _decide_from_row(ask)
    except OperationalError as exc:
        if not lock_wait_failed(exc):
            raise
        # Another transaction (a stalled worker, say) holds the run's row past the lock
        # timeout: nothing was written; the caller decides when to ask again.
        log.warning("append busy: the run is locked", extra={"run_id": run_id})
        return Result(False, snapshot_of(Run.objects.get(pk=run_id)), refusal="busy")
    if result.applied and result.event is not None and log.isEnabledFor(logging.INFO):
        # A production worker logs at WARNING: the record's fields are only gathered when
        # they will be written.
        event = result.event
        log.info(
            "%s",
            event.type,
            extra={
                "run_id": run_id,
                "attempt": event.attempt,
                "owner_epoch": event.owner_epoch,
                "sequence": event.sequence,
                "event_type": str(event.type),
                "reason_code": event.reason_code,
                "state": str(event.next_state),
            },
        )
    return result


@dataclass(slots=True)
class _Ask:
    """One append request, as the caller made it (never changed once made; not frozen,
    because a frozen dataclass pays ``object.__setattr__`` per field on every append).

    ``payload_text``: the payload as stored JSON text, when ``_check_request`` already
    encoded it to measure it (the store reuses it instead of encoding it again)."""

    run_id: str
    expected_revision: int
    expected_epoch: int | None
    type: EventType
    actor: Actor
    reason_code: str
    refs: Mapping[str, str] | None
    payload: Mapping[str, Any] | None
    counters_delta: Mapping[str, int] | None
    event_id: str
    within: Within | None
    advance_after: bool
    payload_text: str | None = None
    evidence: Sequence[evidence.Made] = ()


@dataclass(slots=True)
class _Write:
    """What the authority decided to store: the requested event, or a control event (never
    changed once made; not frozen, for the same reason as ``_Ask``).

    ``payload_text``: the event's payload as stored JSON text, when it is already known
    (the requested payload, encoded once by ``_check_request``); ``at``: the clock reading
    the event's time came from (the row's ``updated_at`` too), when the decision took one."""

    event: EventRecord
    applied: bool
    refusal: str = ""
    within: Within | None = None
    advance_after: bool = False
    payload_text: str | None = None
    at: dt.datetime | None = None
    evidence: Sequence[evidence.Made] = ()

    def closes_run(self, snapshot: RunSnapshot) -> bool:
        return self.event.next_state is not snapshot.state and is_terminal(self.event.next_state)


class _LostRace(Exception):
    """A compare-and-set matched no row (or the event collided): nothing was stored."""


def _decide_from_row(ask: _Ask) -> Result:
    """Read the row inside the transaction, decide, store; a lost race stores nothing."""
    try:
        with transaction.atomic():
            run = Run.objects.get(pk=ask.run_id)
            snapshot = snapshot_of(run)
            decision = _decide(ask, run, snapshot)
            if isinstance(decision, Result):
                return decision
            try:
                return _write(run, snapshot, decision)
            except _LostRace:
                # Roll back this transaction (or savepoint): nothing was written in it.
                raise _Lost(_lost_result(run, snapshot, decision)) from None
    except _Lost as lost:
        return lost.result
    except Refused as refused:
        return Result(False, snapshot_of(Run.objects.get(pk=ask.run_id)), refusal=refused.reason)


class _Lost(Exception):
    def __init__(self, result: Result) -> None:
        self.result = result


def _lost_result(run: Run, snapshot: RunSnapshot, decision: _Write) -> Result:
    if decision.applied:
        return Result(False, snapshot, refusal="revision_conflict")
    # A refusal whose control event lost the race: the refusal stands, unrecorded.
    return Result(False, snapshot_of(run), refusal=decision.refusal, control=None)


def _decide_from_copy(ask: _Ask, run: Run) -> Result | None:
    """Decide from the caller's row; None when it proved out of date (re-read then).

    Only decisions that store an event are taken here, because only the compare-and-set
    of a stored event proves the copy was current. On PostgreSQL an event that needs
    nothing else in its transaction is one statement in autocommit: one round trip.
    """
    snapshot = snapshot_of(run)
    decision = _decide(ask, run, snapshot)
    if isinstance(decision, Result):
        return None
    db = connections[DEFAULT_DB_ALIAS]  # once: each ``connection.x`` looks the wrapper up
    alone = (
        db.vendor == "postgresql"
        and not db.in_atomic_block
        and (db.autocommit if db.connection is not None else db.get_autocommit())
        and decision.within is None
        and not decision.advance_after
        and not decision.closes_run(snapshot)
    )
    try:
        if alone:
            return _write(run, snapshot, decision, db)
        with transaction.atomic():
            return _write(run, snapshot, decision, db)
    except _LostRace:
        return None
    except Refused as refused:
        return Result(False, snapshot_of(Run.objects.get(pk=ask.run_id)), refusal=refused.reason)


def _decide(ask: _Ask, run: Run, snapshot: RunSnapshot) -> _Write | Result:
    """The authority's decision for ``ask`` on ``run`` as read: what to store, if anything."""
    type, actor, reason_code = ask.type, ask.actor, ask.reason_code
    refs, payload, counters_delta = ask.refs, ask.payload, ask.counters_delta
    within, advance_after = ask.within, ask.advance_after
    if ask.expected_epoch is not None and run.owner_epoch != ask.expected_epoch:
        control = _control(
            run,
            snapshot,
            EventType.STALE_OWNER_REJECTED,
            Actor.HARNESS,
            "stale_owner",
            payload={
                "attempted": str(type),
                "attempted_epoch": ask.expected_epoch,
                "current_epoch": run.owner_epoch,
                "refs": dict(refs or {}),
            },
        )
        if control is None:
            return Result(False, snapshot, refusal="stale_owner", control=None)
        return _Write(control, applied=False, refusal="stale_owner", evidence=ask.evidence)
    if run.revision != ask.expected_revision:
        return Result(False, snapshot, refusal="revision_conflict")
    refusal = guards.refusal(snapshot, type, actor, refs, counters_delta)
    if refusal is not None:
        control_type, reason = refusal
        control = _control(
            run,
            snapshot,
            control_type,
            Actor.HARNESS,
            reason,
            payload={
                "attempted": str(type),
                "attempted_reason": reason_code,
                "refs": dict(refs or {}),
                "detail": dict(payload or {}),
            },
        )
        if control is None:
            return Result(False, snapshot, refusal=reason, control=None)
        return _Write(control, applied=False, refusal=reason, evidence=ask.evidence)
    payload_text = ask.payload_text
    limits = _limits()
    size_reason = guards.history_refusal(snapshot, type, event_bytes=run.event_bytes, limits=limits)
    if size_reason is not None:
        type, actor, reason_code, refs, payload = (
            EventType.RUN_FAILED,
            Actor.HARNESS,
            size_reason,
            {},
            {"refused": str(type)},
        )
        counters_delta, within, payload_text = None, None, None
    target = run.state if type in CONTROL_EVENTS else edge(run.state, type).target  # type: ignore[union-attr]
    now = clock.now()
    event = build_event(
        snapshot,
        event_id=ask.event_id,
        type=type,
        actor=actor,
        next_state=_STATE_OF.get(target) or State(target),
        occurred_at=clock.iso(now),
        counters_delta=counters_delta,
        elapsed_ms=elapsed_ms(run, now=now),
        reason_code=reason_code,
        refs=refs,
        payload=payload,
    )
    invariants.assert_invariants(snapshot, event)
    return _Write(
        event,
        applied=True,
        within=within,
        advance_after=advance_after,
        payload_text=payload_text,
        at=now,
        evidence=ask.evidence,
    )


def _write(run: Run, snapshot: RunSnapshot, decision: _Write, db: Any = None) -> Result:
    """Store the decided event under compare-and-set and everything that goes with it
    (``db``: the default connection's wrapper, if the caller already looked it up).

    Raise _LostRace when the compare-and-set fails; the caller rolls back.
    """
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    event = decision.event
    after = _store(
        run,
        snapshot,
        event,
        snapshot.revision,
        payload_text=decision.payload_text,
        db=db,
        now=decision.at,
        made=decision.evidence,
    )
    if not decision.applied:
        log.info(
            "%s",
            event.type,
            extra={
                "run_id": str(run.pk),
                "sequence": event.sequence,
                "event_type": str(event.type),
                "reason_code": event.reason_code,
            },
        )
        return Result(
            False, snapshot_of(run, config=snapshot.config), refusal=decision.refusal, control=event
        )
    if decision.closes_run(snapshot):
        terminal.close(run, event)
    if decision.within is not None:
        decision.within(run, event)
    if decision.advance_after:  # a waiting run answered: handed over ahead of queued work
        outbox.put(run_id=str(run.pk), kind=outbox.RESUME)
    if db.in_atomic_block:
        # Everything of this event is written and holds the run's row lock until commit.
        points.reach(f"authority.in_transaction:{event.type}", str(run.pk))
    if decision.within is None:
        # The compare-and-set wrote exactly ``after``: no need to rebuild it from the row.
        return Result(True, after, event=event)
    return Result(True, snapshot_of(run, config=snapshot.config), event=event)


def _integrity_stop(run: Run, event_id: str) -> None:
    """A reused event id with different content: the run fails (in the caller's txn)."""
    snapshot = snapshot_of(run)
    if not is_terminal(run.state):
        event = build_event(
            snapshot,
            event_id=str(uuid.uuid4()),
            type=EventType.RUN_FAILED,
            actor=Actor.HARNESS,
            next_state=State.FAILED,
            occurred_at=clock.iso(clock.now()),
            elapsed_ms=elapsed_ms(run),
            reason_code="event_integrity_conflict",
            payload={"event_id": event_id},
        )
        invariants.assert_invariants(snapshot, event)
        _store(run, snapshot, event, snapshot.revision)
        terminal.close(run, event)


def append_control(
    *,
    run_id: str,
    type: EventType,
    actor: Actor,
    reason_code: str,
    refs: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    within: Within | None = None,
) -> EventRecord | None:
    """Append a control event at whatever revision the run is now, riding out races.

    Return the event, or None when it was not recorded: refused (``within`` refused, or the
    run is busy), or the run kept changing for ``retry.RACE_RETRIES`` attempts in a row
    (logged; the caller decides).
    """
    assert type in CONTROL_EVENTS

    def attempt() -> EventRecord | Result | None:
        run = Run.objects.get(pk=run_id)
        result = append(
            run_id=run_id,
            expected_revision=run.revision,
            expected_epoch=None,
            type=type,
            actor=actor,
            reason_code=reason_code,
            refs=refs,
            payload=payload,
            within=within,
        )
        if result.applied and result.event is not None:
            return result.event
        return None if result.conflict else result

    outcome = retry.until_settled(attempt, what=f"record {type} on {run_id}")
    if isinstance(outcome, EventRecord):
        return outcome
    if isinstance(outcome, Result):
        log.info("control event refused: %s", outcome.refusal, extra={"run_id": run_id})
    return None


@dataclass(frozen=True)
class _Settings:
    """The settings an append reads, read once (Django's lazy settings object costs a
    Python-level lookup per attribute, six per append) and read again whenever a setting
    changes (``setting_changed``: ``override_settings`` and the tests' ``settings``)."""

    limits: guards.HistoryLimits
    max_payload_bytes: int
    prepared_statements: bool


_settings: _Settings | None = None


def _current() -> _Settings:
    global _settings
    held = _settings
    if held is None:
        held = _settings = _Settings(
            limits=guards.HistoryLimits(
                max_events=settings.FIELDOPS_HISTORY_MAX_EVENTS,
                max_bytes=settings.FIELDOPS_HISTORY_MAX_BYTES,
                warn_events=settings.FIELDOPS_HISTORY_WARN_EVENTS,
                warn_bytes=settings.FIELDOPS_HISTORY_WARN_BYTES,
            ),
            max_payload_bytes=settings.FIELDOPS_MAX_EVENT_PAYLOAD_BYTES,
            prepared_statements=settings.FIELDOPS_PREPARED_STATEMENTS,
        )
    return held


@receiver(setting_changed)
def _forget_settings(**_: Any) -> None:
    global _settings
    _settings = None


def _limits() -> guards.HistoryLimits:
    return _current().limits


def _check_request(
    type: EventType,
    actor: Actor,
    delta: Mapping[str, int] | None,
    payload: Mapping[str, Any] | None,
) -> str | None:
    """Reject malformed requests from code (not from people) before anything is written.

    Return the payload's stored JSON text when measuring it produced it (see
    ``_check_payload_size``), else None."""
    if type in CONTROL_EVENTS:
        if delta and any(delta.values()):
            raise ValueError("control events never change counters")
        if actor is Actor.MODEL:
            raise ValueError("a model only proposes; control events are recorded by the harness")
    return _check_payload_size(payload)


def _check_payload_size(payload: Mapping[str, Any] | None) -> str | None:
    """Refuse a payload whose stored text is over the limit; return that text.

    The measure is the payload's stored JSON text (``event_rows.stored_json``). For a
    plain dict that text is exactly what the event row will hold (the event's payload is
    a copy of it), so it is returned for the store to reuse; for any other mapping None
    (the row's text is then made from the event's own copy)."""
    if not payload:
        return None
    text = event_rows.stored_json(payload)
    if len(text) > _current().max_payload_bytes:
        raise ValueError("event payload over 256 KB: store it as evidence and reference it")
    return text if type(payload) is dict else None


def _prior_result(
    event_id: str,
    run_id: str,
    type: EventType,
    reason_code: str,
    refs: Mapping[str, str] | None,
    payload: Mapping[str, Any] | None,
) -> Result | None:
    """Same event id again: identical content returns the prior result; different content
    is an integrity conflict that stops the run (then IntegrityConflict is raised)."""
    prior = Event.objects.filter(event_id=event_id).first()
    if prior is None:
        return None
    same = (
        str(prior.run_id) == str(run_id)
        and prior.type == str(type)
        and prior.reason_code == reason_code
        and prior.refs == {k: str(v) for k, v in (refs or {}).items() if v}
        and prior.payload == json_copy(dict(payload or {}))
    )
    if same:
        return Result(True, snapshot_of(Run.objects.get(pk=run_id)), event=record_of(prior))
    with transaction.atomic():
        _integrity_stop(Run.objects.get(pk=run_id), event_id)
    raise IntegrityConflict(f"event {event_id} was offered again with different content")


def _control(
    run: Run,
    snapshot: RunSnapshot,
    type: EventType,
    actor: Actor,
    reason: str,
    payload: Mapping[str, Any],
) -> EventRecord | None:
    """The control event recording a refusal at the run's current revision (None when the
    history is full: the refusal then stands unrecorded)."""
    if not guards.control_fits(snapshot, type, event_bytes=run.event_bytes, limits=_limits()):
        log.warning("control event dropped: history full", extra={"run_id": str(run.pk)})
        return None
    event = build_event(
        snapshot,
        event_id=str(uuid.uuid4()),
        type=type,
        actor=actor,
        next_state=snapshot.state,
        occurred_at=clock.iso(clock.now()),
        elapsed_ms=elapsed_ms(run),
        reason_code=reason,
        payload=payload,
    )
    invariants.assert_invariants(snapshot, event)
    return event


def _store(
    run: Run,
    snapshot: RunSnapshot,
    event: EventRecord,
    expected_revision: int,
    *,
    payload_text: str | None = None,
    db: Any = None,
    now: dt.datetime | None = None,
    made: Sequence[evidence.Made] = (),
) -> RunSnapshot:
    """Compare-and-set the run row from ``revision`` to the event's and insert the event;
    return the run's snapshot after it (what the compare-and-set wrote). ``payload_text``:
    the event's payload as stored JSON text, if the caller already encoded it; ``db``: the
    default connection's wrapper, if the caller already looked it up; ``now``: the clock
    reading the event was made at (the row's ``updated_at``), if the caller took one;
    ``made``: evidence the event references, written with it.

    Raise _LostRace when no row matched the expected revision and epoch, or the event
    collided with a stored one (unique sequence or event id); the caller rolls back.
    A ``proposal.allowed`` event also records the capability use it admits
    (``event_rows.capability_called``). On PostgreSQL all of it is one statement (a
    data-modifying CTE): one round trip.
    """
    after = apply(snapshot, event)
    texts = event_rows.values(event, json_text=True, payload_text=payload_text)
    size = stored_size(texts)
    if now is None:
        now = clock.now()
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    called = event_rows.capability_called(event)
    if called is not None and called in _uses_recorded(run):
        called = None  # its first use is stored already: the insert would change nothing
    if db.vendor == "postgresql":
        changes = event_rows.state_changes(snapshot, after)
        stored = _store_postgresql(
            db, run, changes, event, texts, expected_revision, size, now, made, called
        )
    else:
        changes = event_rows.run_state(after)
        if made:
            evidence.write(made)
        stored = _store_orm(run, changes, event, expected_revision, size, now, called)
    if not stored:
        raise _LostRace()
    if called is not None:
        _uses_recorded(run).add(called)
    if made:
        evidence.written(made)
    for column, value in changes.items():
        setattr(run, column, value)
    before, run.event_bytes = run.event_bytes, run.event_bytes + size
    run.updated_at = now
    if guards.history_large(
        after, bytes_before=before, bytes_after=run.event_bytes, limits=_limits()
    ):
        log.warning(
            "run history is large", extra={"run_id": str(run.pk), "sequence": after.revision}
        )
    return after


def _uses_recorded(run: Run) -> set[str]:
    """The capabilities whose use this row object has seen stored (by an append made with
    it): a later call of one needs no ``USE_CTE``. A fresh row object knows none, and the
    insert conflicts and changes nothing, so forgetting is always safe."""
    held: set[str] | None = run.__dict__.get("_fieldops_uses_recorded")
    if held is None:
        held = run.__dict__["_fieldops_uses_recorded"] = set()
    return held


# A capability's first admitted call records its use (``CapabilityUse``), in the event's
# statement: inserted only if the compare-and-set matched (it selects from ``cas``), once
# per run and capability (a later call of it conflicts and inserts nothing).
USE_CTE = (
    "used AS (INSERT INTO runs_capabilityuse (run_id, capability_id, tenant, "
    "run_created_at, first_sequence) SELECT cas.id, %s, %s, %s, %s FROM cas "
    "ON CONFLICT (run_id, capability_id) DO NOTHING)"
)


# The compare-and-set and the event insert as one statement: the INSERT selects from the
# UPDATE's RETURNING, so it inserts nothing unless the CAS matched the row, and a unique
# violation on the insert fails the whole statement (the UPDATE with it). The UPDATE sets
# the state columns the event changes (``event_rows.state_changes``): one statement text,
# prepared once per connection, per set of changed columns (a few dozen at most: the
# transition table's edges). Both column lists come from runs/event_rows.py.
@functools.cache
def _cas_insert_sql(
    changed: tuple[str, ...], *, with_evidence: bool = False, with_use: bool = False
) -> str:
    def placeholder(column: str, json_columns: frozenset[str]) -> str:
        return "%s::jsonb" if column in json_columns else "%s"

    sets = ", ".join(
        f"{column} = {placeholder(column, event_rows.RUN_JSON_COLUMNS)}" for column in changed
    )
    selects = ", ".join(
        "cas.id"
        if column == "run_id"
        else "%s::uuid"
        if column == "event_id"
        else placeholder(column, event_rows.JSON_COLUMNS)
        for column in event_rows.COLUMNS
    )
    # Column names are constants of runs/event_rows.py, never input.
    # With evidence, its insert comes first (``evidence.INSERT_CTE``): a data-modifying CTE
    # runs whether or not the compare-and-set matches, and fails with the statement.
    # With a capability use, its insert follows the compare-and-set it selects from.
    ahead = f"{evidence.INSERT_CTE}, " if with_evidence else ""
    behind = f", {USE_CTE}" if with_use else ""
    return (
        f"WITH {ahead}cas AS (UPDATE runs_run SET {sets}, event_bytes = %s, updated_at = %s "  # noqa: S608  # nosec B608
        f"WHERE id = %s AND revision = %s AND owner_epoch = %s RETURNING id){behind} "
        f"INSERT INTO runs_event ({', '.join(event_rows.COLUMNS)}) SELECT {selects} FROM cas"
    )


_RUN_ID = event_rows.COLUMNS.index("run_id")
_PAYLOAD = event_rows.COLUMNS.index("payload")
_REFS = event_rows.COLUMNS.index("refs")


def stored_size(texts: list[Any]) -> int:
    """What storing an event adds to its run's ``event_bytes`` (the history size the guards
    limit): its payload and refs as stored JSON text plus a fixed allowance for the row.
    ``texts`` is the event's row as ``event_rows.values(event, json_text=True)`` gives it."""
    return len(texts[_PAYLOAD]) + len(texts[_REFS]) + 600


def _store_postgresql(
    db: Any,
    run: Run,
    changes: dict[str, Any],
    event: EventRecord,
    texts: list[Any],
    expected: int,
    size: int,
    now: Any,
    made: Sequence[evidence.Made] = (),
    called: str | None = None,
) -> bool:
    """The compare-and-set and insert as one prepared statement; ``changes`` are the run
    row's state columns ``event`` changes (``event_rows.state_changes``), ``texts`` the
    event's row in ``event_rows.COLUMNS`` order with JSON as text, ``made`` the evidence
    written ahead of it in the same statement, ``called`` the capability whose use it
    records (``event_rows.capability_called``)."""
    params: list[Any] = [
        *(evidence.cte_params(run.id, made) if made else ()),
        *event_rows.state_params(changes, event=event, event_texts=texts),
        run.event_bytes + size,
        now,
        run.id,
        expected,
        run.owner_epoch,
        *((called, run.tenant, run.created_at, event.sequence) if called else ()),
        *texts[:_RUN_ID],
        *texts[_RUN_ID + 1 :],
    ]
    if db.connection is None:
        db.ensure_connection()
    sql = _cas_insert_sql(tuple(changes), with_evidence=bool(made), with_use=bool(called))
    prepare = _current().prepared_statements
    try:
        # A prepared statement: PostgreSQL parses and plans it once per connection instead
        # of once per append (Django's own cursors send every query as literal text), sent
        # straight through libpq (``execute_prepared``); where that path stands aside, through
        # a server-side-binding cursor. Errors are translated to Django's.
        with db.wrap_database_errors:
            if prepare and (count := execute_prepared(db, sql, params)) is not None:
                return count == 1
            cursor = binding_cursor(db)  # shared with fieldops/sql.py's statements
            cursor.execute(sql, params)
            return cursor.rowcount == 1
    except IntegrityError:
        return False


def _store_orm(
    run: Run,
    state: dict[str, Any],
    event: EventRecord,
    expected: int,
    size: int,
    now: Any,
    called: str | None = None,
) -> bool:
    updated = Run.objects.filter(pk=run.pk, revision=expected, owner_epoch=run.owner_epoch).update(
        **state, event_bytes=run.event_bytes + size, updated_at=now
    )
    if updated != 1:
        return False
    try:
        Event.objects.create(**event_rows.model_fields(event))
    except IntegrityError:
        return False
    if called:  # as ``USE_CTE``: the first call of a capability records its use
        use = CapabilityUse(
            run_id=run.pk,
            capability_id=called,
            tenant=run.tenant,
            run_created_at=run.created_at,
            first_sequence=event.sequence,
        )
        CapabilityUse.objects.bulk_create([use], ignore_conflicts=True)
    return True


def record_of(row: Event) -> EventRecord:
    return event_rows.from_model(row)
