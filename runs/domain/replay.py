"""Audit replay (SPEC §6): fold stored events over the initial run record.

It reproduces state, counters, waits and terminal disposition without calling any
policy or capability, and reports the first gap, duplicate or conflicting sequence,
illegal edge, decreasing counter, broken integrity link or missing evidence. It never
invents a missing event: reconstruction stops where the record stops being trustworthy.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import islice
from operator import ge, itemgetter
from typing import NamedTuple

from .events import EventRecord, RunConfig, RunSnapshot, apply, link_hash
from .invariants import violations
from .states import CONTROL_EVENTS, EventType, State

# Each stored schema version maps onto the current event shape. An event whose version
# is not here is quarantined and reported, never guessed.
COMPATIBILITY: Mapping[int, Callable[[EventRecord], EventRecord]] = {
    1: lambda event: event,
}

# Findings after which the fold cannot continue honestly.
STOPPING = frozenset(
    {"gap", "conflicting_sequence", "illegal_edge", "quarantined_version", "foreign_event"}
)


@dataclass(frozen=True)
class Finding:
    kind: str
    sequence: int
    detail: str


@dataclass(frozen=True)
class ReplayResult:
    snapshot: RunSnapshot
    findings: tuple[Finding, ...]
    events_applied: int
    stopped_at: int | None = None
    evidence_complete: bool = True

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> dict[str, object]:
        s = self.snapshot
        return {
            "state": s.state.value,
            "revision": s.revision,
            "attempt": s.attempt,
            "owner_epoch": s.owner_epoch,
            "counters": dict(s.counters),
            "limits": dict(s.limits),
            "cancel_revision": s.cancel_revision,
            "disposition": s.disposition,
            "terminal_reason": s.terminal_reason,
            "waiting_checkpoint": s.waiting_checkpoint,
            "waiting_correlation": s.waiting_correlation,
        }


_INVARIANT_KIND = {
    "state.transition.declared": "illegal_edge",
    "budget.counter.monotonic": "decreasing_counter",
    "event.sequence.next": "gap",
    "run.identity.stable": "foreign_event",
}


def replay(
    config: RunConfig,
    events: Iterable[EventRecord],
    *,
    evidence_ids: Container[str] | None = None,
    ordered: bool = False,
    content_hash: Callable[[EventRecord], str] = EventRecord.recomputed_content_hash,
) -> ReplayResult:
    """Fold ``events`` over ``config``; report what does not hold.

    ``ordered``: the events already come in stored order (sequence, then id), so they are
    folded as they arrive and never held: a stream of any length replays in constant
    memory. Otherwise they are sorted by sequence first. ``evidence_ids``: the evidence
    that exists; it is consulted for each event as it is folded, so a streaming caller may
    keep in it only what the events at hand reference. ``content_hash``: how an event's
    content hash is recomputed (a reader whose records allow a faster, byte-identical
    encoding passes it; see ``runs.replay.audit.stored_content_hash``)."""
    snapshot = RunSnapshot.initial(config)
    findings: list[Finding] = []
    applied = 0
    previous: EventRecord | None = None
    evidence_complete = True
    for raw in events if ordered else sorted(events, key=lambda e: e.sequence):
        upgrade = COMPATIBILITY.get(raw.schema_version)
        if upgrade is None:
            findings.append(
                Finding(
                    "quarantined_version",
                    raw.sequence,
                    f"schema version {raw.schema_version} has no mapping",
                )
            )
            break
        event = upgrade(raw)
        if previous is not None and event.sequence == previous.sequence:
            same = event.content_hash == previous.content_hash and event.hash == previous.hash
            findings.append(
                Finding(
                    "duplicate_sequence" if same else "conflicting_sequence",
                    event.sequence,
                    "the same event stored twice"
                    if same
                    else f"two events claim sequence {event.sequence}: "
                    f"{previous.type} and {event.type}",
                )
            )
            if not same:
                break
            continue
        if event.sequence != snapshot.revision + 1:
            findings.append(
                Finding(
                    "gap",
                    event.sequence,
                    f"expected sequence {snapshot.revision + 1}, found "
                    f"{event.sequence}; replay stops here",
                )
            )
            break
        findings.extend(_integrity(snapshot, event, content_hash))
        stop = False
        for violation in violations(snapshot, event):
            kind = _INVARIANT_KIND.get(violation.invariant, f"invariant:{violation.invariant}")
            findings.append(Finding(kind, event.sequence, violation.detail))
            stop = stop or kind in STOPPING
        if stop:
            break
        if evidence_ids is not None:
            missing = sorted(
                r
                for k, r in event.refs.items()
                if k
                not in ("effect", "attempt", "approval", "checkpoint", "correlation", "callback")
                and r not in evidence_ids
            )
            if missing:
                evidence_complete = False
                findings.append(
                    Finding(
                        "missing_evidence",
                        event.sequence,
                        f"{event.type} references missing evidence {', '.join(missing)}",
                    )
                )
        snapshot = apply(snapshot, event)
        previous = event
        applied += 1
    stopped_at = next((f.sequence for f in findings if f.kind in STOPPING), None)
    return ReplayResult(
        snapshot=snapshot,
        findings=tuple(findings),
        events_applied=applied,
        stopped_at=stopped_at,
        evidence_complete=evidence_complete,
    )


def _integrity(
    snapshot: RunSnapshot, event: EventRecord, recompute: Callable[[EventRecord], str]
) -> list[Finding]:
    out = []
    # The content hash is recomputed once: the link check reuses it (it equals the stored
    # one there), which halves the hashing of a replay.
    content_hash = recompute(event)
    if content_hash != event.content_hash:
        out.append(
            Finding(
                "broken_hash_link",
                event.sequence,
                "stored content does not hash to its content hash (altered)",
            )
        )
    elif event.prev_hash != snapshot.last_hash:
        out.append(
            Finding(
                "broken_hash_link", event.sequence, "previous-event link does not match the chain"
            )
        )
    elif (
        link_hash(
            prev_hash=event.prev_hash,
            content_hash=content_hash,
            event_id=event.event_id,
            sequence=event.sequence,
            occurred_at=event.occurred_at,
        )
        != event.hash
    ):
        out.append(
            Finding(
                "broken_hash_link",
                event.sequence,
                "integrity link does not recompute (altered envelope)",
            )
        )
    return out


def compare_with_stored(result: ReplayResult, stored: Mapping[str, object]) -> list[Finding]:
    """Report every field where the stored run row disagrees with the replayed snapshot."""
    out = []
    summary = result.summary()
    for key, value in summary.items():
        if key in stored and stored[key] != value:
            out.append(
                Finding(
                    "snapshot_mismatch",
                    result.snapshot.revision,
                    f"{key}: stored {stored[key]!r}, replay gives {value!r}",
                )
            )
    return out


@dataclass(frozen=True)
class FastFold:
    """A minimal fold for throughput measurement and bulk checks: state, counters, edges.

    It checks sequence continuity, declared edges and monotonic counters only (no hash
    recomputation); ``replay`` is the full audit.
    """

    state: State = State.CREATED
    revision: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    problems: int = 0


FoldRow = tuple[int, str, str, str, Mapping[str, int]]

# How many rows ``fast_fold`` checks at once: enough that a chunk's fixed cost is small
# per row, few enough that the rows and budgets a chunk reads stay in the core's cache
# between its passes (measured in bench/replay_speed.py's process: 4,096 rows a chunk
# folded at half the speed of 256 or 512).
FOLD_CHUNK = 256


class _Position(NamedTuple):
    """Where a fold stands: the state and revision reached, the last budget, the count."""

    state: str
    revision: int
    counters: Mapping[str, int]
    problems: int
    stopped: bool = False  # a gap or a state mismatch: nothing after it is folded

    def result(self) -> FastFold:
        return FastFold(
            state=State(self.state),
            revision=self.revision,
            counters=dict(self.counters),
            problems=self.problems,
        )


_START = _Position(state=State.CREATED.value, revision=0, counters={}, problems=0)


def fast_fold(rows: Iterable[FoldRow], *, chunk_size: int = FOLD_CHUNK) -> FastFold:
    """Fold (sequence, type, prev_state, next_state, budget) tuples; count problems.

    One problem per event off its declared edge, and one per counter that is missing or
    went down; the fold stops at the first gap or state mismatch. The result is exactly
    ``fast_fold_event_by_event``'s: ``rows`` are taken ``chunk_size`` at a time (never all
    at once: a generator of any length folds in constant memory); a chunk with nothing to
    report is checked with C-level operations over the whole chunk, any other chunk
    (a problem, a gap, counters that change keys, a malformed row) is folded event by
    event from where the previous chunk left off.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, not {chunk_size}")
    steps = _steps()
    position = _START
    source = iter(rows)
    while chunk := list(islice(source, chunk_size)):
        clean = _clean_chunk_end(chunk, position, steps)
        if clean is not None:
            position = clean
            continue
        position = _fold_event_by_event(chunk, position)
        if position.stopped:
            break
    return position.result()


