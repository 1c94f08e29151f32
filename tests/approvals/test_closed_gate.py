"""An approval asked for while the effect gate of what it would dispatch is closed (an
operator following a runbook closed their tenant's gate, or a catalog admin closed the
deployment's): the approver is told before deciding, and after approving, that nothing
will be sent; the page said nothing and the message promised the dispatch."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from catalog import services as catalog
from runs.engine import runner
from runs.models import Event
from tests.helpers import make_run

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("gate", ["tenant", "deployment"])
def test_the_approval_page_and_message_say_a_closed_gate_sends_nothing(
    world: None, approver: Any, operator: Any, catalog_admin: Any, gate: str
) -> None:
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    client = _client(approver)
    page = reverse("approvals-detail", args=[checkpoint.pk])
    assert 'id="gate-closed"' not in client.get(page).content.decode()  # open: no note
    if gate == "tenant":
        catalog.tenant_gate_set(
            capability_id="reserve_part",
            version="1.0.0",
            tenant=run.tenant,
            open_gate=False,
            reviewer=operator,
            reason="repeated reservation attempts",
        )
        closed = f"effect gate of reserve_part@1.0.0 is closed for tenant {run.tenant}"
        code = "tenant_effect_gate_closed"
    else:
        catalog.capability_gate_set(
            capability_id="reserve_part",
            version="1.0.0",
            open_gate=False,
            reviewer=catalog_admin,
            reason="supplier incident",
        )
        closed = "deployment effect gate of reserve_part@1.0.0 is closed"
        code = "effect_gate_closed"
    html = client.get(page).content.decode()
    assert 'id="gate-closed"' in html
    assert closed in html and "an approval given now sends nothing" in html
    response = client.post(
        reverse("approvals-decide", args=[checkpoint.pk]),
        {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
    )
    assert response.status_code == 302
    said = " ".join(str(m) for m in get_messages(response.wsgi_request))
    assert closed in said and "nothing is sent" in said, said
    # What the page and the message said is what happens.
    runner.advance(str(run.pk), worker="test")
    denied = Event.objects.filter(run=run, type="proposal.denied").last()
    assert denied is not None and denied.reason_code == code
    assert not Event.objects.filter(run=run, type="effect.recorded").exists()
