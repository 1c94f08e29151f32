"""Swapping the provider vocabulary changes the raw output, never the local proposals or
the disposition: the same scenario spoken OpenAI-style and Anthropic-style is the same run.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from approvals import services as approvals
from approvals.models import Checkpoint
from runs import runner
from runs.models import Event, Evidence, Run
from runs.policies import anthropic_adapter, openai_adapter
from tests.helpers import approve, make_run

REF = re.compile(r"\b(?:ev|rq)-[0-9a-f]{20}\b")


def proposals(run: Run) -> list[dict[str, Any]]:
    """The run's local proposals in decision order, evidence ids renamed by first use."""
    ordered = list(Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence"))
    found = dict(
        Evidence.objects.filter(pk__in=[e.refs["proposal"] for e in ordered]).values_list(
            "pk", "content"
        )
    )
    text = json.dumps([found[e.refs["proposal"]] for e in ordered], sort_keys=True)
    names: dict[str, str] = {}
    text = REF.sub(lambda m: names.setdefault(m.group(0), f"ref{len(names) + 1}"), text)
    return json.loads(text)


def raw_outputs(run: Run) -> list[dict[str, Any]]:
    return list(
        Evidence.objects.filter(run=run, kind="raw_output")
        .order_by("created_at")
        .values_list("content", flat=True)
    )


def outcome(run: Run) -> tuple[str, str, str, list[str]]:
    run.refresh_from_db()
    denials = list(
        Event.objects.filter(run=run, type="proposal.denied")
        .order_by("sequence")
        .values_list("reason_code", flat=True)
    )
    return run.state, run.disposition, run.terminal_reason, denials


def drive(scenario: str, vocabulary: str, approver: Any, operator: Any) -> Run:
    run = make_run(scenario, vocabulary=vocabulary)
    for _ in range(3):
        run.refresh_from_db()
        checkpoint = Checkpoint.objects.filter(pk=run.waiting_checkpoint).first()
        if checkpoint is None:
            break
        if checkpoint.kind == Checkpoint.Kind.APPROVAL:
            approve(run, approver)
        else:
            approvals.clarification_answer(
                checkpoint_id=checkpoint.pk, user=operator, answer="LOC-N1"
            )
            runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    return run


@pytest.mark.parametrize(
    ("scenario", "state"),
    [
        ("reservation", "COMPLETED"),
        ("clarify", "COMPLETED"),
        ("early_success", "FAILED"),
        ("premature_artifact", "FAILED"),
        ("unavailable_tool", "FAILED"),
        ("invalid_arguments", "FAILED"),
        ("mixed_output", "FAILED"),
        ("injection", "COMPLETED"),
        ("abstain", "ESCALATED"),
    ],
)
def test_the_same_scenario_in_either_vocabulary_is_the_same_run(
    world, approver, operator, scenario, state
):
    spoken = {v: drive(scenario, v, approver, operator) for v in ("openai", "anthropic")}
    assert outcome(spoken["openai"]) == outcome(spoken["anthropic"])
    assert outcome(spoken["openai"])[0] == state
    assert proposals(spoken["openai"]) == proposals(spoken["anthropic"])
    assert len(proposals(spoken["openai"])) >= 1
    # The swap was real: the raw outputs are in two different provider shapes, each
    # parsed by its own pinned adapter.
    assert spoken["openai"].model_adapter_version == openai_adapter.VERSION
    assert spoken["anthropic"].model_adapter_version == anthropic_adapter.VERSION
    assert all(
        "content" in r["raw"] and "type" not in r["raw"] for r in raw_outputs(spoken["openai"])
    )
    assert all(r["raw"]["type"] == "message" for r in raw_outputs(spoken["anthropic"]))
    assert all(isinstance(r["raw"]["content"], list) for r in raw_outputs(spoken["anthropic"]))


@pytest.mark.parametrize("vocabulary", ["openai", "anthropic"])
def test_an_unknown_tool_is_denied_at_step_3_and_charged_to_the_action_budget(world, vocabulary):
    from catalog.world.models import ServiceRequest

    run = make_run("unavailable_tool", vocabulary=vocabulary)
    assert (run.state, run.terminal_reason) == ("FAILED", "action_budget_exhausted")
    denied = list(Event.objects.filter(run=run, type="proposal.denied"))
    assert denied
    assert {(e.reason_code, e.payload["step"], e.payload["charge"]) for e in denied} == {
        ("unknown_capability", 3, "actions")
    }
    assert run.counters["actions"] == run.budget_limits["actions"]
    assert run.counters["corrections"] == 0  # not a parse failure: the call was well-formed
    assert not ServiceRequest.objects.filter(run_id=str(run.pk)).exists()


def test_a_run_cannot_be_created_in_an_unknown_vocabulary(world):
    from runs.services import RunInputError

    with pytest.raises(RunInputError) as info:
        make_run(vocabulary="gemini", advance=False)
    assert info.value.field == "vocabulary"
