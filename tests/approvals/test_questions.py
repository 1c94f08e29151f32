"""Questions for you: the clarifications waiting for the signed-in requester's answer."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from kernel import clock
from runs.models import Run
from tests.conftest import make_user
from tests.helpers import make_run

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _asking(principal: str, requested_by: Any, tenant: str = "north") -> Run:
    run = make_run(
        "clarify", principal=principal, requested_by=requested_by, namespace="live", tenant=tenant
    )
    assert run.state == "WAITING_HUMAN"
    return run


def _question(run: Run) -> Checkpoint:
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    assert checkpoint.kind == "clarification"
    return checkpoint


def test_it_lists_only_my_pending_questions_newest_first(world: None, operator: Any) -> None:
    lead = make_user("lead", "north", "operator", "approver")
    south = make_user("operator-south", "south", "operator")
    older = _question(_asking("user:operator", operator))
    clock.advance(60)
    newer = _question(_asking("user:operator", operator))
    answered = _asking("user:operator", operator)
    client = _client(operator)
    client.post(reverse("approvals-answer", args=[_question(answered).pk]), {"answer": "LOC-N1"})
    assert Checkpoint.objects.get(run=answered, kind="clarification").status == "ANSWERED"
    others = _question(_asking("user:lead", lead))
    # Another tenant's run whose principal reference is spelt the same: still not mine.
    elsewhere = _question(_asking("user:operator", south, tenant="south"))
    # An approval this operator requested is for an approver, not a question for them.
    approval = make_run(principal="user:operator", requested_by=operator, namespace="live")

    response = client.get(reverse("approvals-questions"))
    assert response.status_code == 200
    body = response.content.decode()
    listed = [c.pk for c in response.context["questions"]]
    assert listed == [newer.pk, older.pk]
    assert body.index(newer.pk) < body.index(older.pk)
    assert reverse("approvals-detail", args=[newer.pk]) in body
    assert "Which depot should supply the part?" in body
    for absent in (_answered_pk(answered), others.pk, elsewhere.pk, approval.waiting_checkpoint):
        assert absent not in body
    # The navigation counts them, on every page.
    nav = client.get(reverse("runs-list")).content.decode()
    nav = nav[nav.index('<nav aria-label="Main">') : nav.index("</nav>")]
    assert 'href="/approvals/questions/">Questions for you' in nav
    assert '<span class="badge nav-count">2<span class="sr-only"> waiting</span></span>' in nav
    # The lead sees their own only.
    theirs = _client(lead).get(reverse("approvals-questions")).context["questions"]
    assert [c.pk for c in theirs] == [others.pk]


def _answered_pk(run: Run) -> str:
    return str(Checkpoint.objects.get(run=run, kind="clarification").pk)


def test_an_expired_question_is_no_longer_listed(world: None, operator: Any) -> None:
    _asking("user:operator", operator)
    clock.advance(16 * 60)  # past the checkpoint's lease: an answer would be refused
    response = _client(operator).get(reverse("approvals-questions"))
    assert list(response.context["questions"]) == []


def test_with_no_question_waiting_it_says_so_and_the_navigation_shows_no_count(
    world: None,
) -> None:
    lead = make_user("lead", "north", "operator", "approver")  # also sees Approvals
    response = _client(lead).get(reverse("approvals-questions"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "No question is waiting for your answer." in body
    nav = body[body.index('<nav aria-label="Main">') : body.index("</nav>")]
    assert 'aria-current="page">Questions for you</a>' in nav
    assert "nav-count" not in nav
    # Only the page's own link is the current one (not Approvals, whose address it extends).
    assert nav.count('aria-current="page"') == 1
