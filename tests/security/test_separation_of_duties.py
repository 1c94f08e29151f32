"""Separation of duties through the console: nobody approves a run they requested (not
even ``lead``, who holds operator and approver); every admission and retirement names the
admin who made it; an admin cannot admit a candidate they imported (two people)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from approvals.models import Checkpoint, Decision, DecisionRefusal
from catalog.models import CapabilityVersion, Lifecycle, LifecycleDecision
from runs import services
from runs.engine import runner
from runs.models import Run
from tests.helpers import make_run
from tests.security.world import World, changed, snapshot


def decide(client: Any, checkpoint: Checkpoint, verdict: str = "approve") -> Any:
    return client.post(
        reverse("approvals-decide", args=[checkpoint.pk]),
        {"verdict": verdict, "seen_hash": checkpoint.proposal_hash, "reason": "sod"},
    )


@pytest.mark.parametrize("verdict", ["approve", "decline"])
def test_the_requester_cannot_decide_their_own_run_even_holding_the_approver_role(
    sworld: World, verdict: str
) -> None:
    checkpoint = sworld.checkpoint("lead_approval")
    run_before = Run.objects.get(pk=checkpoint.run_id)
    lead, approver = sworld.client("lead"), sworld.client("approver")
    before = snapshot()
    response = decide(lead, checkpoint, verdict)
    assert response.status_code == 403
    assert "someone else must approve it" in response.content.decode()
    refusal = DecisionRefusal.objects.get(checkpoint=checkpoint)
    assert (refusal.code, refusal.user) == ("self_approval", sworld.users["lead"])
    assert changed(before, snapshot()) == ["approvals.DecisionRefusal (0 -> 1 rows)"]
    run = Run.objects.get(pk=checkpoint.run_id)
    assert (run.state, run.revision) == ("WAITING_HUMAN", run_before.revision)
    # Someone else may: the decision binds them, not the requester.
    assert decide(approver, checkpoint, verdict).status_code == 302
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.decided_by == sworld.users["approver"]
    assert decision.decided_by_ref == "user:approver" != run.principal_ref


def test_a_run_started_in_the_console_is_bound_to_whoever_started_it(sworld: World) -> None:
    lead = sworld.client("lead")
    response = lead.post(
        reverse("runs-start"),
        {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"},
    )
    assert response.status_code == 302
    run = Run.objects.filter(principal_ref="user:lead", requested_by=sworld.users["lead"]).latest(
        "created_at"
    )
    runner.advance(str(run.pk), worker="test")  # the worker's job (after commit in production)
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    assert checkpoint.requested_by_ref == "user:lead"
    assert decide(lead, checkpoint).status_code == 403
    assert not Decision.objects.filter(checkpoint=checkpoint).exists()


def test_a_follow_up_belongs_to_whoever_started_it(sworld: World) -> None:
    """lead follows up operator's run that was cancelled before any dispatch: the follow-up
    is lead's, so lead cannot approve it (and the original requester can approve nothing of
    it either)."""
    ended = make_run(principal="user:operator")
    services.run_cancel(run_id=str(ended.pk), by_ref="user:operator", reason="plan changed")
    response = sworld.client("lead").post(reverse("runs-follow-up", args=[ended.pk]))
    assert response.status_code == 302
    follow_up = Run.objects.get(follows_run_id=ended.pk)
    assert follow_up.principal_ref == "user:lead"
    runner.advance(str(follow_up.pk), worker="test")
    follow_up.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=follow_up.waiting_checkpoint)
    assert decide(sworld.client("lead"), checkpoint).status_code == 403
    assert decide(sworld.client("operator"), checkpoint).status_code == 403  # no approver role
    assert decide(sworld.client("approver"), checkpoint).status_code == 302


def test_a_run_whose_reservation_exists_cannot_be_followed_up(sworld: World) -> None:
    """A follow-up would reserve again: refused with the reason, nothing created."""
    response = sworld.client("lead").post(
        reverse("runs-follow-up", args=[sworld.runs["completed"]])
    )
    assert response.status_code == 409
    assert b"reserve again" in response.content
    assert not Run.objects.filter(follows_run_id=sworld.runs["completed"]).exists()


def test_every_approver_may_decide_exactly_the_runs_they_did_not_request(sworld: World) -> None:
    """Each approver of the tenant against runs each of them requested: only others'."""
    approvers = ["approver", "lead"]
    runs = {
        who: make_run(principal=f"user:{sworld.users[who].username}", namespace="faultlab")
        for who in approvers
    }
    for requester, run in runs.items():
        checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
        for who in approvers:
            response = decide(sworld.client(who), checkpoint)
            if who == requester:
                assert response.status_code == 403, (who, requester)
            else:
                assert response.status_code == 302, (who, requester)
                break
        decision = Decision.objects.get(checkpoint=checkpoint)
        assert decision.decided_by_ref != run.principal_ref


def lifecycle_rows(version: CapabilityVersion) -> list[LifecycleDecision]:
    return list(LifecycleDecision.objects.filter(version=version).order_by("pk"))


