"""Approvals: the queue, the exact proposal, decisions and every refusal."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import Checkpoint, Decision, DecisionRefusal
from kernel import clock
from runs import services
from runs.engine import runner
from runs.models import Run
from tests.helpers import make_run, types
from tests.runs.console.conftest import checkpoint_of, client_for

pytestmark = pytest.mark.django_db


def _decide(client: Client, checkpoint: Checkpoint, follow: bool = False, **form: str) -> Any:
    data = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"}
    data.update(form)
    return client.post(reverse("approvals-decide", args=[checkpoint.pk]), data, follow=follow)


def test_the_queue_lists_pending_checkpoints_with_time_to_expiry(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = as_approver.get(reverse("approvals-queue"))
    body = response.content.decode()
    assert checkpoint.pk in body and checkpoint.effect_summary in body
    [(row, seconds)] = response.context["rows"]
    assert row.pk == checkpoint.pk
    assert 0 < seconds <= settings.FIELDOPS_APPROVAL_TTL_SECONDS


def test_the_queue_filters_by_kind_and_run_id(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    url = reverse("approvals-queue")

    def shown(**params: str) -> list[str]:
        response = as_approver.get(url, params)
        assert response.status_code == 200 and response.context["error"] == ""
        return [c.pk for c, _ in response.context["rows"]]

    assert shown(kind="approval") == [checkpoint.pk]
    assert shown(kind="clarification") == []
    prefix = waiting_run.pk.hex[:6]
    assert shown(q=prefix) == [checkpoint.pk]
    assert shown(q=str(waiting_run.pk)) == [checkpoint.pk]
    other = "0" * 6 if not prefix.startswith("0") else "f" * 6
    assert shown(q=other, kind="approval") == []
    body = as_approver.get(url, {"q": other}).content.decode()
    assert "No pending checkpoint matches these filters" in body


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "not-hex!"}, "A run id is hexadecimal"),
        ({"kind": "everything"}, "There is no checkpoint kind &#x27;everything&#x27;"),
    ],
)
def test_bad_queue_filters_get_a_clear_message(
    as_approver: Client, waiting_run: Run, params: dict[str, str], message: str
) -> None:
    response = as_approver.get(reverse("approvals-queue"), params)
    body = response.content.decode()
    assert response.status_code == 200 and message in body and 'role="alert"' in body
    assert response.context["rows"] == []


def test_the_queue_refreshes_itself_with_its_filters(as_approver: Client, waiting_run: Run) -> None:
    url = reverse("approvals-queue")
    page = as_approver.get(url, {"kind": "approval"}).content.decode()
    assert f'hx-get="{url}?kind=approval" hx-trigger="every 5s"' in page
    # The poll asks for the queue region only (htmx names its target).
    poll = as_approver.get(
        url, {"kind": "approval"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="queue"
    )
    body = poll.content.decode()
    assert body.lstrip().startswith('<section id="queue"') and "<form" not in body
    assert checkpoint_of(waiting_run).pk in body


def test_the_queue_is_empty_for_another_tenant_and_closed_to_other_roles(
    as_outsider: Client, as_operator: Client, waiting_run: Run
) -> None:
    body = as_outsider.get(reverse("approvals-queue")).content.decode()
    assert waiting_run.waiting_checkpoint not in body
    assert "Nothing in the live world waits for a decision" in body
    assert as_operator.get(reverse("approvals-queue")).status_code == 403
    assert as_operator.get(reverse("approvals-history")).status_code == 403


def test_the_proposal_view_shows_exactly_what_will_be_sent(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = as_approver.get(reverse("approvals-detail", args=[checkpoint.pk]))
    body = response.content.decode()
    assert response.context["hash_verified"]
    assert f'name="seen_hash" value="{checkpoint.proposal_hash}"' in body
    for key, value in checkpoint.canonical.items():
        assert key in body
        if isinstance(value, str):
            assert value in body, key
    for text in (
        checkpoint.effect_summary,
        checkpoint.idempotency_note,
        checkpoint.lost_response_note,
        checkpoint.compensation_note,
        "Data crossing the boundary",
        "requires role <strong>approver</strong>",
    ):
        assert text in body, text
    ages = response.context["evidence"]
    inventory = next(a for a in ages if a.capability == "check_inventory")
    assert inventory.fresh is True and inventory.limit_s
    assert reverse("runs-evidence", args=[waiting_run.pk, inventory.ref]) in body
    for field in ("slot_id", "quantity", "part_id", "location_id"):
        assert f'name="change_{field}"' in body


def test_another_tenant_cannot_see_or_decide_the_checkpoint(
    as_outsider: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    assert as_outsider.get(reverse("approvals-detail", args=[checkpoint.pk])).status_code == 404
    assert _decide(as_outsider, checkpoint).status_code == 404
    assert not Decision.objects.exists() and not DecisionRefusal.objects.exists()


def test_an_approver_approves_and_the_run_completes(
    as_approver: Client, waiting_run: Run, django_capture_on_commit_callbacks: Any
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    with django_capture_on_commit_callbacks(execute=True):
        response = _decide(as_approver, checkpoint, reason="matches the manual")
    assert response.status_code == 302
    assert response["Location"] == reverse("runs-detail", args=[waiting_run.pk])
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.verdict == "APPROVE" and decision.seen_hash == checkpoint.proposal_hash
    assert decision.decided_by_ref == "user:approver"
    waiting_run.refresh_from_db()
    assert waiting_run.state == "COMPLETED"
    assert "approval.granted" in types(waiting_run)


def test_a_tampered_hash_is_refused_as_a_conflict(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = _decide(as_approver, checkpoint, seen_hash="0" * 64)
    assert response.status_code == 409
    body = response.content.decode()
    assert "the hash you reviewed does not match" in body
    assert "Reload to review the current revision" in body
    assert DecisionRefusal.objects.get().code == "hash_mismatch"
    assert not Decision.objects.exists()
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"


def test_an_expired_checkpoint_is_refused_and_recorded_late(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    clock.advance(settings.FIELDOPS_APPROVAL_TTL_SECONDS + 5)
    response = _decide(as_approver, checkpoint)
    assert response.status_code == 409
    assert "expired" in response.content.decode()
    assert DecisionRefusal.objects.get().code == "checkpoint_expired"
    assert types(waiting_run)[-1] == "late_approval.rejected"


def test_a_used_approval_is_refused(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    assert _decide(as_approver, checkpoint).status_code == 302
    again = _decide(as_approver, checkpoint)
    assert again.status_code == 409
    # It names the decision that used it: here the same approver's own, from before.
    assert "This checkpoint was already approved by you (user:approver) at " in (
        again.content.decode()
    )
    assert Decision.objects.count() == 1


def test_the_requester_cannot_approve_their_own_run(lead: Any) -> None:
    run = make_run(principal="user:lead", requested_by=lead)
    checkpoint = checkpoint_of(run)
    client = client_for(lead)
    page = client.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    assert "You requested this run" in page
    response = _decide(client, checkpoint)
    assert response.status_code == 403
    assert "someone else must approve it" in response.content.decode()
    assert DecisionRefusal.objects.get().code == "self_approval"
    assert not Decision.objects.exists()


def test_a_non_approver_is_refused_with_403(as_operator: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    assert as_operator.get(reverse("approvals-detail", args=[checkpoint.pk])).status_code == 403
    response = _decide(as_operator, checkpoint)
    assert response.status_code == 403
    assert DecisionRefusal.objects.get().code == "not_an_approver"


def test_pages_link_a_checkpoint_only_for_who_may_open_it(
    as_operator: Client, as_approver: Client, waiting_run: Run
) -> None:
    """An operator's run page (and its full checkpoint list) names the checkpoint a run
    waits on without linking to the page that would answer them 403; an approver's links."""
    checkpoint = checkpoint_of(waiting_run)
    link = reverse("approvals-detail", args=[checkpoint.pk])
    pages = [
        reverse("runs-detail", args=[waiting_run.pk]),
        reverse("runs-checkpoints", args=[waiting_run.pk]),
    ]
    for page in pages:
        operator_html = as_operator.get(page).content.decode()
        assert checkpoint.pk in operator_html
        assert f'href="{link}"' not in operator_html, page
        assert f'href="{link}"' in as_approver.get(page).content.decode(), page
    operator_page = as_operator.get(pages[0]).content.decode()
    assert "(approvers review it)" in operator_page
    # The timeline's checkpoint reference leads an operator to the run's checkpoint list.
    assert f'href="{pages[1]}" class="ref">checkpoint</a>' in operator_page


