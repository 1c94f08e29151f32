"""A conflict (same key, different intent) is final, so reconciling cannot close it: an
operator of its tenant marks it reviewed with a reason. The review is an operation record
(who, when, why); the attempt leaves the open obligations (recovery page, runbooks) and
stays in the run's history and the recovery page's history. Nothing is appended to the run
(the spec's event list has no such event) and its state never changes."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from operations.models import Operation
from runs.models import EffectAttempt, Event, Run
from sim import faultlab
from tests.runs.console.conftest import client_for

pytestmark = pytest.mark.django_db

REVIEW = "recovery-conflict-review"
RUNBOOK = "repeated-reservation-attempts"


@pytest.fixture
def conflict(world: None) -> EffectAttempt:
    result = faultlab.run_fixture(faultlab.BY_NAME["same_key_different_intent"])
    attempt = EffectAttempt.objects.select_related("run").get(run_id=result.run_id)
    assert (attempt.run.state, attempt.status) == ("ESCALATED", "CONFLICT")
    return attempt


def _unchanged(attempt: EffectAttempt, events: int) -> None:
    run = Run.objects.get(pk=attempt.run_id)
    assert Event.objects.filter(run=run).count() == events
    assert (run.state, EffectAttempt.objects.get(pk=attempt.pk).status) == (
        "ESCALATED",
        "CONFLICT",
    )


def test_an_operator_marks_a_conflict_reviewed_with_a_reason(
    as_operator: Client, conflict: EffectAttempt
) -> None:
    run = conflict.run
    events = Event.objects.filter(run=run).count()
    recovery = reverse("recovery")
    open_list = as_operator.get(recovery).context["attempts"]
    assert conflict.pk in [a.pk for a in open_list]
    runbook = as_operator.get(reverse("runbooks-detail", args=[RUNBOOK])).content.decode()
    assert f"Mark reviewed: attempt {conflict.pk}" in runbook

    response = as_operator.post(
        reverse(REVIEW),
        {
            "attempt_id": conflict.pk,
            "reason": "ledger record compared with the approved intent; ticket FO-12",
            "runbook": RUNBOOK,
            "step": "5",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('runbooks-detail', args=[RUNBOOK])}#step-5"

    review = Operation.objects.get(kind="review")
    assert review.created_by == "user:operator" and review.tenant == "north"
    assert review.reason == "ledger record compared with the approved intent; ticket FO-12"
    assert review.status == "finished" and review.items.get().target == conflict.pk
    record = as_operator.get(reverse("operations-detail", args=[review.pk])).content.decode()
    assert "ticket FO-12" in record and conflict.pk in record
    assert review.short_id in as_operator.get(reverse("operations-list")).content.decode()
    # Off the obligation list, the runbooks' and bulk reconcile's too.
    page = as_operator.get(recovery)
    assert conflict.pk not in [a.pk for a in page.context["attempts"]]
    body = page.content.decode()
    assert 'id="reviewed-conflicts"' in body
    history = body.split('id="reviewed-conflicts"')[1]
    assert conflict.pk in history and "user:operator" in history and "ticket FO-12" in history
    runbook = as_operator.get(reverse("runbooks-detail", args=[RUNBOOK])).content.decode()
    assert f"Mark reviewed: attempt {conflict.pk}" not in runbook
    preview = as_operator.get(reverse("operations-reconcile-preview"))
    assert preview.context["preview"].count == 0
    # Still in the run's history: its attempts say who reviewed it, when and why.
    detail = as_operator.get(reverse("runs-detail", args=[run.pk])).content.decode()
    assert "reviewed by user:operator" in detail and "ticket FO-12" in detail
    # The run itself is untouched: no event, no state change, the attempt stays CONFLICT.
    _unchanged(conflict, events)


@pytest.mark.parametrize("reason", ["", "   ", "\u200b", "x" * 501])
def test_a_review_without_a_usable_reason_is_refused(
    as_operator: Client, conflict: EffectAttempt, reason: str
) -> None:
    events = Event.objects.filter(run=conflict.run).count()
    response = as_operator.post(reverse(REVIEW), {"attempt_id": conflict.pk, "reason": reason})
    assert response.status_code == 400
    assert "reason" in response.content.decode() and not Operation.objects.exists()
    _unchanged(conflict, events)


def test_a_conflict_is_reviewed_once(as_operator: Client, conflict: EffectAttempt) -> None:
    as_operator.post(reverse(REVIEW), {"attempt_id": conflict.pk, "reason": "first look"})
    again = as_operator.post(reverse(REVIEW), {"attempt_id": conflict.pk, "reason": "second"})
    assert again.status_code == 409
    text = again.content.decode()
    assert "already reviewed by user:operator" in text and "first look" in text
    assert Operation.objects.filter(kind="review").count() == 1


def test_only_a_conflict_is_marked_reviewed(as_operator: Client, world: None) -> None:
    result = faultlab.run_fixture(faultlab.BY_NAME["ledger_outage"])
    attempt = EffectAttempt.objects.get(run_id=result.run_id)
    assert attempt.status != "CONFLICT"
    events = Event.objects.filter(run_id=result.run_id).count()
    response = as_operator.post(reverse(REVIEW), {"attempt_id": attempt.pk, "reason": "seen"})
    assert response.status_code == 409 and "only a conflict" in response.content.decode()
    assert not Operation.objects.exists()
    assert Event.objects.filter(run_id=result.run_id).count() == events
    assert EffectAttempt.objects.get(pk=attempt.pk).status == attempt.status


def test_a_review_needs_an_operator_of_the_attempts_tenant(
    as_approver: Client, operator_south: Any, conflict: EffectAttempt, client: Client
) -> None:
    events = Event.objects.filter(run=conflict.run).count()
    body = {"attempt_id": conflict.pk, "reason": "not mine"}
    assert as_approver.post(reverse(REVIEW), body).status_code == 403
    assert client_for(operator_south).post(reverse(REVIEW), body).status_code == 404
    assert client.post(reverse(REVIEW), body).status_code == 302  # to sign in
    assert as_approver.get(reverse(REVIEW)).status_code == 405
    assert not Operation.objects.exists()
    _unchanged(conflict, events)


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_reviewing_one_conflict_at_once_record_one_review(
    world: None, operator: Any
) -> None:
    from tests.conftest import make_user
    from tests.helpers import at_once

    result = faultlab.run_fixture(faultlab.BY_NAME["same_key_different_intent"])
    attempt = EffectAttempt.objects.get(run_id=result.run_id)
    people = [client_for(operator), client_for(make_user("operator-2", "north", "operator"))]
    answers = at_once(
        "operations.before_conflict_review",
        [
            lambda who=who, n=n: who.post(
                reverse(REVIEW), {"attempt_id": attempt.pk, "reason": f"look {n}"}
            )
            for n, who in enumerate(people)
        ],
    )
    assert sorted(a.status_code for a in answers) == [302, 409]
    (review,) = Operation.objects.filter(kind="review")
    late = next(a for a in answers if a.status_code == 409).content.decode()
    assert f"already reviewed by {review.created_by}" in late and review.reason in late


def test_the_runs_full_attempts_list_shows_the_review_too(
    as_operator: Client, as_approver: Client, conflict: EffectAttempt
) -> None:
    """The run page shows the latest attempts with their review; the run's whole list of
    attempts (its own page) said only CONFLICT."""
    as_operator.post(
        reverse(REVIEW), {"attempt_id": conflict.pk, "reason": "compared; ticket FO-13"}
    )
    attempts = reverse("runs-attempts", args=[conflict.run_id])
    for reader in (as_operator, as_approver):
        page = reader.get(attempts).content.decode()
        row = page.split(f">{conflict.pk}<", 1)[1].split("</tr>")[0]
        assert "conflict reviewed by user:operator" in row and "ticket FO-13" in row


def _terminal_record(page: str) -> str:
    return page.split('id="terminal-h"')[1].split("</section>")[0]


def test_the_terminal_record_shows_a_reviewed_conflict_as_reviewed(
    as_operator: Client, conflict: EffectAttempt
) -> None:
    detail = reverse("runs-detail", args=[conflict.run_id])
    before = _terminal_record(as_operator.get(detail).content.decode())
    assert conflict.pk in before and "reviewed" not in before
    # A conflict is not an unknown effect, and reconciling cannot settle it: it is reviewed.
    assert "unknown" not in before and "reconcile on Recovery" not in before
    assert "1 conflict" in before and "review it on Recovery" in before

    as_operator.post(reverse(REVIEW), {"attempt_id": conflict.pk, "reason": "ticket FO-77"})

    review = Operation.objects.get(kind="review")
    record = _terminal_record(as_operator.get(detail).content.decode())
    # Still listed (the record is never edited), but no longer read as an open obligation.
    assert conflict.pk in record
    assert "conflict reviewed by user:operator" in record
    assert review.created_at.strftime("%Y-%m-%d %H:%M:%S") in record
    assert "review it on Recovery" not in record and "unknown" not in record


def test_a_run_whose_only_open_item_was_a_reviewed_conflict_is_not_told_to_reconcile(
    as_operator: Client, conflict: EffectAttempt
) -> None:
    """Reconciling cannot move a conflict: once reviewed, the run page offers no
    reconciliation, and still no follow-up run (the ledger holds the key: an effect may
    exist). Before, it kept "reconcile_effect" as the run's allowed follow-up forever."""
    from runs import services
    from runs.services import RunInputError

    detail = reverse("runs-detail", args=[conflict.run_id])
    # Before its review: reviewing it, not reconciling it, is what is left.
    before = as_operator.get(detail)
    assert before.context["detail"].follow_up == ("review_conflict",)
    text = before.content.decode()
    assert "reconcile it on Recovery" not in text and 'id="follow-up-review"' in text
    assert f"?q={conflict.pk}" in text.split('id="follow-up-review"', 1)[1].split("</p>")[0]
    with pytest.raises(RunInputError) as unreviewed:
        services.run_follow_up(run=Run.objects.get(pk=conflict.run_id), by_ref="user:operator")
    assert "awaits review" in str(unreviewed.value)

    as_operator.post(reverse(REVIEW), {"attempt_id": conflict.pk, "reason": "ticket FO-78"})
    page = as_operator.get(detail)
    body = page.content.decode()
    assert page.context["detail"].follow_up == ()
    assert "reconcile_effect" not in body and "reconcile it on Recovery" not in body
    assert "Start a follow-up run" not in body
    ended = body.split("The run has ended:", 1)[1].split("</section>")[0]
    assert 'id="follow-up-conflict"' in ended and "an effect may exist" in ended
    allowed = body.split("<dt>Allowed follow-up</dt>", 1)[1].split("</dd>")[0]
    assert allowed == "<dd>none"
    # The service says the same: no follow-up, and not because anything is to reconcile.
    with pytest.raises(RunInputError) as refused:
        services.run_follow_up(run=Run.objects.get(pk=conflict.run_id), by_ref="user:operator")
    assert "reconcile" not in str(refused.value) and "reviewed" in str(refused.value)


def test_a_run_that_ended_on_a_conflict_stores_review_conflict_as_its_follow_up(
    conflict: EffectAttempt,
) -> None:
    """The terminal record, written when the run ended ESCALATED on the reconciliation
    conflict, stores what ``effects.follow_up`` said at that moment: review the conflict
    (reconciling cannot move it). Before, the end of the run counted the attempt only as
    unresolved (it moves to CONFLICT after the record is written, in the same transaction)
    and stored ``reconcile_effect``."""
    from runs.models import TerminalRecord
    from runs.terminal import effect_account

    record = TerminalRecord.objects.get(run_id=conflict.run_id)
    assert record.disposition == "ESCALATED"
    assert record.unresolved == [{"attempt": conflict.pk}]
    assert record.allowed_follow_up == ["review_conflict"]
    run = Run.objects.get(pk=conflict.run_id)
    assert effect_account(run).conflicts == 1  # what the run page reads agrees
