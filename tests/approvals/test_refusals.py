"""Honest refusals and bounded inputs (issue 19): each refusal names its real cause, is
recorded, and (for anyone with standing) appears on the run's timeline."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint, Decision, DecisionRefusal
from kernel import clock
from runs import services as runs
from runs.engine import sweeper
from runs.models import Event, Run
from tests.conftest import make_user
from tests.helpers import decline, make_run, types

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _checkpoint(run: Run) -> Checkpoint:
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)


def _decide(client: Client, checkpoint: Checkpoint, **form: str) -> Any:
    data = {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"}
    data.update(form)
    return client.post(reverse("approvals-decide", args=[checkpoint.pk]), data)


@pytest.fixture
def waiting(world: None, operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_a_300_kb_requested_change_is_a_clear_400_and_a_recorded_refusal(
    waiting: Run, approver: Any
) -> None:
    checkpoint = _checkpoint(waiting)
    before = Event.objects.filter(run=waiting).count()
    response = _decide(
        _client(approver), checkpoint, verdict="decline", change_slot_id="S" * 300_000
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "input_too_large" in body
    assert "at most 64 characters and the slot_id sent has 300000" in body
    assert DecisionRefusal.objects.get().code == "input_too_large"
    assert not Decision.objects.exists()
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"
    # The refusal is on the run's timeline as a control event, with nothing else.
    added = list(Event.objects.filter(run=waiting, sequence__gt=before).order_by("sequence"))
    assert [(e.type, e.reason_code) for e in added] == [("decision.refused", "input_too_large")]


def test_a_reason_too_large_is_told_the_limit_and_the_size_it_had(
    waiting: Run, approver: Any
) -> None:
    checkpoint = _checkpoint(waiting)
    response = _decide(_client(approver), checkpoint, reason="r" * 1234)
    assert response.status_code == 400
    body = response.content.decode()
    assert "input_too_large" in body
    assert "A reason may be at most 1000 characters and this one has 1234" in body
    change = _decide(
        _client(approver), checkpoint, verdict="decline", change_slot_id="S" * 70
    ).content.decode()
    assert "at most 64 characters and the slot_id sent has 70" in change
    assert list(DecisionRefusal.objects.values_list("code", flat=True)) == [
        "input_too_large",
        "input_too_large",
    ]
    assert not Decision.objects.exists()


def test_an_oversized_reason_is_refused_not_truncated(waiting: Run, approver: Any) -> None:
    checkpoint = _checkpoint(waiting)
    response = _decide(_client(approver), checkpoint, reason="r" * 1001)
    assert response.status_code == 400
    assert DecisionRefusal.objects.get().code == "input_too_large"
    ok = _decide(_client(approver), checkpoint, reason="r" * 1000)
    assert ok.status_code == 302
    assert len(Decision.objects.get().reason) == 1000


def test_a_reason_at_the_limit_with_line_breaks_counts_them_as_the_browser_does(
    waiting: Run, approver: Any
) -> None:
    """The textarea's maxlength counts a line break once; the form sends it as CRLF."""
    checkpoint = _checkpoint(waiting)
    typed = "\n".join(["r" * 99] * 10)  # 1000 characters in the textarea, 1009 sent
    ok = _decide(_client(approver), checkpoint, reason=typed.replace("\n", "\r\n"))
    assert ok.status_code == 302
    assert Decision.objects.get().reason == typed


def test_a_changed_proposal_is_told_apart_from_an_altered_page(waiting: Run, approver: Any) -> None:
    first = _checkpoint(waiting)
    assert decline(waiting, approver, requested_change={"slot_id": "S-N1-02"}).recorded
    second = _checkpoint(waiting)
    assert second.pk != first.pk
    other = make_user("approver-2", "north", "approver")
    changed = _decide(_client(other), second, seen_hash=first.proposal_hash)
    assert changed.status_code == 409
    assert "The proposal changed since you opened it" in changed.content.decode()
    altered = _decide(_client(other), second, seen_hash="f" * 64)
    assert altered.status_code == 409
    assert "The page was altered" in altered.content.decode()
    codes = list(DecisionRefusal.objects.order_by("pk").values_list("code", flat=True))
    assert codes == ["proposal_changed", "hash_mismatch"]
    assert types(waiting).count("decision.refused") == 2


def test_a_cancelled_runs_checkpoint_says_who_cancelled_and_when(
    waiting: Run, approver: Any
) -> None:
    checkpoint = _checkpoint(waiting)
    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="customer called")
    client = _client(approver)
    page = client.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    assert "Cancelled:" in page and "cancelled by user:operator at" in page
    assert "customer called" in page
    assert "Exactly what will be sent" not in page
    assert "What would have been sent (the run was cancelled)" in page
    assert 'id="decide"' not in page
    response = _decide(client, checkpoint)
    assert response.status_code == 409
    assert "The run was cancelled by user:operator at" in response.content.decode()
    assert DecisionRefusal.objects.get().code == "run_cancelled"
    assert types(waiting)[-1] == "late_approval.rejected"


