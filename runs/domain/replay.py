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
from operator import ge, itemgetter

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


def fast_fold(rows: Iterable[tuple[int, str, str, str, Mapping[str, int]]]) -> FastFold:
    """Fold (sequence, type, prev_state, next_state, budget) tuples; count problems.

    One problem per event off its declared edge, and one per counter that is missing or
    went down; the fold stops at the first gap or state mismatch. Counters are compared
    with C-level ``itemgetter``/``map`` in the common case; only an event that fails that
    check is examined key by key.
    """
    edges = _edges()
    state = State.CREATED.value
    revision = 0
    counters: Mapping[str, int] = {}
    before: tuple[int, ...] = ()
    getter: Callable[[Mapping[str, int]], tuple[int, ...]] = _getter(())
    width = -1  # how many counters ``getter`` reads (none yet)
    problems = 0
    for sequence, etype, prev_state, next_state, budget in rows:
        if sequence != revision + 1 or prev_state != state:
            problems += 1
            break
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
    return FastFold(
        state=State(state), revision=revision, counters=dict(counters), problems=problems
    )


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


__all__ = [
    "COMPATIBILITY",
    "EventType",
    "Finding",
    "ReplayResult",
    "compare_with_stored",
    "fast_fold",
    "replay",
]
