"""Two approvers decide the same checkpoint at the same moment over HTTP (approve against
decline, two tabs of one approver): one decision is recorded, and the other person is told
what was decided, by whom, not only that the checkpoint "was already decided"."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from access.roles import APPROVER
from approvals.models import Checkpoint, Decision, DecisionRefusal
from fieldops import points
from kernel import clock
from runs.models import Event
from tests.conftest import make_user
from tests.helpers import at_once, make_run
from tests.runs.console.conftest import checkpoint_of, client_for


@contextlib.contextmanager
def _expiring_at(point: str, cp: Checkpoint) -> Iterator[None]:
    """The checkpoint's expiry passes when a request reaches the drill point ``point``:
    after it read the checkpoint live, before it writes (the moment it expires)."""

    def expire_now(reached: str, _key: str) -> None:
        if reached == point and clock.now() < cp.expires_at:
            clock.advance((cp.expires_at - clock.now()).total_seconds() + 0.001)

    previous = points.install(expire_now)
    try:
        yield
    finally:
        points.install(previous)


def _post(client: Client, cp: Checkpoint, verdict: str, reason: str) -> Callable[[], Any]:
    url = reverse("approvals-decide", args=[cp.pk])
    form = {"verdict": verdict, "seen_hash": cp.proposal_hash, "reason": reason}
    return lambda: client.post(url, form)


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_approve_and_decline_at_once_tell_the_later_one_who_decided_what(
    world: None, approver: Any
) -> None:
    other = make_user("approver-2", "north", APPROVER)
    run = make_run(principal="user:operator", advance=True)
    cp = checkpoint_of(run)
    approve, decline = client_for(approver), client_for(other)
    answers = at_once(
        "approvals.before_decision_append",
        [
            _post(approve, cp, "approve", "stock confirmed"),
            _post(decline, cp, "decline", "wrong slot"),
        ],
    )
    assert sorted(a.status_code for a in answers) == [302, 409], [a.status_code for a in answers]
    decision = Decision.objects.get(checkpoint=cp)
    winner = decision.decided_by_ref
    late = answers[1] if winner == "user:approver" else answers[0]
    told = late.content.decode()
    verdict = "approved" if decision.verdict == "APPROVE" else "declined"
    assert f"already {verdict} by {winner}" in told, told
    assert f"“{decision.reason}”" in told, told
    (refusal,) = DecisionRefusal.objects.filter(checkpoint=cp)
    assert refusal.code == "already_decided"
    assert Event.objects.filter(run=run, type="late_approval.rejected").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_approver_in_two_tabs_is_told_it_was_their_own_decision(
    world: None, approver: Any
) -> None:
    run = make_run(principal="user:operator", advance=True)
    cp = checkpoint_of(run)
    first = client_for(approver)
    second = Client()
    second.cookies = first.cookies  # the same browser session, another tab
    answers = at_once(
        "approvals.before_decision_append",
        [_post(first, cp, "approve", "tab one"), _post(second, cp, "approve", "tab two")],
    )
    assert sorted(a.status_code for a in answers) == [302, 409]
    decision = Decision.objects.get(checkpoint=cp)
    late = next(a for a in answers if a.status_code == 409)
    told = late.content.decode()
    assert "already approved by you (user:approver)" in told, told
    assert f"“{decision.reason}”" in told


def _question(user: Any) -> Checkpoint:
    run = make_run("clarify", principal="user:operator", requested_by=user, namespace="live")
    assert run.state == "WAITING_HUMAN"
    cp = checkpoint_of(run)
    assert cp.kind == "clarification"
    return cp


def _answer(client: Client, cp: Checkpoint, answer: str) -> Callable[[], Any]:
    url = reverse("approvals-answer", args=[cp.pk])
    return lambda: client.post(url, {"answer": answer})


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_question_answered_in_two_tabs_at_once_says_which_answer_was_recorded(
    world: None, operator: Any
) -> None:
    cp = _question(operator)
    first = client_for(operator)
    second = Client()
    second.cookies = first.cookies
    answers = at_once(
        "approvals.before_answer_append",
        [_answer(first, cp, "LOC-N1"), _answer(second, cp, "LOC-N2")],
    )
    assert sorted(a.status_code for a in answers) == [302, 409], [a.status_code for a in answers]
    decision = Decision.objects.get(checkpoint=cp)
    told = next(a for a in answers if a.status_code == 409).content.decode()
    assert "already answered by you (user:operator)" in told, told
    assert f"“{decision.answer}”" in told
    assert DecisionRefusal.objects.filter(checkpoint=cp, code="already_decided").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_question_answered_while_the_run_is_cancelled_names_the_cancellation(
    world: None, operator: Any
) -> None:
    """The requester's answer has read the waiting question when an operator's cancel
    commits: the answer is refused, naming who cancelled and why (it said only that the
    run 'is no longer waiting')."""
    lead = make_user("lead", "north", "operator")
    cp = _question(operator)
    cancelled: list[Any] = []

    def cancel_now(point: str, _key: str) -> None:
        if point != "approvals.before_answer_append" or cancelled:
            return

        def post() -> None:
            try:
                url = reverse("runs-cancel", args=[cp.run_id])
                cancelled.append(client_for(lead).post(url, {"reason": "customer withdrew"}))
            finally:
                connection.close()

        other = threading.Thread(target=post)
        other.start()
        other.join()

    previous = points.install(cancel_now)
    try:
        answer = client_for(operator).post(
            reverse("approvals-answer", args=[cp.pk]), {"answer": "LOC-N1"}
        )
    finally:
        points.install(previous)
    assert cancelled[0].status_code == 302
    told = answer.content.decode()
    assert answer.status_code == 409, told
    assert "The run was cancelled by user:lead" in told and "customer withdrew" in told, told
    assert not Decision.objects.filter(checkpoint=cp).exists()
    assert DecisionRefusal.objects.filter(checkpoint=cp, code="run_cancelled").count() == 1


@pytest.mark.django_db
def test_an_approval_whose_checkpoint_expires_while_it_is_recorded_is_refused(
    world: None, approver: Any
) -> None:
    """The approval read the checkpoint live, and its expiry passed before the decision
    was written (the moment it expires): it is refused as expired and recorded once as
    late_approval.rejected, never written after the expiry as if in time."""
    run = make_run(principal="user:operator", advance=True)
    cp = checkpoint_of(run)

    with _expiring_at("approvals.before_decision_append", cp):
        response = client_for(approver).post(
            reverse("approvals-decide", args=[cp.pk]),
            {"verdict": "approve", "seen_hash": cp.proposal_hash, "reason": "just in time"},
        )
    told = response.content.decode()
    assert response.status_code == 409, told
    assert "This checkpoint expired at" in told, told
    assert not Decision.objects.filter(checkpoint=cp).exists()
    assert DecisionRefusal.objects.filter(checkpoint=cp, code="checkpoint_expired").count() == 1
    assert Event.objects.filter(run=run, type="late_approval.rejected").count() == 1


@pytest.mark.django_db
def test_an_answer_whose_question_expires_while_it_is_recorded_is_refused(
    world: None, operator: Any
) -> None:
    cp = _question(operator)

    with _expiring_at("approvals.before_answer_append", cp):
        response = client_for(operator).post(
            reverse("approvals-answer", args=[cp.pk]), {"answer": "LOC-N1"}
        )
    told = response.content.decode()
    assert response.status_code == 409, told
    assert "This checkpoint expired at" in told, told
    assert not Decision.objects.filter(checkpoint=cp).exists()
    assert DecisionRefusal.objects.filter(checkpoint=cp, code="checkpoint_expired").count() == 1
