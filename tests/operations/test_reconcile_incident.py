"""Bulk reconcile from the recovery page and the runbook's incident action, each one audited
operation whose items are the single actions (recorded on each run as they are)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalog.models import CapabilityVersion, LifecycleDecision
from catalog.services import tenant_gate_open
from operations import services
from operations.models import ItemResult, Operation, OperationEvent, OperationItem
from runs.domain.states import EventType, State
from runs.models import EffectAttempt, Event, Run
from sim import faultlab
from tests.operations.conftest import client_for, waiting_runs

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def outage_run() -> Run:
    result = faultlab.run_fixture(faultlab.BY_NAME["ledger_outage"])
    assert result.passed
    return Run.objects.get(pk=result.run_id)


def version_of(run: Run) -> str:
    return "reserve_part@" + run.components["reserve_part"].split("#")[0]


def test_bulk_reconcile_records_on_each_run_as_the_single_action_does(operator):
    runs = [outage_run(), outage_run()]
    client = client_for(operator)
    query = {"capability": version_of(runs[0])}
    preview = client.get(reverse("operations-reconcile-preview"), query)
    assert preview.status_code == 200 and "2 unknown effects match" in preview.content.decode()
    response = client.post(
        reverse("operations-reconcile-start"), {**query, "reason": "ledger back", "confirm": "2"}
    )
    operation = Operation.objects.get()
    assert response.status_code == 302 and operation.kind == "reconcile"
    services.operation_drain(operation_id=operation.pk)
    assert {i.result for i in OperationItem.objects.filter(operation=operation)} == {
        ItemResult.DONE
    }
    for run in runs:
        attempt = EffectAttempt.objects.get(run=run)
        assert attempt.status == "CONFIRMED"
        event = Event.objects.get(run=run, type=EventType.EFFECT_RECONCILED)
        assert event.reason_code == "obligation_matched"
        assert event.payload["by"] == "user:operator"
    # Reconciled once: a second bulk reconcile finds nothing left to act on.
    again = client.post(
        reverse("operations-reconcile-start"), {**query, "reason": "again", "confirm": "0"}
    )
    assert again.status_code == 400 and Operation.objects.count() == 1


def test_bulk_reconcile_refuses_a_version_that_is_not_in_the_catalog(operator):
    outage_run()
    client = client_for(operator)
    response = client.get(reverse("operations-reconcile-preview"), {"capability": "reserve_part@9"})
    assert response.status_code == 400
    start = client.post(
        reverse("operations-reconcile-start"),
        {"capability": "reserve_part@9", "reason": "r", "confirm": "1"},
    )
    assert start.status_code == 400 and not Operation.objects.exists()


def test_bulk_reconcile_never_sees_another_tenants_effects(operator_south):
    outage_run()
    body = client_for(operator_south).get(reverse("operations-reconcile-preview")).content
    assert "0 unknown effects match" in body.decode()


def test_the_incident_action_closes_the_gate_and_cancels_the_waiting_runs(operator):
    runs = waiting_runs(3)
    waiting_runs(1, tenant="south")
    capability = version_of(runs[0])
    cap_id, _, version = capability.partition("@")
    client = client_for(operator)
    preview = client.get(reverse("operations-incident-preview"), {"capability": capability})
    assert "3 runs match" in preview.content.decode()

    wrong = client.post(
        reverse("operations-incident-start"),
        {"capability": capability, "reason": "bad version", "confirm": "4"},
    )
    assert wrong.status_code == 400
    row = CapabilityVersion.objects.get(capability_id=cap_id, version=version)
    assert tenant_gate_open(row, "north")

    client.post(
        reverse("operations-incident-start"),
        {"capability": capability, "reason": "bad version", "confirm": "3"},
    )
    operation = Operation.objects.get()
    row = CapabilityVersion.objects.get(capability_id=cap_id, version=version)
    # The operator closes their own tenant's gate; the deployment gate is the catalog admins'.
    assert not tenant_gate_open(row, "north") and tenant_gate_open(row, "south")
    assert row.effect_gate_open
    decision = LifecycleDecision.objects.get(version=row, action="close_tenant_gate")
    assert decision.reason == f"bad version (operation {operation.short_id})"
    services.operation_drain(operation_id=operation.pk)
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", flat=True)) == {
        State.CANCELLED.value
    }
    assert Run.objects.get(tenant="south").state == State.CREATED.value
    types = list(OperationEvent.objects.filter(operation=operation).values_list("type", flat=True))
    assert types == ["started", "gate_closed", "finished"]


def test_the_incident_action_is_for_operators_only(approver):
    runs = waiting_runs(1)
    capability = version_of(runs[0])
    client = client_for(approver)
    assert (
        client.get(reverse("operations-incident-preview"), {"capability": capability}).status_code
        == 403
    )
    response = client.post(
        reverse("operations-incident-start"),
        {"capability": capability, "reason": "r", "confirm": "1"},
    )
    assert response.status_code == 403
    cap_id, _, version = capability.partition("@")
    assert CapabilityVersion.objects.get(capability_id=cap_id, version=version).effect_gate_open


def test_bulk_reconcile_refuses_an_age_it_does_not_know(operator):
    """An unknown age was ignored: the preview and the start took every unknown effect."""
    outage_run()
    client = client_for(operator)
    response = client.get(reverse("operations-reconcile-preview"), {"age": "fortnight"})
    assert response.status_code == 400
    assert "nknown age" in response.content.decode()
    start = client.post(
        reverse("operations-reconcile-start"),
        {"age": "fortnight", "reason": "r", "confirm": "1"},
    )
    assert start.status_code == 400 and not Operation.objects.exists()
