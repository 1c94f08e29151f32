"""A run is read by the adapter version it pinned for its whole life: the runner, decision
replay of its recorded outputs and its execution simulation. New runs pin the newest
version; a run recorded under an earlier one replays exactly as it ran."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from runs import policies
from runs.engine import runner
from runs.models import Event, Evidence, Run
from runs.policies import (
    anthropic_adapter,
    openai_adapter,
    openai_responses_adapter,
    registry,
    vocabularies,
)
from runs.policies.base import PolicyOutput
from runs.replay import decision as replay_modes
from runs.replay.decision import decision_replay
from runs.services import RunInputError
from sim.simulation import simulate
from tests.helpers import make_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
SCENARIO = "recorded_fixture_output"
# An output each earlier version read as an answer and the current one refuses.
OUTPUTS = {
    "openai": ("final_json_duplicate_keys", openai_adapter.VERSION_2_1, "malformed_final"),
    "openai-responses": ("unknown_status", openai_responses_adapter.VERSION_1_1, "unknown_shape"),
    "anthropic": ("final_json_duplicate_keys", anthropic_adapter.VERSION_2_1, "malformed_final"),
}


class FixtureOutput:
    """A policy that answers every context with one recorded provider output."""

    name = SCENARIO
    version = "fixture-output@1"

    def __init__(self, vocabulary: str) -> None:
        self.vocabulary = vocabulary

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput:
        name = OUTPUTS[self.vocabulary][0]
        raw = json.loads((FIXTURES / self.vocabulary / f"{name}.json").read_text())
        return PolicyOutput(provider=self.vocabulary, model="fixture", raw=raw)


@pytest.fixture
def fixture_scenario(monkeypatch):
    scenario = registry.Scenario(SCENARIO, "one recorded provider output", FixtureOutput)
    monkeypatch.setitem(registry._SCENARIOS, SCENARIO, scenario)
    return scenario


def recorded_proposals(run: Run) -> list[dict[str, Any]]:
    emitted = Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    refs = [e.refs["proposal"] for e in emitted]
    found = dict(Evidence.objects.filter(pk__in=refs).values_list("pk", "content"))
    return [found[r] for r in refs]


@pytest.mark.parametrize("vocabulary", sorted(OUTPUTS))
def test_a_run_recorded_under_an_earlier_version_replays_as_it_ran(
    world, fixture_scenario, vocabulary
):
    _, earlier, refused = OUTPUTS[vocabulary]
    limits = {"corrections": 1}
    old = make_run(SCENARIO, vocabulary=vocabulary, adapter_version=earlier, limits=limits)
    new = make_run(SCENARIO, vocabulary=vocabulary, limits=limits)
    assert old.model_adapter_version == earlier
    assert new.model_adapter_version == vocabularies.get(vocabulary).adapter_version != earlier
    # The runner read each run with its own version: the earlier one admitted an answer.
    assert policies.resolve(old)[1].adapter_version == earlier
    assert {p["kind"] for p in recorded_proposals(old)} == {"final"}
    assert {p.get("reason_code") for p in recorded_proposals(new)} == {refused}
    # Decision replay reads the recorded outputs with the version that read them.
    for run in (old, new):
        replay = decision_replay(run, replay_modes.RECORDED)
        assert replay.rows and replay.first_divergence is None
        assert replay.matched == len(replay.rows)
    # The version is reported beside the one a new run would pin, never applied.
    pins = {p.capability: p for p in decision_replay(old, replay_modes.RECORDED).pin_differences}
    assert pins["model_adapter"].pinned == earlier
    assert pins["model_adapter"].now == new.model_adapter_version
    assert "model_adapter" not in {
        p.capability for p in decision_replay(new, replay_modes.RECORDED).pin_differences
    }


def test_a_simulation_of_an_earlier_version_run_pins_that_version(world):
    earlier = openai_adapter.VERSION_2_1
    run = make_run("reservation", adapter_version=earlier)
    simulate(run)
    simulated = Run.objects.exclude(pk=run.pk).get(namespace__startswith="sim-")
    assert simulated.model_adapter_version == earlier


def test_a_run_cannot_pin_another_vocabularys_or_an_unknown_adapter(world):
    for version in (anthropic_adapter.VERSION_2_1, "openai-tool-calls-adapter@0.9"):
        with pytest.raises(RunInputError) as info:
            make_run("reservation", vocabulary="openai", adapter_version=version, advance=False)
        assert info.value.field == "vocabulary"


def test_a_run_pinned_to_an_uninstalled_version_replays_as_unavailable_not_by_another(world):
    run = make_run(advance=False, limits={"corrections": 1})
    Run.objects.filter(pk=run.pk).update(model_adapter_version="openai-tool-calls-adapter@0.9")
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert {p.get("reason_code") for p in recorded_proposals(run)} == {"adapter_unavailable"}
    replay = decision_replay(run, replay_modes.RECORDED)
    assert replay.rows and replay.first_divergence is None
    assert {r.candidate_class for r in replay.rows} == {"adapter_unavailable"}


@pytest.mark.parametrize("vocabulary", sorted(OUTPUTS))
def test_the_newest_adapter_candidate_shows_what_an_upgrade_would_change(
    world, fixture_scenario, vocabulary
):
    _, earlier, refused = OUTPUTS[vocabulary]
    limits = {"corrections": 1}
    old = make_run(SCENARIO, vocabulary=vocabulary, adapter_version=earlier, limits=limits)
    new = make_run(SCENARIO, vocabulary=vocabulary, limits=limits)
    assert replay_modes.RECORDED_NEWEST in replay_modes.candidates()
    # The earlier version admitted the answer; today's adapter refuses the same output.
    upgraded = decision_replay(old, replay_modes.RECORDED_NEWEST)
    assert upgraded.rows and upgraded.first_divergence == 1
    assert {r.candidate_class for r in upgraded.rows} == {refused}
    assert {r.candidate["reason_code"] for r in upgraded.rows} == {refused}
    # A run read by today's version already: nothing would change.
    same = decision_replay(new, replay_modes.RECORDED_NEWEST)
    assert same.rows and same.first_divergence is None
    # Nothing was written by either replay.
    assert not Run.objects.exclude(pk__in=[old.pk, new.pk]).exists()


def test_the_decision_replay_page_offers_the_newest_adapter_candidate(
    world, fixture_scenario, client, approver
):
    _, earlier, refused = OUTPUTS["openai"]
    old = make_run(SCENARIO, adapter_version=earlier, limits={"corrections": 1})
    client.force_login(approver)
    page = client.get(
        reverse("runs-replay-decision", args=[old.pk]),
        {"candidate": replay_modes.RECORDED_NEWEST},
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert "parsed by today&#x27;s adapter version of their vocabulary" in text
    assert f'<option value="{replay_modes.RECORDED_NEWEST}" selected>' in text
    assert refused in text