ADMISSION = {
    "task_transition": "NEED_PART -> HAVE_PART_EVIDENCE",
    "alternatives": "human lookup",
    "decision": "ADMIT_BOUNDED",
    "expiry": "on contract change",
    "reason": "reviewed by a second admin",
    "local_ref": "check_inventory@1.0.0",
}


def test_an_admin_cannot_admit_what_they_imported_and_the_second_admin_is_recorded(
    sworld: World,
) -> None:
    imported = sworld.version("imported")
    assert imported.imported_by == sworld.users["catalog_admin"]
    url = reverse("catalog-admit", args=[imported.pk])
    importer, reviewer = sworld.client("catalog_admin"), sworld.client("catalog_reviewer")
    before = snapshot()
    # The admit form carries the lifecycle state its page showed.
    form = {**ADMISSION, "lifecycle": imported.lifecycle}
    own = importer.post(url, form)
    assert own.status_code == 409 and "two_person_rule" in own.content.decode()
    assert changed(before, snapshot()) == []
    second = reviewer.post(url, form)
    assert second.status_code == 302
    imported.refresh_from_db()
    assert imported.lifecycle == Lifecycle.ADMITTED
    admission = lifecycle_rows(imported)[-1]
    assert admission.action == "admit"
    assert admission.reviewer == sworld.users["catalog_reviewer"]
    assert admission.reviewer_ref == "user:catalog-reviewer"
    assert admission.admission["reviewer"] == "user:catalog-reviewer"
    assert imported.imported_by == sworld.users["catalog_admin"]  # the importer stays known


def test_an_import_through_the_console_names_the_importer_who_then_cannot_admit_it(
    sworld: World,
) -> None:
    reviewer = sworld.client("catalog_reviewer")
    response = reviewer.post(
        reverse("catalog-import"),
        {
            "server": "mcp.sod.test",
            "tool_list": '{"tools": [{"name": "sod_lookup", "inputSchema": {"type": "object"}, '
            '"annotations": {"readOnlyHint": true}}]}',
        },
    )
    assert response.status_code == 302  # to the import's result page
    row = CapabilityVersion.objects.get(capability_id="sod_lookup")
    assert row.imported_by == sworld.users["catalog_reviewer"]
    [record] = lifecycle_rows(row)
    assert (record.action, record.reviewer_ref) == ("import", "user:catalog-reviewer")
    url = reverse("catalog-admit", args=[row.pk])
    form = {**ADMISSION, "lifecycle": row.lifecycle}
    assert reviewer.post(url, form).status_code == 409
    assert sworld.client("catalog_admin").post(url, form).status_code == 302
    assert lifecycle_rows(row)[-1].reviewer == sworld.users["catalog_admin"]


def test_retiring_and_deprecating_record_the_admin(sworld: World) -> None:
    version = sworld.version("read")
    url = reverse("catalog-decide", args=[version.pk])
    admin = sworld.client("catalog_admin")
    deprecate = {"action": "deprecate", "reason": "superseded", "lifecycle": Lifecycle.ADMITTED}
    assert admin.post(url, deprecate).status_code == 302
    # A deprecated version without an admitted successor: two admins retire it (issue 16).
    retire = {"action": "retire", "reason": "no longer used", "acknowledge": "1"}
    retire["lifecycle"] = Lifecycle.DEPRECATED
    assert sworld.client("catalog_admin").post(url, retire).status_code == 302
    # The second admin confirms the request the retire page shows (its hidden "confirms").
    retire_page = reverse("catalog-retire", args=[version.pk])
    reviewer = sworld.client("catalog_reviewer")
    page = reviewer.get(retire_page).content.decode()
    shown = page.split('name="confirms" value="', 1)[1].split('"', 1)[0]
    confirm = {"reason": "no longer used", "acknowledge": "1", "confirms": shown}
    confirm["lifecycle"] = Lifecycle.DEPRECATED  # the state the retire page shows
    assert reviewer.post(retire_page, confirm).status_code == 302
    version.refresh_from_db()
    assert version.lifecycle == Lifecycle.RETIRED
    deprecate, requested, retired = lifecycle_rows(version)[-3:]
    assert (requested.action, requested.reviewer) == (
        "retire_requested",
        sworld.users["catalog_admin"],
    )
    assert (deprecate.action, deprecate.reviewer, deprecate.reviewer_ref) == (
        "deprecate",
        sworld.users["catalog_admin"],
        "user:catalog-admin",
    )
    assert (retired.action, retired.reviewer, retired.reviewer_ref) == (
        "retire",
        sworld.users["catalog_reviewer"],
        "user:catalog-reviewer",
    )
    assert retired.reason == "no longer used"
    assert "active_run_count" in retired.details  # what the retirement left owned


def test_an_admission_of_a_reviewed_candidate_records_the_admin(sworld: World) -> None:
    version = sworld.version("reviewed_candidate")
    response = sworld.client("catalog_admin").post(
        reverse("catalog-admit", args=[version.pk]),
        {**ADMISSION, "local_ref": "", "lifecycle": version.lifecycle},
    )
    assert response.status_code == 302, response.content.decode()[:500]
    admission = lifecycle_rows(version)[-1]
    assert admission.reviewer == sworld.users["catalog_admin"]
    assert admission.admission["reviewer"] == "user:catalog-admin"
