"""A turn is a model call, counted at dispatch (SPEC §1, Budgets): also the call whose
worker died after the model answered and before the proposal was recorded."""

from __future__ import annotations

from typing import Any

import pytest

from fieldops import points
from runs.engine import runner, steps
from runs.models import Evidence, Run
from runs.replay.audit import audit_replay
from tests.helpers import events, make_run


class WorkerDied(Exception):
    """Stands in for a worker killed between the model's answer and the proposal event."""


@pytest.fixture
def dies_once_after_the_model_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    died: list[str] = []

    def hook(point: str, run_id: str) -> None:
        if point == "after_model_response" and not died:
            died.append(run_id)
            raise WorkerDied

    monkeypatch.setattr(points, "HOOK", hook)
    return died


def _die_during_the_first_call(run: Run) -> Run:
    with pytest.raises(WorkerDied):
        runner.advance(str(run.pk), worker="doomed")
    run.refresh_from_db()
    assert run.state == "DECIDING" and run.counters.get("turns", 0) == 0
    assert steps.uncharged_turns(run) == 1  # the call happened; nothing charged it yet
    return run


def test_the_next_proposal_charges_the_call_whose_worker_died(
    world: Any, dies_once_after_the_model_answers: list[str]
) -> None:
    run = _die_during_the_first_call(make_run(advance=False))

    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    emitted = [e for e in events(run) if e.type == "proposal.emitted"]
    first = emitted[0]
    assert first.budget["turns"] == 2 and first.payload["uncharged_turns"] == 1
    # The model was told it is on its second turn, and the later proposals charge one each.
    context = Evidence.objects.get(pk=first.refs["observation"])
    assert context.content["turn"] == 2
    assert [e.budget["turns"] for e in emitted] == list(range(2, len(emitted) + 2))
    assert all("uncharged_turns" not in e.payload for e in emitted[1:])
    assert steps.uncharged_turns(run) == 0
    assert audit_replay(run)[1] == []


def test_a_call_whose_worker_died_can_use_up_the_turn_budget(
    world: Any, dies_once_after_the_model_answers: list[str]
) -> None:
    run = _die_during_the_first_call(make_run(advance=False, limits={"turns": 1}))

    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert run.state == "FAILED" and run.terminal_reason == "turn_budget_exhausted"
    assert run.counters["turns"] == 1  # the final counters include the died call
    assert Evidence.objects.filter(run=run, kind="context").count() == 1  # no second call
    assert audit_replay(run)[1] == []
