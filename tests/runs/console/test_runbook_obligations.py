"""The ambiguous-effect runbook says who settles the obligation a cancelled run keeps."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runs import services as run_services
from runs.domain import effects
from runs.engine import sweeper
from runs.models import EffectAttempt
from tests.operations.test_batch_cancel import sending

pytestmark = pytest.mark.django_db


def test_an_ended_runs_unknown_effect_is_settled_by_the_sweeper_as_the_runbook_says(
    as_operator: Client, approver: Any
) -> None:
    run = sending(approver=approver)  # its worker died past the send gate
    run_services.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="incident")
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.status in effects.SWEEPER_PICKUP

    page = as_operator.get(reverse("runbooks-detail", args=["ambiguous-effect"])).content.decode()
    assert attempt.pk in page
    # Not "until an operator reconciles it": the sweeper does, by the same key.
    assert "the sweeper reconciles it by the same key" in page

    sweeper.sweep()
    attempt.refresh_from_db()
    assert attempt.status not in effects.UNRESOLVED