def test_a_decision_needs_a_reason_and_a_verdict(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    missing = _decide(as_approver, checkpoint, reason="  ")
    assert missing.status_code == 400
    assert "A decision needs a reason." in missing.content.decode()
    assert _decide(as_approver, checkpoint, verdict="maybe").status_code == 400
    assert not Decision.objects.exists()


def test_decisions_need_csrf(approver: Any, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    strict = client_for(approver, enforce_csrf_checks=True)
    assert _decide(strict, checkpoint).status_code == 403
    assert not Decision.objects.exists()


def test_a_cancelled_run_cannot_be_approved(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    response = _decide(as_approver, checkpoint)
    assert response.status_code == 409
    assert not Decision.objects.exists()


def test_a_decline_with_a_requested_change_reaches_the_next_proposal(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = _decide(
        as_approver, checkpoint, verdict="decline", reason="use the van", change_slot_id="S-N2-01"
    )
    assert response.status_code == 302
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.verdict == "DECLINE"
    assert decision.requested_change == {"slot_id": "S-N2-01"}
    runner.advance(str(waiting_run.pk), worker="test")
    following = checkpoint_of(waiting_run)
    assert following.pk != checkpoint.pk
    assert following.prior_requested_change == {"slot_id": "S-N2-01"}
    page = as_approver.get(reverse("approvals-detail", args=[following.pk])).content.decode()
    assert "A previous reviewer asked for a change" in page and "slot_id = S-N2-01" in page


def test_a_plain_decline_says_the_run_ends_without_the_reservation(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = _decide(as_approver, checkpoint, verdict="decline", reason="not now", follow=True)
    page = response.content.decode()
    assert (
        "Declined. Nothing was reserved: without a requested change, the run ends without "
        "this reservation." in page
    )
    assert "changed proposal" not in page
    runner.advance(str(waiting_run.pk), worker="test")
    waiting_run.refresh_from_db()
    # What the message said: the run ends (the double abstains: escalated to a person).
    assert waiting_run.state == "ESCALATED"
    assert waiting_run.terminal_reason == "no_applicable_tool"
    assert not Checkpoint.objects.filter(run=waiting_run, status="PENDING").exists()


def test_a_decline_with_a_requested_change_says_a_changed_proposal_needs_its_own_approval(
    as_approver: Client, waiting_run: Run
) -> None:
    checkpoint = checkpoint_of(waiting_run)
    response = _decide(
        as_approver,
        checkpoint,
        verdict="decline",
        reason="use the van",
        change_slot_id="S-N2-01",
        follow=True,
    )
    page = response.content.decode()
    assert (
        "Declined with a requested change (slot_id = S-N2-01). Nothing was reserved; a changed "
        "proposal will need its own approval." in page
    )
    assert "the run ends" not in page
    runner.advance(str(waiting_run.pk), worker="test")
    following = checkpoint_of(waiting_run)  # what the message said
    assert following.pk != checkpoint.pk and following.status == "PENDING"


def test_an_approval_says_the_run_dispatches_exactly_this(
    as_approver: Client, waiting_run: Run
) -> None:
    response = _decide(as_approver, checkpoint_of(waiting_run), follow=True)
    page = response.content.decode()
    assert "Approved. The run checks everything again first: it dispatches exactly this" in page
    assert "nothing is sent and a new proposal needs its own approval" in page
    assert "Declined" not in page


def test_history_lists_decisions_and_refusals(as_approver: Client, waiting_run: Run) -> None:
    checkpoint = checkpoint_of(waiting_run)
    _decide(as_approver, checkpoint, seen_hash="f" * 64)
    _decide(as_approver, checkpoint, reason="checked stock")
    body = as_approver.get(reverse("approvals-history")).content.decode()
    assert "checked stock" in body and "APPROVE" in body
    assert "hash_mismatch" in body


def test_the_requester_answers_a_clarification(
    operator: Any, as_approver: Client, approver: Any
) -> None:
    run = make_run("clarify", principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    assert checkpoint.kind == "clarification"
    url = reverse("approvals-answer", args=[checkpoint.pk])
    # Someone else (even an approver) cannot answer for the requester.
    refused = as_approver.post(url, {"answer": "LOC-N1"})
    assert refused.status_code == 403
    requester = client_for(operator)
    assert (
        "Your answer"
        in requester.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    )
    assert requester.post(url, {"answer": " "}).status_code == 400
    response = requester.post(url, {"answer": "Use the north depot LOC-N1."})
    assert response.status_code == 302
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.verdict == "ANSWER" and decision.answer == "Use the north depot LOC-N1."
    assert "clarification.answered" in types(run)
    # An approval decision on a question is refused.
    assert _decide(as_approver, checkpoint).status_code in (400, 409)


def test_queue_and_history_render_with_a_constant_number_of_queries(
    as_approver: Client, approver: Any, operator: Any, django_assert_num_queries: Any
) -> None:
    first = make_run(principal="user:operator", requested_by=operator)
    _decide(as_approver, checkpoint_of(first), seen_hash="1" * 64)
    counts = {}
    for url in (reverse("approvals-queue"), reverse("approvals-history")):
        with CaptureQueriesContext(connection) as queries:
            assert as_approver.get(url).status_code == 200
        counts[url] = len(queries.captured_queries)
    for _ in range(3):
        run = make_run(principal="user:operator", requested_by=operator)
        _decide(as_approver, checkpoint_of(run), seen_hash="2" * 64)
    _decide(as_approver, checkpoint_of(first))
    for url, count in counts.items():
        with django_assert_num_queries(count):
            assert as_approver.get(url).status_code == 200


def test_the_queue_shows_live_world_checkpoints_unless_another_world_is_chosen(
    as_approver: Client, waiting_run: Run, operator: Any
) -> None:
    lab = make_run(principal="user:operator", requested_by=operator)  # the fault lab's world
    live_checkpoint, lab_checkpoint = checkpoint_of(waiting_run).pk, checkpoint_of(lab).pk
    url = reverse("approvals-queue")

    def shown(**params: str) -> set[str]:
        return {c.pk for c, _ in as_approver.get(url, params).context["rows"]}

    assert shown() == {live_checkpoint}
    assert shown(world="faultlab") == {lab_checkpoint}
    assert shown(world="all") == {live_checkpoint, lab_checkpoint}
    assert shown(world="simulation") == set()
    # The chosen world survives the 5-second refresh.
    page = as_approver.get(url, {"world": "faultlab"}).content.decode()
    assert f'hx-get="{url}?world=faultlab" hx-trigger="every 5s"' in page
