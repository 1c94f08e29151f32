"""A conflict (same key, different intent) followed through the runbooks: the console says
it is final instead of claiming to reconcile it, and records nothing."""

from __future__ import annotations

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
