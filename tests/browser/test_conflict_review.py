"""An operator closes a conflict's obligation in Chromium: from the runbook step that says
what to do with a conflict, with a reason the browser will not let them leave out."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from operations.models import Operation
from runs.models import EffectAttempt, Event
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_marks_a_conflict_reviewed_from_its_runbook_step(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    from sim import faultlab

    result = faultlab.run_fixture(faultlab.BY_NAME["same_key_different_intent"])
    attempt = EffectAttempt.objects.get(run_id=result.run_id)
    events = Event.objects.filter(run_id=result.run_id).count()
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runbooks/repeated-reservation-attempts/")
    step = page.locator("#step-5")
    button = step.get_by_role("button", name=f"Mark reviewed: attempt {attempt.pk}")
    expect(button).to_have_text("Mark reviewed")

    # No reason: the browser refuses to send it, nothing is recorded.
    button.click()
    assert step.get_by_role("textbox", name="Reason").evaluate("el => !el.validity.valid")
    assert not Operation.objects.exists()

    step.get_by_role("textbox", name="Reason").fill("ledger intent differs: slot changed by hand")
    button.click()
    page.wait_for_url(re.compile(r"/runbooks/repeated-reservation-attempts/"))
    expect(page.locator(".messages")).to_contain_text(f"{attempt.pk}: conflict marked reviewed")
    expect(page.locator("#step-5")).not_to_contain_text(attempt.pk)

    page.goto(f"{base}/recovery/")
    expect(page.locator("#reviewed-conflicts")).to_contain_text(attempt.pk)
    expect(page.locator("#reviewed-conflicts")).to_contain_text("slot changed by hand")
    page.goto(f"{base}/runs/{result.run_id}/")
    expect(page.locator("main")).to_contain_text("conflict reviewed by user:operator")
    assert Event.objects.filter(run_id=result.run_id).count() == events
    assert EffectAttempt.objects.get(pk=attempt.pk).status == "CONFLICT"
