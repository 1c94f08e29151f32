"""Decision replay: recorded context projections fed to a candidate policy, diffed per
decision, with nothing written anywhere."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from runs.models import Event, Evidence
from runs.replay import decision as replay_modes
from runs.replay.decision import ReplayError, decision_replay
from sim.world.models import ServiceRequest
from tests.helpers import approve, make_run
from tests.runs.replay.helpers import run_snapshot, world_snapshot


@pytest.fixture
def happy_path(world, approver):
    run = make_run("reservation")
    approve(run, approver)
    assert run.state == "COMPLETED"
    return run


def test_the_happy_path_against_early_success_diverges_at_the_third_decision(happy_path):
    run = happy_path
    before = run_snapshot(run), world_snapshot(run.namespace), ServiceRequest.objects.count()
    replay = decision_replay(run, "early_success")
    assert [r.index for r in replay.rows] == [1, 2, 3, 4, 5]
    assert [r.same for r in replay.rows] == [True, True, False, False, False]
    assert replay.first_divergence == 3
    third = replay.rows[2]
    assert third.recorded_summary == "check_inventory(location_id='LOC-N1', part_id='A17')"
    assert third.recorded_outcome == "proposal.allowed read_admitted"
    assert third.candidate is not None and third.candidate["kind"] == "final"
    assert third.candidate_summary == "final candidate"
    assert "kind" in third.differences and "artifact" in third.differences
    assert [r.after_divergence for r in replay.rows] == [False, False, False, True, True]
    assert (replay.matched, replay.diverged, replay.skipped) == (2, 3, 0)
    # No effects, no events, no evidence: decision replay only reads.
    assert (run_snapshot(run), world_snapshot(run.namespace), ServiceRequest.objects.count()) == (
        before
    )


def test_the_same_scenario_and_the_recorded_outputs_reproduce_every_decision(happy_path):
    for candidate in ("reservation", replay_modes.RECORDED):
        replay = decision_replay(happy_path, candidate)
        assert replay.first_divergence is None
        assert replay.matched == len(replay.rows) == 5


def test_it_replays_in_the_recorded_vocabulary(world):
    run = make_run("reservation", vocabulary="anthropic")
    replay = decision_replay(run, "early_success")
    assert replay.vocabulary == "anthropic"
    assert replay.first_divergence == 3
    assert decision_replay(run, replay_modes.RECORDED).first_divergence is None


def test_recorded_outputs_through_todays_adapter_reveal_mapping_drift(world):
    run = make_run("reservation")
    # Suppose an older adapter had mapped the second raw output onto an abstention.
    second = Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")[1]
    Evidence.objects.filter(pk=second.refs["proposal"]).update(
        content={"kind": "abstain", "reason": "old mapping"}
    )
    replay = decision_replay(run, replay_modes.RECORDED)
    assert replay.first_divergence == 2
    assert replay.rows[1].candidate_summary.startswith("search_manual(")


def test_a_candidate_that_would_be_rejected_is_shown_with_its_rejection_class(world):
    run = make_run("reservation")
    replay = decision_replay(run, "unavailable_tool")
    assert replay.first_divergence == 1
    assert {r.candidate_class for r in replay.rows} == {"unknown_tool"}
    mixed = decision_replay(run, "mixed_output")
    assert {r.candidate_class for r in mixed.rows} == {"mixed_output"}


def test_a_decision_whose_context_was_not_stored_is_reported_not_invented(world):
    run = make_run("reservation")
    second = Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")[1]
    Evidence.objects.filter(pk=second.refs["observation"]).delete()
    replay = decision_replay(run, "reservation")
    assert replay.rows[1].missing == "the context projection of this decision was not stored"
    assert replay.rows[1].candidate is None
    assert (replay.matched, replay.skipped, replay.first_divergence) == (4, 1, None)


def test_an_unknown_candidate_is_refused(world):
    run = make_run("reservation", advance=False)
    with pytest.raises(ReplayError):
        decision_replay(run, "no-such-policy")
    with pytest.raises(ReplayError):
        decision_replay(run, "model")  # only where the caller allows a real model


def test_the_command_shows_the_diff_and_keeps_audit_the_default(happy_path, capsys):
    run = happy_path
    call_command("replay", str(run.pk), "--mode", "decision", "--candidate", "early_success")
    out = capsys.readouterr().out
    assert "decision replay of" in out
    assert "first divergence at decision 3" in out
    assert "check_inventory(location_id='LOC-N1', part_id='A17')" in out
    call_command(
        "replay", str(run.pk), "--mode", "decision", "--candidate", "early_success", "--json"
    )
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "decision"
    assert data["first_divergence"] == 3
    with pytest.raises(SystemExit) as exited:
        call_command(
            "replay", str(run.pk), "--mode", "decision", "--candidate", "early_success", "--check"
        )
    assert exited.value.code == 1
    call_command(
        "replay", str(run.pk), "--mode", "decision", "--candidate", "reservation", "--check"
    )
    assert "no divergence" in capsys.readouterr().out
    call_command("replay", str(run.pk))
    assert "audit replay of" in capsys.readouterr().out


def test_a_candidate_that_cannot_read_a_recorded_context_is_reported(world, monkeypatch):
    from sim import double

    run = make_run("reservation")

    def broken(ctx):
        return double.Call("read_equipment", {"equipment_id": ctx["no-such-key"]})

    from runs.policies import registry

    monkeypatch.setitem(
        double.SCENARIOS, "broken", double.Scenario("broken", "reads a missing key", broken)
    )
    monkeypatch.setitem(
        registry._SCENARIOS,
        "broken",
        registry.Scenario(
            "broken", "reads a missing key", lambda v: double.PolicyDouble("broken", v)
        ),
    )
    replay = decision_replay(run, "broken")
    assert {r.candidate_class for r in replay.rows} == {"candidate_error"}
    assert replay.first_divergence == 1