def fast_fold_event_by_event(rows: Iterable[FoldRow]) -> FastFold:
    """The reference fold, one event at a time: what ``fast_fold`` must always return."""
    return _fold_event_by_event(rows, _START).result()


def _clean_chunk_end(
    chunk: list[FoldRow], start: _Position, steps: frozenset[tuple[str, str, str]]
) -> _Position | None:
    """Return where ``chunk`` leaves the fold if it has nothing to report, else None.

    Nothing to report: the sequences continue ``start``'s revision one by one, each row's
    prev_state is the state before it, every (prev_state, type, next_state) is a declared
    step, and every budget has the same counters as the one before it (``start``'s too,
    unless that is empty), none lower. None means "fold this chunk event by event", which
    also decides what any exception met here would have been.
    """
    try:
        sequences, types, prev_states, next_states, budgets = zip(*chunk, strict=True)
        first = start.revision + 1
        if sequences != tuple(range(first, first + len(chunk))):
            return None
        if prev_states[0] != start.state or prev_states[1:] != next_states[:-1]:
            return None
        if not steps.issuperset(zip(prev_states, types, next_states, strict=True)):
            return None
        keys = tuple(budgets[0])
        width = len(keys)
        if list(map(len, budgets)).count(width) != len(budgets):
            return None
        if start.counters:  # the first budget is compared with the one before the chunk
            if len(start.counters) != width:
                return None
            budgets = (start.counters, *budgets)
        for column in _columns(keys, budgets):  # KeyError: a counter went missing
            # Sorting leaves a column that never goes down as it is (counters are ints).
            if list(column) != sorted(column):
                return None
    except (KeyError, TypeError, ValueError):
        return None
    return _Position(
        state=next_states[-1],
        revision=sequences[-1],
        counters=budgets[-1],
        problems=start.problems,
    )


