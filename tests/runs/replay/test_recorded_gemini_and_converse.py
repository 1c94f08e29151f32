"""Real recorded Gemini and Bedrock Converse outputs, end to end: a run pinned to the new
adapters records each raw output before reading it, keeps the model's preamble and
reasoning as commentary, is denied by validation for what the output proposes, and
replays exactly as it ran (decision replay); a run in either vocabulary simulates in its
own pinned adapter (execution simulation)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from runs.models import Event, Evidence, Run
from runs.policies import bedrock_adapter, gemini_adapter, registry
from runs.policies.base import PolicyOutput
from runs.replay import decision as replay_modes
from runs.replay.decision import decision_replay
from sim.simulation import simulate
from tests.helpers import make_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
SCENARIO = "recorded_provider_output"
# vocabulary -> (recorded fixture, its adapter, the denial every decision gets, commentary)
CASES = {
    "gemini": (
        "recorded_safety_blocked",
        gemini_adapter.VERSION,
        "invalid_proposal:model_refusal",
        "",
    ),
    "bedrock-converse": (
        "recorded_nova_thinking_preamble_call",
        bedrock_adapter.VERSION,
        "unknown_capability",
        "<thinking> To determine the capital of France",
    ),
}


class RecordedOutput:
    """A policy that answers every context with one recorded provider output."""

    name = SCENARIO
    version = "recorded-output@1"

    def __init__(self, vocabulary: str) -> None:
        self.vocabulary = vocabulary

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput:
        name = CASES[self.vocabulary][0]
        raw = json.loads((FIXTURES / self.vocabulary / f"{name}.json").read_text())
        return PolicyOutput(provider=self.vocabulary, model="recorded", raw=raw)


@pytest.fixture
def recorded_scenario(monkeypatch):
    scenario = registry.Scenario(SCENARIO, "one recorded provider output", RecordedOutput)
    monkeypatch.setitem(registry._SCENARIOS, SCENARIO, scenario)
    return scenario


def stored(run: Run, kind: str) -> list[dict[str, Any]]:
    return list(
        Evidence.objects.filter(run=run, kind=kind)
        .order_by("created_at")
        .values_list("content", flat=True)
    )


@pytest.mark.parametrize("vocabulary", sorted(CASES))
def test_a_recorded_output_runs_end_to_end_and_replays_as_it_ran(
    world, recorded_scenario, vocabulary
):
    name, version, denial, note = CASES[vocabulary]
    recording = json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())
    run = make_run(SCENARIO, vocabulary=vocabulary, limits={"corrections": 1, "actions": 1})
    assert run.model_adapter_version == version
    assert run.state == "FAILED"
    denied = list(
        Event.objects.filter(run=run, type="proposal.denied").values_list("reason_code", flat=True)
    )
    assert denied and set(denied) == {denial}
    # The provider's own body is the raw output evidence, read by the pinned adapter.
    raws = stored(run, "raw_output")
    assert raws and all(r["raw"] == recording for r in raws)
    assert {r["adapter_version"] for r in raws} == {version}
    notes = [c["text"] for c in stored(run, "commentary")]
    if note:
        assert notes and all(n.startswith(note) for n in notes)
        # Commentary is never part of a proposal.
        assert note not in json.dumps(stored(run, "proposal"))
    # Decision replay reads every recorded output again with the same adapter.
    replay = decision_replay(run, replay_modes.RECORDED)
    assert replay.rows and replay.first_divergence is None
    assert replay.matched == len(replay.rows)


@pytest.mark.parametrize("vocabulary", sorted(CASES))
def test_a_simulation_of_a_run_in_the_new_vocabularies_speaks_and_pins_them(world, vocabulary):
    # Execution simulation replays double scenarios: the double speaks both vocabularies.
    run = make_run("unavailable_tool", vocabulary=vocabulary)
    assert (run.state, run.terminal_reason) == ("FAILED", "action_budget_exhausted")
    simulate(run)
    simulated = Run.objects.exclude(pk=run.pk).get(namespace__startswith="sim-")
    assert simulated.model_adapter_version == run.model_adapter_version
    assert (simulated.state, simulated.terminal_reason) == (run.state, run.terminal_reason)
