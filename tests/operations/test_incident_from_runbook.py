"""'Close gate and cancel its waiting runs…' from a runbook's gate step: the preview's Back
leads to that runbook step (not the list of runbooks), also after a refused start."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.urls import reverse

from tests.operations.conftest import client_for, waiting_runs

pytestmark = pytest.mark.django_db


def test_the_incident_preview_opened_from_a_runbook_step_leads_back_to_that_step(
    operator: Any,
) -> None:
    waiting_runs(2)
    client = client_for(operator)
    runbook = reverse("runbooks-detail", args=["ledger-outage"])
    page = client.get(runbook).content.decode()
    step = page.split('id="step-2"')[1].split('id="step-3"')[0]
    link = html.unescape(
        re.search(r'href="([^"]*)"[^>]*>Close gate and cancel its waiting runs…', step)[1]
    )
    back = f'href="{runbook}#step-2">Back to the runbook: Ledger outage</a>'

    preview = client.get(link)
    assert preview.status_code == 200
    assert back in preview.content.decode()

    # A refused start (the typed count is wrong) comes back with the same way back.
    form = dict(
        re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', preview.content.decode())
    )
    form.update(reason="ledger outage", confirm="999")
    refused = client.post(reverse("operations-incident-start"), form)
    assert refused.status_code == 400
    assert back in refused.content.decode()
