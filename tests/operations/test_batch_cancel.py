"""Batched cancellation (``runs.services.run_cancel_many`` through ``runs.authority_batch``)
is N single ``run_cancel``s in one transaction: the same events, run rows, terminal records,
attempts, checkpoints and item results, histories that audit-replay clean, and a fixed
number of statements per batch whatever its size.

Each situation is built twice (twin runs made the same way); one twin is cancelled by
``run_cancel``, the other in a batch, and everything but ids and times is compared. These
tests run on SQLite too (the embedded default's per-event store path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals.models import Checkpoint
from fieldops import metrics, points
from operations import services
from operations.models import ItemResult, OperationItem, Status
from runs import services as run_services
from runs.domain.states import EventType, State
from runs.engine import runner
from runs.models import Correlation, EffectAttempt, Event, Run, TerminalRecord
from runs.replay.audit import audit_replay
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db

REASON = "gate closed (operation 1234abcd)"
BY = "user:operator"


# -- situations (each builds one run; called twice for twins) ----------------------------
def created(**_: Any) -> Run:
    """Waiting to be dispatched to a worker."""
    return make_run(advance=False)


def waiting_for_approval(**_: Any) -> Run:
    """WAITING_HUMAN with a pending approval checkpoint the cancellation must close."""
    run = make_run()
    assert run.state == State.WAITING_HUMAN.value
    return run


def _stopped_at(point: str, approver: Any) -> Run:
    """Approved, then its worker dies at ``point`` of the dispatch (lease still held)."""
    run = make_run()
    approve(run, approver, advance=False)

    def die(name: str, run_id: str) -> None:
        if name == point and run_id == str(run.pk):
            raise points.WorkerKilled(name)

    previous = points.install(die)
    try:
        with pytest.raises(points.WorkerKilled):
            runner.advance(str(run.pk), worker="test")
    finally:
        points.install(previous)
    run.refresh_from_db()
    return run


def dispatch_recorded(*, approver: Any) -> Run:
    """Its effect's dispatch is recorded but not sent: the cancellation marks it NOT_SENT."""
    run = _stopped_at("after_dispatch_record", approver)
    assert EffectAttempt.objects.get(run=run).status == EffectAttempt.Status.DISPATCH_RECORDED
    return run


def sending(*, approver: Any) -> Run:
    """Past the send gate: the effect may have happened (cancelled_effect_unknown)."""
    run = _stopped_at("after_send_gate", approver)
    assert EffectAttempt.objects.get(run=run).status == EffectAttempt.Status.SENDING
    return run


def ended(**_: Any) -> Run:
    """Already cancelled: a second cancellation is refused and recorded as rejected."""
    run = make_run(advance=False)
    run_services.run_cancel(run_id=str(run.pk), by_ref="user:other", reason="by hand")
    run.refresh_from_db()
    return run


SITUATIONS: list[Callable[..., Run]] = [
    created,
    waiting_for_approval,
    dispatch_recorded,
    sending,
    ended,
]


# -- what is compared --------------------------------------------------------------------
def _event_view(event: Event) -> dict[str, Any]:
    """An event without its ids, times and hashes (the hashes are checked by replay)."""
    budget = {k: v for k, v in event.budget.items() if k != "elapsed_ms"}
    return {
        "sequence": event.sequence,
        "attempt": event.attempt,
        "owner_epoch": event.owner_epoch,
        "type": event.type,
        "actor": event.actor,
        "prev_state": event.prev_state,
        "next_state": event.next_state,
        "contract_version": event.contract_version,
        "policy_version": event.policy_version,
        "component_set": event.component_set,
        "budget": budget,
        "cancel_revision": event.cancel_revision,
        "reason_code": event.reason_code,
        "refs": event.refs,
        "payload": event.payload,
        "schema_version": event.schema_version,
    }


