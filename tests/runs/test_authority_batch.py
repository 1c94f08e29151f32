"""``authority_batch.append_many`` decides every request as ``authority.append`` does (it
calls the same ``_decide``): applied events, control events for refusals, budget and
history guards, terminal records. Each case is built twice; one twin goes through
``append``, the other through one batch, and the outcomes are compared modulo ids and times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from runs import authority, authority_batch
from runs import services as run_services
from runs.domain.states import Actor, EventType
from runs.models import Event, Run, TerminalRecord
from runs.replay.audit import audit_replay
from tests.helpers import make_run
from tests.operations.test_batch_cancel import _event_view

pytestmark = pytest.mark.django_db

Case = tuple[Callable[[], Run], Callable[[Run], dict[str, Any]]]  # (build a run, its request)


def _request_evidence(run: Run) -> str:
    return f"rq-{run.pk.hex[:20]}"


def _created() -> Run:
    return make_run(advance=False)


def _started() -> Run:
    run = make_run(advance=False)
    started = authority.append(
        run_id=str(run.pk),
        expected_revision=0,
        expected_epoch=None,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        refs={"observation": _request_evidence(run)},
    )
    assert started.applied
    run.refresh_from_db()
    return run


def _cancelled() -> Run:
    run = make_run(advance=False)
    run_services.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="by hand")
    run.refresh_from_db()
    return run


def _start(run: Run) -> dict[str, Any]:
    return {
        "type": EventType.RUN_STARTED,
        "actor": Actor.HARNESS,
        "refs": {"observation": _request_evidence(run)},
    }


def _illegal(run: Run) -> dict[str, Any]:
    refs = {"completion": "x"}
    return {"type": EventType.COMPLETION_VERIFIED, "actor": Actor.HARNESS, "refs": refs}


def _over_budget(run: Run) -> dict[str, Any]:
    return {
        "type": EventType.OBSERVATION_RECORDED,
        "actor": Actor.HARNESS,
        "counters_delta": {"effects": 2},
    }


def _budget_change(run: Run) -> dict[str, Any]:
    return {
        "type": EventType.BUDGET_CHANGED,
        "actor": Actor.OPERATOR,
        "reason_code": "operator_decision",
        "payload": {"limits": {"turns": 9}, "by": "user:operator"},
    }


def _proposal(run: Run) -> dict[str, Any]:
    return {"type": EventType.PROPOSAL_EMITTED, "actor": Actor.MODEL}


def _cancel(run: Run) -> dict[str, Any]:
    return {
        "type": EventType.RUN_CANCELLED,
        "actor": Actor.OPERATOR,
        "reason_code": "cancelled_no_dispatch",
        "payload": {"reason": "r", "by": "user:operator"},
    }


CASES: list[Case] = [
    (_created, _start),
    (_created, _illegal),
    (_started, _over_budget),
    (_created, _budget_change),
    (_cancelled, _proposal),
    (_created, _cancel),
]


def _outcome(result: authority.Result) -> tuple[Any, ...]:
    stored = result.event if result.applied else result.control
    return (result.applied, result.refusal, str(stored.type) if stored else None)


def _history(run: Run, since: int) -> list[dict[str, Any]]:
    """The events after ``since``, the run's own evidence ids in refs made comparable."""
    views = [_event_view(e) for e in Event.objects.filter(run=run, sequence__gt=since)]
    for view in views:
        view["refs"] = {k: v.replace(run.pk.hex[:20], "<run>") for k, v in view["refs"].items()}
    return views


def _row(run: Run) -> tuple[Any, ...]:
    run.refresh_from_db()
    record = TerminalRecord.objects.filter(run=run).values_list(
        "disposition", "reason_code", "deciding_sequence", "owner", "allowed_follow_up"
    )
    return (run.state, run.revision, run.budget_limits, run.event_bytes, list(record))


def _compare(cases: list[Case]) -> list[tuple[Any, ...]]:
    """Build each case twice, append alone / in one batch, compare; return the outcomes."""
    singles = [build() for build, _ in cases]
    twins = [build() for build, _ in cases]
    before = {run.pk: run.revision for run in singles + twins}
    single_results = [
        authority.append(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            **request(run),
        )
        for run, (_, request) in zip(singles, cases, strict=True)
    ]
    with transaction.atomic():
        locked = [Run.objects.select_for_update().get(pk=run.pk) for run in twins]
        batch_results = authority_batch.append_many(
            [
                authority_batch.Request(run=run, **request(run))
                for run, (_, request) in zip(locked, cases, strict=True)
            ]
        )
    for single, twin, alone, batched in zip(
        singles, twins, single_results, batch_results, strict=True
    ):
        assert _outcome(batched) == _outcome(alone)
        assert _history(twin, before[twin.pk]) == _history(single, before[single.pk])
        assert _row(twin) == _row(single)
        assert audit_replay(twin)[1] == []
    return [_outcome(result) for result in batch_results]


def test_a_batch_of_appends_is_decided_and_recorded_as_each_append_alone(world):
    # What each case shows, so that the comparison compares something.
    assert _compare(CASES) == [
        (True, "", "run.started"),
        (False, "illegal_transition", "transition.rejected"),
        (False, "effects_budget_exceeded", "transition.rejected"),
        (True, "", "budget.changed"),
        (False, "run_cancelled", "proposal.rejected_after_cancel"),
        (True, "", "run.cancelled"),
    ]


def test_a_batch_fails_a_run_at_its_history_limit_as_append_does(world, settings):
    settings.FIELDOPS_HISTORY_MAX_EVENTS = 1
    assert _compare([(_created, _start)]) == [(True, "", "run.failed")]
    assert set(Run.objects.values_list("state", "terminal_reason")) == {
        ("FAILED", "history_event_limit_exceeded")
    }


def test_a_malformed_request_is_refused_before_anything_is_written(world):
    run = make_run(advance=False)
    with pytest.raises(ValueError, match="256 KB"), transaction.atomic():
        authority_batch.append_many(
            [
                authority_batch.Request(
                    run=Run.objects.select_for_update().get(pk=run.pk),
                    type=EventType.RUN_STARTED,
                    actor=Actor.HARNESS,
                    payload={"blob": "x" * 300_000},
                )
            ]
        )
    assert not Event.objects.filter(run=run).exists()
