"""An open checkpoint's page asks every few seconds whether what it shows changed (an
approval counted toward its quorum meanwhile: the quorum card and buttons, out of band;
nothing, 204, while its mark is unchanged) and whether it still is open: nothing to
swap (204) while it is; once it was cancelled with its run, expired, or decided by someone
else, the page gets a notice saying so, the checkpoint's new status and, for an approver,
the decision buttons turned off (out of band: the reason being typed is not touched).
The browser side: tests/browser/test_approvals.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals import services as approvals
from approvals.models import Checkpoint
from runs import services as runs
from tests.conftest import make_user
from tests.helpers import make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = pytest.mark.django_db

POLL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "checkpoint-live"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _quorum_of_two() -> None:
    """North's reservations need two approvers from now on."""
    from approvals.models import ApprovalPolicy

    ApprovalPolicy.objects.create(
        tenant="north", name="two-of", capability="reserve_part", quorum=2
    )


def test_the_page_of_an_open_checkpoint_polls_and_hears_nothing_while_it_is_open(
    approver: Any, operator: Any
) -> None:
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    client = _client(approver)
    url = reverse("approvals-detail", args=[checkpoint.pk])
    page = client.get(url).content.decode()
    assert 'id="checkpoint-live" hx-get="' in page and 'hx-trigger="every 5s"' in page
    polled = client.get(url, **POLL)
    assert polled.status_code == 204 and polled.content == b""


def test_a_run_cancelled_meanwhile_is_said_with_the_buttons_off(
    approver: Any, operator: Any
) -> None:
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    runs.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="part found locally")
    polled = _client(approver).get(reverse("approvals-detail", args=[checkpoint.pk]), **POLL)
    assert polled.status_code == 200
    body = polled.content.decode()
    assert "No longer waiting for a decision:" in body
    assert "cancelled by user:operator at" in body and "part found locally" in body
    assert 'id="checkpoint-status" hx-swap-oob="true">CANCELLED<' in body
    assert 'id="decide-actions" hx-swap-oob="true"' in body
    assert body.count(" disabled ") == 2
    # The region stops polling once closed: the replacement asks for nothing more.
    assert "hx-trigger" not in body
    assert "<html" not in body  # the partial, not the page


def test_a_decision_made_by_another_approver_is_said_with_who_and_why(
    approver: Any, operator: Any
) -> None:
    colleague = make_user("colleague", "north", "approver")
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    result = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=colleague,
        approve=False,
        seen_hash=checkpoint.proposal_hash,
        reason="wrong bin",
    )
    assert result.recorded, result.refusal
    body = _client(approver).get(reverse("approvals-detail", args=[checkpoint.pk]), **POLL)
    text = body.content.decode()
    assert "declined by user:colleague at" in text and "wrong bin" in text
    assert Checkpoint.objects.get(pk=checkpoint.pk).status in text


def test_a_question_answered_in_another_tab_is_said_to_its_requester(operator: Any) -> None:
    """The requester (an operator, no approver) reads their run's question; answered from
    another tab, the page says so, and there are no decision buttons to turn off."""
    run = make_run("clarify", principal="user:operator", requested_by=operator, namespace="live")
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    assert checkpoint.kind == "clarification"
    client = _client(operator)
    url = reverse("approvals-detail", args=[checkpoint.pk])
    assert client.get(url, **POLL).status_code == 204
    answered = approvals.clarification_answer(
        checkpoint_id=checkpoint.pk, user=operator, answer="LOC-N1"
    )
    assert answered.recorded, answered.refusal
    text = client.get(url, **POLL).content.decode()
    assert "No longer waiting for a decision:" in text and "answered by user:operator at" in text
    assert "decide-actions" not in text


def test_another_tenants_checkpoint_is_not_polled(operator: Any) -> None:
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    south = make_user("south-approver", "south", "approver")
    polled = _client(south).get(reverse("approvals-detail", args=[checkpoint.pk]), **POLL)
    assert polled.status_code == 404


def _poll_url(page: str) -> str:
    """The address the page's poller asks (it carries what the page shows)."""
    start = page.index('id="checkpoint-live" hx-get="') + len('id="checkpoint-live" hx-get="')
    return page[start : page.index('"', start)].replace("&amp;", "&")


