"""Every fault-lab fixture is an automated test: it must reach its disposition and checks."""

from __future__ import annotations

import io
import re

import pytest

from sim import faultlab


@pytest.mark.parametrize("fixture", faultlab.FIXTURES, ids=lambda f: f.name)
def test_fixture_reaches_its_disposition(world, fixture):
    result = faultlab.run_fixture(fixture)
    assert result.actual == result.expected, result.notes
    assert result.failed_checks == (), result.notes


def test_the_frozen_six_are_all_there():
    frozen = [f.name for f in faultlab.FIXTURES if f.group == "frozen six"]
    assert frozen == [
        "unavailable_tool_loop",
        "early_success",
        "invalid_arguments",
        "ignored_cancellation",
        "repeated_effect",
        "illegal_transition",
    ]


def test_fixtures_never_touch_the_live_world(world):
    from sim.world.models import LedgerEntry, ServiceRequest

    faultlab.run_fixture(faultlab.BY_NAME["reservation"])
    assert not LedgerEntry.objects.filter(namespace="live").exists()
    assert not ServiceRequest.objects.filter(namespace="live").exists()


@pytest.mark.parametrize("name", ["quorum_expiry_with_one_approval", "stale_at_dispatch"])
def test_a_fixture_that_moves_time_leaves_the_live_world_alone(world, monkeypatch, name):
    """The fault lab runs inside the console's process: a fixture that moves time (an
    expiry, aged evidence) moves it for its own thread and expires only its own checkpoint.
    A live run waiting for approval keeps waiting; other threads keep the real clock."""
    import datetime as dt
    import threading

    from approvals.models import Checkpoint
    from kernel import clock
    from tests.helpers import make_run

    live = make_run(namespace="live")
    assert live.state == "WAITING_HUMAN"
    elsewhere: list[dt.datetime] = []  # what the sweeper thread would read meanwhile
    decide = faultlab.approvals.approval_decide

    def decide_and_look_at_another_thread(**kw):
        thread = threading.Thread(target=lambda: elsewhere.append(clock.now()))
        thread.start()
        thread.join()
        return decide(**kw)

    monkeypatch.setattr(faultlab.approvals, "approval_decide", decide_and_look_at_another_thread)
    result = faultlab.run_fixture(faultlab.BY_NAME[name])

    assert result.passed, (result.failed_checks, result.notes)
    live.refresh_from_db()
    assert live.state == "WAITING_HUMAN"
    assert Checkpoint.objects.get(pk=live.waiting_checkpoint).status == "PENDING"
    assert elsewhere
    for moment in elsewhere:
        assert abs(moment - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=60)


def test_the_command_keeps_each_result_as_the_console_does(world):
    from django.core.management import call_command

    from runs.models import FaultLabResult

    call_command("faultlab", "abstain", "tenant_gate_closed", stdout=io.StringIO())
    kept = {r.fixture: r for r in FaultLabResult.objects.all()}
    assert set(kept) == {"abstain", "tenant_gate_closed"}
    assert kept["abstain"].passed and kept["abstain"].run_id
    assert kept["abstain"].ran_by == "system:manage.py faultlab"
    assert kept["tenant_gate_closed"].history["events"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["abstain", "nope"], "unknown fixture(s): nope"),
        (["--list", "abstain"], "give no fixture names"),
    ],
)
def test_the_command_refuses_bad_input_and_changes_nothing(world, argv, message):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from runs.models import FaultLabResult, Run

    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("faultlab", *argv, stdout=io.StringIO())
    assert not FaultLabResult.objects.exists() and not Run.objects.exists()
