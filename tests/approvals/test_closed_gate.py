"""An approval asked for while the effect gate of what it would dispatch is closed (an
operator following a runbook closed their tenant's gate, or a catalog admin closed the
deployment's): the approver is told before deciding, and after approving, that nothing
will be sent; the page said nothing and the message promised the dispatch."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from catalog import services as catalog
from catalog.models import CapabilityVersion, TenantEffectGate
from fieldops import points
from runs.engine import runner
from runs.models import EffectAttempt, Event
from sim.world.models import LedgerEntry
from tests.helpers import make_run

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


# What each way of stopping reserve_part@1.0.0 is refused as (validation and the send gate).
STOPPED_AS = {
    "tenant": "tenant_effect_gate_closed",
    "deployment": "effect_gate_closed",
    "retired": "capability_retired",
}


def _stop_dispatch(how: str, run: Any, operator: Any, catalog_admin: Any) -> str:
    """Stop new dispatch of reserve_part@1.0.0 for ``run``'s tenant ``how`` (STOPPED_AS);
    return the code it is refused as."""
    if how == "tenant":
        catalog.tenant_gate_set(
            capability_id="reserve_part",
            version="1.0.0",
            tenant=run.tenant,
            open_gate=False,
            reviewer=operator,
            reason="repeated reservation attempts",
        )
    elif how == "deployment":
        catalog.capability_gate_set(
            capability_id="reserve_part",
            version="1.0.0",
            open_gate=False,
            reviewer=catalog_admin,
            reason="supplier incident",
        )
    else:  # what the second admin's retirement commits
        CapabilityVersion.objects.filter(capability_id="reserve_part", version="1.0.0").update(
            lifecycle="RETIRED"
        )
    return STOPPED_AS[how]


@pytest.mark.parametrize("gate", ["tenant", "deployment"])
def test_the_approval_page_and_message_say_a_closed_gate_sends_nothing(
    world: None, approver: Any, operator: Any, catalog_admin: Any, gate: str
) -> None:
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    client = _client(approver)
    page = reverse("approvals-detail", args=[checkpoint.pk])
    assert 'id="gate-closed"' not in client.get(page).content.decode()  # open: no note
    code = _stop_dispatch(gate, run, operator, catalog_admin)
    closed = (
        f"effect gate of reserve_part@1.0.0 is closed for tenant {run.tenant}"
        if gate == "tenant"
        else "deployment effect gate of reserve_part@1.0.0 is closed"
    )
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


@pytest.mark.parametrize("gate", sorted(STOPPED_AS))
def test_a_gate_closed_after_the_dispatch_record_stops_the_send(
    world: None, approver: Any, operator: Any, catalog_admin: Any, gate: str
) -> None:
    """The gate is read at validation; an operator may close it after the dispatch record
    is written and before the effect leaves (a worker paused there, or just computing).
    Told "new dispatch stopped", nothing may then be sent: the send check reads the gates
    under the lock their changes take, and the attempt ends NOT_SENT, recorded. The same
    for a version retired meanwhile."""
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    response = _client(approver).post(
        reverse("approvals-decide", args=[checkpoint.pk]),
        {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
    )
    assert response.status_code == 302

    def close_the_gate(point: str, run_id: str) -> None:
        if point == "after_dispatch_record" and run_id == str(run.pk):
            _stop_dispatch(gate, run, operator, catalog_admin)

    previous = points.install(close_the_gate)
    try:
        runner.advance(str(run.pk), worker="test")
    finally:
        points.install(previous)
    code = STOPPED_AS[gate]
    assert not Event.objects.filter(run=run, type="effect.recorded").exists()
    assert not LedgerEntry.objects.filter(run_id=str(run.pk)).exists()
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.status == "NOT_SENT"
    rejected = Event.objects.get(run=run, type="effect.rejected")
    assert rejected.refs.get("attempt") == attempt.pk
    assert code in rejected.payload["detail"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_tenant_gate_closing_while_the_send_gate_reads_is_seen(
    world: None, approver: Any, operator: Any
) -> None:
    """On separate PostgreSQL connections: an operator's gate change holds the version row
    (as ``tenant_gate_change`` does) when the send gate reads the gates. The send gate
    waits for it and then sees the tenant gate it closed: nothing is sent."""
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    locked, failures = threading.Event(), []

    def operator_closes() -> None:
        try:
            with transaction.atomic():
                version = CapabilityVersion.objects.select_for_update().get(
                    capability_id="reserve_part", version="1.0.0"
                )
                locked.set()
                time.sleep(1.0)  # the send gate reaches the version row meanwhile
                TenantEffectGate.objects.update_or_create(
                    version=version,
                    tenant=run.tenant,
                    defaults={"open": False, "changed_by": operator, "reason": "incident"},
                )
        except Exception as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            locked.set()
            connection.close()

    closer = threading.Thread(target=operator_closes)

    def start_closing(point: str, run_id: str) -> None:
        if point == "after_dispatch_record" and run_id == str(run.pk):
            closer.start()
            assert locked.wait(10)

    previous = points.install(start_closing)
    try:
        # The approval continues the run at once (its commit hands it on); advance in case
        # nothing did.
        response = _client(approver).post(
            reverse("approvals-decide", args=[checkpoint.pk]),
            {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "ok"},
        )
        assert response.status_code == 302
        runner.advance(str(run.pk), worker="test")
    finally:
        points.install(previous)
    assert closer.ident is not None, "the send never reached its dispatch record"
    closer.join(10)
    assert not failures, failures
    assert not LedgerEntry.objects.filter(run_id=str(run.pk)).exists()
    assert EffectAttempt.objects.get(run=run).status == "NOT_SENT"
    rejected = Event.objects.get(run=run, type="effect.rejected")
    assert "tenant_effect_gate_closed" in rejected.payload["detail"]
