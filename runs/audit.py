"""Audit replay of a stored run: load its events and fold them (no policy, no capability)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

from runs.authority import config_of
from runs.domain.events import EventRecord
from runs.domain.replay import Finding, ReplayResult, compare_with_stored, replay
from runs.domain.states import EventType, State
from runs.models import Event, Evidence, Run

# The stored columns of an event, in EventRecord's field order.
COLUMNS = (
    "event_id",
    "run_id",
    "sequence",
    "attempt",
    "owner_epoch",
    "type",
    "actor",
    "prev_state",
    "next_state",
    "contract_version",
    "policy_version",
    "component_set",
    "budget",
    "cancel_revision",
    "reason_code",
    "refs",
    "payload",
    "occurred_at",
    "schema_version",
    "prev_hash",
    "content_hash",
    "hash",
)


class UndecodableEvent(ValueError):
    def __init__(self, sequence: int, detail: str) -> None:
        self.sequence = sequence
        super().__init__(detail)


def stored_records(run: Run) -> Iterator[EventRecord]:
    """The run's events as records, in stored order; UndecodableEvent on a corrupt row."""
    rows = Event.objects.filter(run=run).order_by("sequence", "id").values_list(*COLUMNS)
    for row in rows.iterator(chunk_size=2000):
        values = list(row)
        values[0], values[1] = str(values[0]), str(values[1])
        try:
            values[5] = EventType(values[5])
            values[7], values[8] = State(values[7]), State(values[8])
        except ValueError as exc:  # a stored value outside the vocabulary: corruption
            raise UndecodableEvent(values[2], str(exc)[:200]) from exc
        yield EventRecord(*values)


def audit_replay(run: Run) -> tuple[ReplayResult, list[Finding]]:
    """Return the replay result and every finding, including disagreements with the row."""
    records: list[EventRecord] = []
    undecodable = None
    stream = stored_records(run)
    while True:
        try:
            records.append(next(stream))
        except StopIteration:
            break
        except UndecodableEvent as exc:
            undecodable = Finding("undecodable_event", exc.sequence, str(exc))
            break
    evidence_ids = frozenset(Evidence.objects.filter(run=run).values_list("id", flat=True))
    # The fold allocates many short-lived objects and no cycles: pausing the cyclic
    # collector for its duration saves its repeated full traversals.
    collecting = gc.isenabled()
    gc.disable()
    try:
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