def test_an_expired_checkpoint_is_refused_as_expired_and_its_page_says_so(
    waiting: Run, approver: Any
) -> None:
    checkpoint = _checkpoint(waiting)
    clock.advance(settings.FIELDOPS_APPROVAL_TTL_SECONDS + 5)
    sweeper.sweep()
    client = _client(approver)
    page = client.get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    assert "Expired:" in page and "This checkpoint expired at" in page
    assert "Exactly what will be sent" not in page
    response = _decide(client, checkpoint)
    assert response.status_code == 409
    assert DecisionRefusal.objects.get().code == "checkpoint_expired"
    assert "already decided" not in response.content.decode()


def test_the_page_shows_one_deciding_expiry(waiting: Run, approver: Any) -> None:
    checkpoint = _checkpoint(waiting)
    page = _client(approver).get(reverse("approvals-detail", args=[checkpoint.pk]))
    body = page.content.decode()
    assert body.count("expires in") == 1
    if checkpoint.canonical.get("expires_at") != clock.iso(checkpoint.expires_at):
        assert "the checkpoint's expiry above comes first and is the one that decides" in body


def test_the_requester_sees_the_approve_button_disabled_with_the_reason(world: None) -> None:
    lead = make_user("lead", "north", "operator", "approver")
    run = make_run(principal="user:lead", requested_by=lead, namespace="live")
    checkpoint = _checkpoint(run)
    page = _client(lead).get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    assert 'value="approve" class="primary" disabled' in page
    assert "You requested this run; someone else must approve it." in page
    # An approver who is not the requester gets a live button.
    other = make_user("approver-2", "north", "approver")
    live = _client(other).get(reverse("approvals-detail", args=[checkpoint.pk])).content.decode()
    assert 'value="approve" class="primary">' in live


def test_a_refusal_without_standing_stays_off_the_run_history(waiting: Run, operator: Any) -> None:
    checkpoint = _checkpoint(waiting)
    before = Event.objects.filter(run=waiting).count()
    for _ in range(3):
        assert _decide(_client(operator), checkpoint).status_code == 403
    assert DecisionRefusal.objects.filter(code="not_an_approver").count() == 3
    assert Event.objects.filter(run=waiting).count() == before


def test_an_oversized_reason_or_change_is_marked_invalid_where_it_was_typed(
    waiting: Run, approver: Any
) -> None:
    """A reason over the limit came back as typed but not marked invalid (a missing or a
    bidi-control reason is): the page then put the keyboard on the message, not the field
    to shorten. Now the field over its bound is marked and described by the refusal."""
    checkpoint = _checkpoint(waiting)
    body = _decide(_client(approver), checkpoint, reason="r" * 1234).content.decode()
    field = body[body.index('<textarea id="decision-reason"') :]
    assert 'aria-invalid="true" aria-describedby="decide-refusal"' in field[: field.index(">")]
    assert ">" + "r" * 1234 + "</textarea>" in field  # as typed
    body = _decide(
        _client(approver), checkpoint, verdict="decline", reason="ok", change_slot_id="S" * 70
    ).content.decode()
    field = body[body.index('<textarea id="decision-reason"') :]
    assert "aria-invalid" not in field[: field.index(">")]
    change = body[body.index('id="change-slot_id"') :]
    assert 'aria-invalid="true" aria-describedby="decide-refusal"' in change[: change.index(">")]


def test_a_requested_location_outside_the_runs_scope_comes_back_as_typed_naming_the_allowed(
    waiting: Run, approver: Any
) -> None:
    """The change field offers the run's delegated locations, and a location outside them
    (here another service van of the tenant, which the run was not delegated) is a recorded
    400 with the form as typed: nothing is decided, the run keeps waiting."""
    checkpoint = _checkpoint(waiting)
    page = _client(approver).get(reverse("approvals-detail", args=[checkpoint.pk]))
    body = page.content.decode()
    field = body[body.index('id="change-location_id"') :]
    assert 'list="change-location_id-options"' in field[: field.index(">")]
    options = body[body.index('<datalist id="change-location_id-options">') :]
    options = options[: options.index("</datalist>")]
    assert '<option value="LOC-N1">' in options and "LOC-N2" not in options
    assert "This run may use only LOC-N1" in body

    response = _decide(
        _client(approver),
        checkpoint,
        verdict="decline",
        reason="The van has one.",
        change_location_id="LOC-N2",
        change_quantity="2",
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "&#x27;LOC-N2&#x27; is not a location this run may use" in body
    assert "it may use only LOC-N1" in body and "location_out_of_scope" in body
    field = body[body.index('id="change-location_id"') :]
    field = field[: field.index(">")]
    assert 'value="LOC-N2"' in field
    assert 'aria-invalid="true" aria-describedby="decide-refusal change-location_id-hint"' in field
    assert 'value="2"' in body[body.index('id="change-quantity"') :].split(">")[0]
    assert ">The van has one.</textarea>" in body
    assert '<details class="change" open>' in body
    assert not Decision.objects.exists()
    assert DecisionRefusal.objects.get().code == "location_out_of_scope"
    assert "decision.refused" in types(waiting)
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"
