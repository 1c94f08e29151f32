"""Execution simulation: the recorded request re-run against the doubles in its own
``sim-...`` world, with scripted principals replaying the recorded human inputs. The live
world, the recorded run's world and the recorded run itself are never touched."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.management import call_command

from approvals import services as approvals
from approvals.models import Checkpoint
from kernel import clock
from runs import services
from runs.engine import runner, sweeper
from runs.models import Event, Run
from sim import simulation as replay_modes
from sim.simulation import ReplayError, simulate
from sim.world.models import LedgerEntry
from tests.helpers import approve, decline, make_run
from tests.runs.replay.helpers import run_snapshot, world_snapshot


def test_it_reaches_the_same_disposition_with_effects_only_in_its_own_world(world, approver):
    recorded = make_run("reservation", namespace="live")
    approve(recorded, approver)
    assert recorded.state == "COMPLETED"
    before = {
        "run": run_snapshot(recorded),
        "live": world_snapshot("live"),
        "faultlab": world_snapshot("faultlab"),
    }
    assert len(before["live"]["ledger"]) == 1  # the recorded effect

    result = simulate(recorded)

    assert result.same_disposition and result.same_decisions
    assert result.simulated.disposition_key == ("COMPLETED", "COMPLETED", "all_predicates_pass")
    assert result.simulated.namespace.startswith(f"sim-{recorded.pk.hex[:12]}-")
    assert result.simulated.effects == 1
    sim_ledger = LedgerEntry.objects.filter(namespace=result.simulated.namespace)
    assert [e.run_id for e in sim_ledger] == [result.simulated.run_id]
    assert result.scripted == ("scripted approver: approve",)
    # Nothing of the live world, the fault lab world or the recorded run changed.
    after = {
        "run": run_snapshot(recorded),
        "live": world_snapshot("live"),
        "faultlab": world_snapshot("faultlab"),
    }
    assert after == before
    # The scripted approver decided the simulated checkpoint only.
    sim = Run.objects.get(pk=result.simulated.run_id)
    assert sim.principal_ref == "user:simulation-requester-north"
    decided = {c.decision.decided_by.username for c in Checkpoint.objects.filter(run=sim)}
    assert decided == {"simulation-approver-north"}


def test_a_simulation_never_leaves_a_checkpoint_for_a_human(world):
    recorded = make_run("reservation")
    assert recorded.state == "WAITING_HUMAN"
    result = simulate(recorded)
    assert result.same_disposition  # both reached the approval and went no further
    assert result.simulated.state == "WAITING_HUMAN"
    assert result.notes == ("stopped in WAITING_HUMAN: the recording has no further input for it",)
    sim = Run.objects.get(pk=result.simulated.run_id)
    assert sim.state == "CANCELLED"
    assert not Checkpoint.objects.filter(run=sim, status=Checkpoint.Status.PENDING).exists()
    assert not LedgerEntry.objects.filter(namespace=sim.namespace).exists()
    recorded.refresh_from_db()
    assert recorded.state == "WAITING_HUMAN"  # the recorded checkpoint is still the human's


def test_a_candidate_scenario_runs_in_the_recorded_conditions(world, approver):
    recorded = make_run("reservation")
    approve(recorded, approver)
    result = simulate(recorded, candidate="early_success")
    assert not result.same_disposition
    assert result.simulated.disposition_key == ("FAILED", "FAILED", "completion_evidence_missing")
    assert result.simulated.effects == 0


def test_a_recorded_decline_with_a_requested_change_is_replayed(world, approver):
    recorded = make_run("reservation")
    decline(recorded, approver, requested_change={"slot_id": "S-N1-02"})
    approve(recorded, approver)
    assert recorded.state == "COMPLETED"
    result = simulate(recorded)
    assert result.scripted == ("scripted approver: decline", "scripted approver: approve")
    assert result.same_disposition and result.same_decisions
    reserved = LedgerEntry.objects.get(namespace=result.simulated.namespace)
    assert reserved.slot_id == "S-N1-02"


def test_recorded_answers_and_callbacks_are_replayed(world, operator, approver):
    clarify = make_run("clarify", principal="user:operator")
    checkpoint = Checkpoint.objects.get(pk=clarify.waiting_checkpoint)
    approvals.clarification_answer(checkpoint_id=checkpoint.pk, user=operator, answer="LOC-N1")
    runner.advance(str(clarify.pk), worker="test")
    approve(clarify, approver)
    result = simulate(clarify)
    assert result.scripted[0] == "scripted requester answered 'LOC-N1'"
    assert result.same_disposition
    assert result.simulated.state == "COMPLETED"

    waiting = make_run("wait_external")
    from runs import callbacks
    from runs.models import Correlation

    correlation = Correlation.objects.get(pk=waiting.waiting_correlation)
    callbacks.callback_receive(
        delivery_id="dl-test-1",
        correlation_id=correlation.pk,
        attempt=correlation.attempt,
        owner_epoch=correlation.owner_epoch,
        response_type=correlation.expected_response_type,
        payload={"window": "tomorrow 08:00"},
    )
    runner.advance(str(waiting.pk), worker="test")
    approve(waiting, approver)
    result = simulate(waiting)
    assert result.scripted[0] == "scripted callback depot.delivery_confirmed: accepted"
    assert result.same_disposition and result.simulated.state == "COMPLETED"


@pytest.mark.parametrize(
    ("scenario", "expired", "reason"),
    [
        ("reservation", "approval.expired", "checkpoint_expired"),
        ("wait_external", "external.expired", "wait_expired"),
    ],
)
def test_a_recorded_expiry_is_replayed_on_the_simulations_own_clock(
    world, scenario, expired, reason
):
    recorded = make_run(scenario)
    clock.advance(2 * 24 * 3600)  # the recorded wait ran out, and the sweeper saw it
    sweeper.sweep()
    recorded.refresh_from_db()
    assert (recorded.state, recorded.terminal_reason) == ("ESCALATED", reason)
    clock.reset()
    bystander = make_run(scenario)  # another run waiting while the simulation runs

    result = simulate(recorded)

    assert result.same_disposition
    assert result.simulated.disposition_key == ("ESCALATED", "ESCALATED", reason)
    sim_events = Event.objects.filter(run_id=result.simulated.run_id, type=expired)
    assert sim_events.count() == 1 and sim_events[0].actor == "clock"
    assert result.scripted == (f"scripted clock: {expired}",)
    # The clock moved for the simulation only: the bystander still waits, and now is now.
    bystander.refresh_from_db()
    assert bystander.state in ("WAITING_HUMAN", "WAITING_EXTERNAL")
    assert abs((clock.now() - dt.datetime.now(dt.UTC)).total_seconds()) < 5


def test_an_operator_cancellation_is_replayed_where_the_simulation_waits(world):
    recorded = make_run("reservation")
    services.run_cancel(run_id=str(recorded.pk), by_ref="user:operator", reason="not needed")
    recorded.refresh_from_db()
    result = simulate(recorded)
    assert result.simulated.disposition_key == ("CANCELLED", "CANCELLED", "cancelled_no_dispatch")
    assert result.same_disposition


def test_a_recorded_budget_change_is_replayed_where_it_was_made(world, approver):
    # The recording: 3 turns would not reach the approval; the operator raised the limit
    # after the second turn, and the run went on to complete.
    recorded = make_run("reservation", advance=False, limits={"turns": 3})
    while recorded.counters.get("turns", 0) < 2:
        runner.advance(str(recorded.pk), worker="test", max_steps=1)
        recorded.refresh_from_db()
    services.run_budget_change(
        run_id=str(recorded.pk), by_ref="user:operator", budget="turns", limit=24, reason="more"
    )
    runner.advance(str(recorded.pk), worker="test")
    approve(recorded, approver)
    assert recorded.state == "COMPLETED" and recorded.counters["turns"] > 3
    changed = Event.objects.get(run=recorded, type="budget.changed")

    result = simulate(recorded)

    assert result.same_disposition and result.same_decisions
    assert result.scripted == (
        "scripted operator changed turns to 24",
        "scripted approver: approve",
    )
    replayed = Event.objects.get(run_id=result.simulated.run_id, type="budget.changed")
    assert replayed.sequence == changed.sequence and replayed.payload["limits"] == {"turns": 24}
    assert replayed.payload["by"] == "user:simulation-requester-north"


@pytest.mark.parametrize(
    ("faults", "expected"),
    [
        (
            [{"point": "after_commit_before_response", "capability": "reserve_part"}],
            ("COMPLETED", "COMPLETED", "all_predicates_pass"),
        ),
        (
            [
                {"point": "after_commit_before_response", "capability": "reserve_part"},
                {"point": "ledger_unavailable", "capability": "reserve_part"},
            ],
            ("ESCALATED", "ESCALATED", "ledger_unavailable"),
        ),
    ],
)
def test_the_recorded_fault_plan_is_simulated_too(world, approver, faults, expected):
    recorded = make_run("reservation", fault_plan=faults)
    approve(recorded, approver)
    assert (recorded.state, recorded.disposition, recorded.terminal_reason) == expected
    result = simulate(recorded)
    assert result.simulated.disposition_key == expected
    assert result.same_disposition


def test_a_simulation_is_not_simulated_again_and_candidates_are_checked(world):
    recorded = make_run("reservation")
    sim = Run.objects.get(pk=simulate(recorded).simulated.run_id)
    with pytest.raises(ReplayError):
        simulate(sim)
    with pytest.raises(ReplayError):
        simulate(recorded, candidate="no-such-scenario")
    with pytest.raises(ReplayError):
        simulate(recorded, candidate="model")  # not a double; the command allows it
    assert replay_modes.simulations_of(recorded) == [sim]


def test_the_command_runs_a_simulation_and_reports_the_comparison(world, approver, capsys):
    recorded = make_run("reservation")
    approve(recorded, approver)
    call_command("replay", str(recorded.pk), "--mode", "simulation")
    out = capsys.readouterr().out
    assert "execution simulation of" in out
    assert "same disposition" in out
    call_command(
        "replay", str(recorded.pk), "--mode", "simulation", "--candidate", "abstain", "--json"
    )
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "simulation"
    assert data["same_disposition"] is False
    assert data["simulated"]["state"] == "ESCALATED"
    with pytest.raises(SystemExit) as exited:
        call_command(
            "replay", str(recorded.pk), "--mode", "simulation", "--candidate", "abstain", "--check"
        )
    assert exited.value.code == 1
    assert len(replay_modes.simulations_of(recorded)) == 3