def _columns(
    keys: tuple[str, ...], budgets: Iterable[Mapping[str, int]]
) -> Iterable[tuple[int, ...]]:
    """One tuple per key: its value in each of ``budgets``, in order.

    Each budget is read once, by one ``itemgetter`` for all its keys: the budgets are
    separate objects spread over the heap, and a pass per key would fetch each of them
    from memory once per key.
    """
    if not keys:
        return []
    if len(keys) == 1:
        return [tuple(map(itemgetter(keys[0]), budgets))]
    return zip(*map(itemgetter(*keys), budgets), strict=True)


def _fold_event_by_event(rows: Iterable[FoldRow], start: _Position) -> _Position:
    """Fold ``rows`` one at a time from ``start``; the reference for ``fast_fold``.

    Counters are compared with C-level ``itemgetter``/``map`` in the common case; only an
    event that fails that check is examined key by key.
    """
    edges = _edges()
    state, revision, counters, problems = (
        start.state,
        start.revision,
        start.counters,
        start.problems,
    )
    before: tuple[int, ...] = ()
    getter: Callable[[Mapping[str, int]], tuple[int, ...]] = _getter(())
    width = -1  # how many counters ``getter`` reads (none yet)
    for sequence, etype, prev_state, next_state, budget in rows:
        if sequence != revision + 1 or prev_state != state:
            return _Position(state, revision, counters, problems + 1, stopped=True)
        if edges.get(state, _NO_EDGES).get(etype) != next_state:
            problems += 1
        revision = sequence
        state = next_state
        if len(budget) == width:  # the same counters as before: compare them at C speed
            try:
                now = getter(budget)
            except KeyError:
                pass
            else:
                if now == before or all(map(ge, now, before)):
                    before = now
                    counters = budget
                    continue
        for key, value in counters.items():
            if budget.get(key, -1) < value:
                problems += 1
        getter = _getter(tuple(budget))
        before = getter(budget)
        width = len(budget)
        counters = budget
    return _Position(state, revision, counters, problems)


def _getter(keys: tuple[str, ...]) -> Callable[[Mapping[str, int]], tuple[int, ...]]:
    if len(keys) == 1:
        key = keys[0]
        return lambda budget: (budget[key],)
    if not keys:
        return lambda budget: ()
    return itemgetter(*keys)


_NO_EDGES: Mapping[str, str] = {}


@cache
def _edges() -> dict[str, dict[str, str]]:
    """state -> event type -> the state after it (plain strings, for the fold's inner loop).

    Control events lead back to the state they were appended in; any pair not listed is
    an illegal edge.
    """
    from .transitions import TRANSITIONS

    out: dict[str, dict[str, str]] = {state.value: {} for state in State}
    for (source, event), transition in TRANSITIONS.items():
        out[source.value][event.value] = transition.target.value
    for state in State:
        for event in CONTROL_EVENTS:
            out[state.value][event.value] = state.value
    return out


@cache
def _steps() -> frozenset[tuple[str, str, str]]:
    """Every declared (state, event type, state after it): ``_edges`` as one set, so a
    chunk's edges are checked with one ``map``."""
    return frozenset(
        (source, event, target)
        for source, by_event in _edges().items()
        for event, target in by_event.items()
    )


__all__ = [
    "COMPATIBILITY",
    "EventType",
    "Finding",
    "ReplayResult",
    "compare_with_stored",
    "fast_fold",
    "fast_fold_event_by_event",
    "replay",
]
