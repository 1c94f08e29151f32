"""The malformed-success runbook says what the console shows after a malformed success:
the run reconciles by the same key by itself; nothing waits for an operator."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.domain import effects
from runs.models import EffectAttempt, Event, Run
from sim import faultlab

pytestmark = pytest.mark.django_db


def test_after_a_malformed_success_the_runbook_says_what_the_run_did(
    as_operator: Client,
) -> None:
    result = faultlab.run_fixture(faultlab.BY_NAME["malformed_result"])
    run = Run.objects.get(pk=result.run_id)
    attempt = EffectAttempt.objects.get(run=run)
    # What the records show: the run reconciled the effect by its key, no operator needed.
    assert run.state == "COMPLETED" and attempt.status not in effects.UNRESOLVED
    assert Event.objects.filter(run=run, type="reconciliation.matched").exists()

    # The run page leads to the runbook; the runbook lists the refused response ...
    runbook = reverse("runbooks-detail", args=["malformed-success"])
    assert (
        f'href="{runbook}"'
        in as_operator.get(reverse("runs-detail", args=[run.pk])).content.decode()
    )
    page = as_operator.get(runbook).content.decode()
    assert run.short_id in page.split('id="step-1"')[1].split('id="step-2"')[0]
    # ... and says what happened, not "state stays unresolved until an operator finds it".
    assert "stays unresolved until an operator" not in page
    assert "finds the effect by a controlled ledger query by the same key" in page
    step = page.split('id="step-2"')[1].split('id="step-3"')[0]
    assert attempt.pk not in step
    assert "an attempt is listed here only when the ledger could not answer" in step
