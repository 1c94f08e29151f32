"""A conflict (same key, different intent) followed through the runbooks: the console says
it is final instead of claiming to reconcile it, and records nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import EffectAttempt, Event, Run
from sim import faultlab

pytestmark = pytest.mark.django_db


def test_reconciling_a_conflict_is_refused_as_final_and_records_nothing(
    as_operator: Client,
) -> None:
    result = faultlab.run_fixture(faultlab.BY_NAME["same_key_different_intent"])
    run = Run.objects.get(pk=result.run_id)
    attempt = EffectAttempt.objects.get(run=run)
    assert (run.state, attempt.status) == ("ESCALATED", "CONFLICT")
    events = Event.objects.filter(run=run).count()

    # The runbook's reconcile step lists the conflict with no reconcile button (pressing it
    # answered "reconciled — CONFLICT" having read and recorded nothing) and says where to go.
    runbook = reverse("runbooks-detail", args=["repeated-reservation-attempts"])
    page = as_operator.get(runbook).content.decode()
    assert attempt.pk in page
    assert f"Reconcile with ledger: attempt {attempt.pk}" not in page
    assert "integrity failure: final, no reconcile" in page

    # A post anyway (an old page, a script): refused, saying why and what to do, back to the
    # runbook step it came from; nothing is appended to the run.
    response = as_operator.post(
        reverse("recovery-reconcile"),
        {"attempt_id": attempt.pk, "runbook": "repeated-reservation-attempts", "step": "4"},
    )
    assert response.status_code == 409
    text = response.content.decode()
    assert f"{attempt.pk}: refused — CONFLICT" in text
    assert "a conflict is final" in text and "Nothing was recorded" in text
    assert f'href="{runbook}#step-4"' in text
    assert Event.objects.filter(run=run).count() == events
    attempt.refresh_from_db()
    assert attempt.status == "CONFLICT"


def test_reconciling_an_active_runs_attempt_from_the_runbook_says_to_cancel_it_first(
    as_operator: Client, approver: Any, settings: Any
) -> None:
    """Step 4 of 'Repeated reservation attempts' before step 3: refused, and the refusal and
    the step say what to do (cancel the owner first), back on that step."""
    from tests.operations.test_batch_cancel import sending

    settings.FIELDOPS_EXECUTION = "deferred"
    run = sending(approver=approver)  # active, its worker died past the send gate
    attempt = EffectAttempt.objects.get(run=run)
    runbook = reverse("runbooks-detail", args=["repeated-reservation-attempts"])
    step = as_operator.get(runbook).content.decode().split('id="step-4"')[1]
    assert "cancel that run at the step above first" in step.split('id="step-5"')[0]

    response = as_operator.post(
        reverse("recovery-reconcile"),
        {"attempt_id": attempt.pk, "runbook": "repeated-reservation-attempts", "step": "4"},
    )
    assert response.status_code == 409
    text = response.content.decode()
    assert "cancel the run first" in text and "Nothing was recorded" in text
    assert f'href="{runbook}#step-4"' in text
    attempt.refresh_from_db()
    assert attempt.status == "SENDING"
