"""Decision replay reports exposure differences (issue 16): each decision's recorded visible
set against what today's catalog and exposure policy would show the same context, and the
run's pins against what a new run would pin today. It still writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from capabilities.contracts import EffectClass
from capabilities.exposure import PHASE_POLICIES, ExposurePolicy, Phase
from catalog import services
from catalog.models import CapabilityVersion
from runs.engine import visibility
from runs.models import Event, Run
from runs.replay import decision as replay_modes
from runs.replay.decision import decision_replay
from tests.helpers import approve, make_run
from tests.runs.replay.helpers import run_snapshot, world_snapshot

ANSWERS = {
    "task_transition": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
    "alternatives": ["keep search_manual 1.0.0"],
    "decision": "ADMIT_BOUNDED",
    "expiry": "expires on contract change",
    "reason": "ten scored passages",
}


def reviewed(ref: str) -> CapabilityVersion:
    capability_id, _, version = ref.rpartition("@")
    return CapabilityVersion.objects.get(
        capability_id=capability_id, version=version, source="reviewed"
    )


def recorded_visible(run: Run) -> list[list[str]]:
    return [
        list(e.payload["visible"])
        for e in Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    ]


@pytest.fixture
def completed(world: None, approver: Any) -> Run:
    run = make_run("reservation")
    approve(run, approver)
    assert run.state == "COMPLETED"
    assert run.components["search_manual"].startswith("1.0.0#")
    return run


def _admit_1_1_0_and_retire_1_0_0(admin: Any) -> None:
    services.capability_admit(version_id=reviewed("search_manual@1.1.0").pk, user=admin, **ANSWERS)
    old = reviewed("search_manual@1.0.0").pk
    services.capability_decide(version_id=old, user=admin, action="deprecate", reason="drain")
    services.capability_decide(version_id=old, user=admin, action="retire", reason="gone")


def test_an_unchanged_catalog_shows_the_recorded_visible_set_and_the_same_pins(
    completed: Run,
) -> None:
    replay = decision_replay(completed, replay_modes.RECORDED)
    assert len(replay.rows) == 5
    for row, recorded in zip(replay.rows, recorded_visible(completed), strict=True):
        assert row.exposure is not None and row.exposure.known
        assert row.exposure.same and row.exposure.summary() == "same visible set"
        assert list(row.exposure.recorded) == sorted(recorded)
        assert row.exposure.current == row.exposure.recorded
        assert row.exposure.current_phase == row.exposure.recorded_phase
    assert replay.exposure_changed == 0
    assert replay.pin_differences == ()


def test_a_retired_pinned_version_is_reported_removed_with_its_reason_and_the_new_pin(
    completed: Run, catalog_admin: Any
) -> None:
    _admit_1_1_0_and_retire_1_0_0(catalog_admin)
    before = run_snapshot(completed), world_snapshot(completed.namespace)

    replay = decision_replay(completed, replay_modes.RECORDED)

    shown = [r for r in replay.rows if r.exposure and "search_manual" in r.exposure.recorded]
    assert shown, "the recorded run was shown search_manual"
    for row in shown:
        assert row.exposure is not None and not row.exposure.same
        assert row.exposure.removed == ("search_manual",)
        assert row.exposure.added == ()
        assert row.exposure.why_removed["search_manual"].startswith("RETIRED")
        assert "-search_manual" in row.exposure.summary()
    assert replay.exposure_changed == len(shown)
    [pin] = replay.pin_differences
    assert pin.capability == "search_manual"
    assert pin.pinned == completed.components["search_manual"]
    assert pin.now.startswith("1.1.0#") and pin.pinned_lifecycle == "RETIRED"
    assert pin.summary() == "search_manual: pinned 1.0.0 (RETIRED), a new run would pin 1.1.0"
    # The recorded decisions themselves still replay the same: exposure is reported apart.
    assert replay.first_divergence is None
    # Nothing was written: no event, no evidence, the run and the world unchanged.
    assert (run_snapshot(completed), world_snapshot(completed.namespace)) == before


def test_a_wider_phase_policy_today_is_reported_as_added_capabilities(
    completed: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    wider = dict(PHASE_POLICIES)
    wider[Phase.DIAGNOSE] = ExposurePolicy(
        frozenset({"equipment", "manuals", "inventory"}), EffectClass.READ
    )
    monkeypatch.setattr(visibility, "PHASE_POLICIES", wider)

    first = decision_replay(completed, replay_modes.RECORDED).rows[0]

    assert first.exposure is not None
    assert first.exposure.recorded_phase == first.exposure.current_phase == "diagnose"
    assert "check_inventory" not in first.exposure.recorded
    assert first.exposure.added == ("check_inventory",)
    assert first.exposure.removed == ()


def test_the_command_and_the_page_report_exposure_and_pin_differences(
    completed: Run,
    catalog_admin: Any,
    approver: Any,
    client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _admit_1_1_0_and_retire_1_0_0(catalog_admin)
    run_id = str(completed.pk)

    call_command("replay", run_id, "--mode", "decision", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["exposure_changed"] >= 1
    assert data["pin_differences"][0]["capability"] == "search_manual"
    changed = [r["exposure"] for r in data["rows"] if r["exposure"]["removed"]]
    assert changed and all(e["removed"] == ["search_manual"] for e in changed)

    call_command("replay", run_id, "--mode", "decision")
    text = capsys.readouterr().out
    assert "exposure today: -search_manual" in text
    assert "pin: search_manual: pinned 1.0.0 (RETIRED), a new run would pin 1.1.0" in text

    client.force_login(approver)
    page = client.get(reverse("runs-replay-decision", args=[completed.pk])).content.decode()
    assert 'id="pin-differences"' in page
    assert "search_manual: pinned 1.0.0 (RETIRED), a new run would pin 1.1.0" in page
    assert 'class="exposure-removed"' in page and "RETIRED" in page