def _unresolved_view(items: list[dict[str, str]]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        ((kind, ref),) = item.items()
        status = (
            EffectAttempt.objects.get(pk=ref).status
            if kind == "attempt"
            else Checkpoint.objects.get(pk=ref).status
        )
        out.append((kind, status))
    return sorted(out)


def _view(run: Run, since: int) -> dict[str, Any]:
    """What a cancellation leaves on ``run`` (events after revision ``since``)."""
    run.refresh_from_db()
    record = TerminalRecord.objects.filter(run=run).first()
    return {
        "events": [_event_view(e) for e in Event.objects.filter(run=run, sequence__gt=since)],
        "row": {
            "state": run.state,
            "revision": run.revision,
            "disposition": run.disposition,
            "terminal_reason": run.terminal_reason,
            "cancel_revision": run.cancel_revision,
            "waiting_checkpoint": bool(run.waiting_checkpoint),
            "waiting_correlation": run.waiting_correlation,
            "counters": {k: v for k, v in run.counters.items() if k != "elapsed_ms"},
            "event_bytes": run.event_bytes,
            "lease": (run.lease_owner, run.lease_expires_at),
        },
        "terminal": None
        if record is None
        else {
            "disposition": record.disposition,
            "reason_code": record.reason_code,
            "deciding_sequence": record.deciding_sequence,
            "versions": record.versions,
            "final_counters": {k: v for k, v in record.final_counters.items() if k != "elapsed_ms"},
            "cancel_revision": record.cancel_revision,
            "unresolved": _unresolved_view(record.unresolved),
            "evidence_complete": record.evidence_complete,
            "owner": record.owner,
            "allowed_follow_up": record.allowed_follow_up,
            "artifact_id": record.artifact_id,
        },
        "attempts": sorted(
            EffectAttempt.objects.filter(run=run).values_list("status", "detail", "error")
        ),
        "checkpoints": sorted(Checkpoint.objects.filter(run=run).values_list("status", flat=True)),
        "correlations": sorted(
            Correlation.objects.filter(run=run).values_list("status", flat=True)
        ),
    }


def _result_view(result: run_services.CancelResult | None) -> tuple[Any, ...] | None:
    if result is None:
        return None
    return (result.applied, result.qualification, result.refusal, result.run.state)


def _counted() -> tuple[float, float]:
    """Cancellations counted by the transitions metric, and refusals of a cancellation of
    an ended run by the refusals metric."""
    cancelled = metrics.TRANSITIONS.labels(
        event_type=EventType.RUN_CANCELLED.value, state=State.CANCELLED.value
    )._value.get()
    refused = metrics.REFUSALS.labels(
        reason="run_terminal", attempted=EventType.RUN_CANCELLED.value
    )._value.get()
    return cancelled, refused


def _cancel_in_one_batch(runs: list[Run]) -> dict[str, run_services.CancelResult | None]:
    with transaction.atomic():
        locked = run_services.runs_lock([run.pk for run in runs])
        assert len(locked) == len(runs)
        return run_services.run_cancel_many(
            runs=[locked[str(run.pk)] for run in runs], by_ref=BY, reason=REASON
        )


def test_a_batch_of_cancels_equals_the_same_cancels_one_by_one(approver):
    singles = [situation(approver=approver) for situation in SITUATIONS]
    batched = [situation(approver=approver) for situation in SITUATIONS]
    before = {run.pk: run.revision for run in singles + batched}
    for single, twin in zip(singles, batched, strict=True):
        assert (single.state, single.revision) == (twin.state, twin.revision)

    before_singles = _counted()
    single_results = [
        run_services.run_cancel(run_id=str(run.pk), by_ref=BY, reason=REASON) for run in singles
    ]
    before_batch = _counted()
    batch_results = _cancel_in_one_batch(batched)
    after_batch = _counted()
    # The metrics count each batched append as append counts it (4 cancelled, 1 refused).
    singly = tuple(b - a for a, b in zip(before_singles, before_batch, strict=True))
    batched_counts = tuple(b - a for a, b in zip(before_batch, after_batch, strict=True))
    assert batched_counts == singly == (4, 1)

    for situation, single, twin, result in zip(
        SITUATIONS, singles, batched, single_results, strict=True
    ):
        name = situation.__name__
        assert _result_view(batch_results[str(twin.pk)]) == _result_view(result), name
        assert _view(twin, before[twin.pk]) == _view(single, before[single.pk]), name
        _, findings = audit_replay(Run.objects.get(pk=twin.pk))
        assert findings == [], (name, findings)
    # What each situation must show, so that the comparison above compares something.
    outcomes = {
        situation.__name__: (result.applied, result.qualification)
        for situation, result in zip(SITUATIONS, single_results, strict=True)
    }
    assert outcomes == {
        "created": (True, "cancelled_no_dispatch"),
        "waiting_for_approval": (True, "cancelled_no_dispatch"),
        "dispatch_recorded": (True, "cancelled_no_dispatch"),
        "sending": (True, "cancelled_effect_unknown"),
        "ended": (False, "cancelled_no_dispatch"),
    }
    waiting = _view(batched[1], 0)
    assert waiting["checkpoints"] == [Checkpoint.Status.CANCELLED]
    assert waiting["terminal"]["unresolved"] == [("checkpoint", Checkpoint.Status.CANCELLED)]
    assert _view(batched[2], 0)["attempts"][0][:2] == ("NOT_SENT", "cancelled before dispatch")
    assert _view(batched[3], 0)["terminal"]["unresolved"] == [("attempt", "SENDING")]
    assert [e["type"] for e in _view(batched[4], before[batched[4].pk])["events"]] == [
        EventType.TRANSITION_REJECTED.value
    ]


@pytest.mark.postgres  # SQLite stores event by event (one writer at a time anyway)
def test_a_batch_writes_in_a_fixed_number_of_statements_whatever_its_size(world):
    def statements(n: int) -> int:
        runs = [make_run(advance=False) for _ in range(n)]
        with CaptureQueriesContext(connection) as queries:
            results = _cancel_in_one_batch(runs)
        assert all(r is not None and r.applied for r in results.values())
        return len(queries)

    assert statements(3) == statements(12)


def test_an_operation_records_each_item_as_its_single_cancel_would(world, approver):
    runs = {
        "waiting": make_run(advance=False),
        "approval": waiting_for_approval(),
        "unsent": dispatch_recorded(approver=approver),
        "ended": make_run(advance=False),
        "moved": make_run(advance=False),
    }
    operation = services.operation_start_cancel(
        tenant="north", by_ref=BY, query={"world": "faultlab"}, reason="recall", confirm=5
    )
    run_services.run_cancel(run_id=str(runs["ended"].pk), by_ref="user:other", reason="by hand")
    Run.objects.filter(pk=runs["moved"].pk).update(tenant="south")

    assert services.operation_drain(operation_id=operation.pk) == Status.FINISHED

    results = {
        name: OperationItem.objects.values_list("result", "detail").get(
            operation=operation, run=run
        )
        for name, run in runs.items()
    }
    assert results == {
        "waiting": (ItemResult.DONE, "cancelled_no_dispatch"),
        "approval": (ItemResult.DONE, "cancelled_no_dispatch"),
        "unsent": (ItemResult.DONE, "cancelled_no_dispatch"),
        "ended": (ItemResult.ALREADY_TERMINAL, State.CANCELLED.value),
        "moved": (ItemResult.REFUSED, "other_tenant"),
    }
    for name in ("waiting", "approval", "unsent"):
        run = Run.objects.get(pk=runs[name].pk)
        assert run.state == State.CANCELLED.value
        cancels = Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value)
        assert cancels.count() == 1
        assert cancels.get().payload == {
            "reason": f"recall (operation {operation.short_id})",
            "by": BY,
        }
        assert audit_replay(run)[1] == []
    assert Run.objects.get(pk=runs["moved"].pk).state == State.CREATED.value
    assert not Event.objects.filter(
        run_id__in=[runs["ended"].pk, runs["moved"].pk], type=EventType.TRANSITION_REJECTED.value
    ).exists()
    operation.refresh_from_db()
    assert (operation.done, operation.refused, operation.already_terminal) == (3, 1, 1)