def test_an_approval_counted_meanwhile_is_shown_and_nothing_else_is_sent_again(
    operator: Any,
) -> None:
    """Quorum 2: a colleague's counted approval (1 of 2) shows on the open page without a
    reload (the count, who approved, who still may); polled again with nothing new, 204."""
    ana = make_user("ana", "north", "approver")
    bo = make_user("bo", "north", "approver")
    _quorum_of_two()
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    assert checkpoint.quorum == 2
    client = _client(bo)
    page = client.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    poll = _poll_url(page)
    assert client.get(poll, **POLL).status_code == 204  # nothing changed yet

    counted = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=ana,
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="Checked by ana.",
    )
    assert counted.recorded and counted.counted, counted.refusal
    polled = client.get(poll, **POLL)
    assert polled.status_code == 200
    body = polled.content.decode()
    assert "<html" not in body  # the partial, not the page
    # The quorum card, out of band, as the page would show it now.
    assert 'id="quorum" hx-swap-oob="true"' in body
    quorum = body.split('id="quorum"', 1)[1].split("</section>")[0]
    assert "Approvals: 1 of 2" in quorum and "user:ana" in quorum and "Checked by ana." in quorum
    assert "Still needed: <strong>1</strong>" in quorum and "user:bo" in quorum
    # Still open: the region keeps polling, with what the page shows now.
    assert 'hx-trigger="every 5s"' in body and "No longer waiting" not in body
    assert "approvals now 1 of 2 (approved by user:ana)" in body
    # bo may still approve: the buttons stay on (the reason being typed is untouched).
    assert 'id="decide-actions" hx-swap-oob="true"' in body and " disabled" not in body
    assert "decision-reason" not in body
    again = _poll_url(body)
    assert again != poll
    assert client.get(again, **POLL).status_code == 204  # nothing new since
    # A poll from the page as first shown still hears of the change (it never saw it).
    assert client.get(poll, **POLL).status_code == 200


def test_my_own_approval_from_another_tab_turns_my_buttons_off(operator: Any) -> None:
    """The same person cannot count twice: approved from another tab, this page's
    buttons turn off with the reason."""
    ana = make_user("ana", "north", "approver")
    make_user("bo", "north", "approver")
    _quorum_of_two()
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    client = _client(ana)
    poll = _poll_url(client.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode())
    approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=ana,
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="From my other tab.",
    )
    body = client.get(poll, **POLL).content.decode()
    actions = body.split('id="decide-actions"', 1)[1].split("</div>")[0]
    assert actions.count(" disabled") == 2
    assert "You already approved" in body


def test_the_notice_of_a_decision_made_elsewhere_says_its_time_as_the_console_does(
    approver: Any, operator: Any
) -> None:
    """The notice reads its time as every other page of the console does (seconds, UTC),
    not as the stored ISO stamp (``2026-12-08T00:39:58.835104+00:00``)."""
    colleague = make_user("colleague", "north", "approver")
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=colleague,
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="matches the manual",
    )
    decided = Checkpoint.objects.get(pk=checkpoint.pk).decision.created_at
    text = (
        _client(approver)
        .get(reverse("approvals-detail", args=[checkpoint.pk]), **POLL)
        .content.decode()
    )
    notice = text.split('id="checkpoint-closed"', 1)[1].split("</div>")[0]
    assert f"approved by user:colleague at {decided:%Y-%m-%d %H:%M:%S} UTC" in notice
    assert "+00:00" not in notice


def test_the_notice_of_a_quorum_completed_elsewhere_names_every_approver(operator: Any) -> None:
    """Quorum 2, completed by two colleagues while a third approver reviews: the notice
    names both whose approvals made it up, not only the one who completed it."""
    ana = make_user("ana", "north", "approver")
    bo = make_user("bo", "north", "approver")
    cy = make_user("cy", "north", "approver")
    _quorum_of_two()
    run = make_run(principal="user:operator", requested_by=operator)
    checkpoint = checkpoint_of(run)
    for user in (ana, bo):
        result = approvals.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=user,
            approve=True,
            seen_hash=checkpoint.proposal_hash,
            reason=f"Checked by {user.username}.",
        )
        assert result.recorded, result.refusal
    text = _client(cy).get(reverse("approvals-detail", args=[checkpoint.pk]), **POLL)
    notice = text.content.decode().split('id="checkpoint-closed"', 1)[1].split("</div>")[0]
    assert "approved by user:ana, user:bo at" in notice
