"""A user name may be as long as Django allows (150 characters). Every record that names
the acting principal (``user:<name>``) holds it whole, on PostgreSQL too, where a value
longer than its column is an error (a 500 to the user), not a silent truncation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalPolicy, ApprovalVote, Decision
from catalog import services as catalog
from catalog.models import CapabilityVersion
from operations import services as operations
from operations.models import Operation, OperationEvent
from runs.models import Event, FaultLabResult, Run
from sim import faultlab
from sim.world.models import LedgerEntry
from tests.conftest import make_user
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db

NAME = "field.engineer." + "x" * 123 + "@example.org"
assert len(NAME) == 150  # Django's own limit for a user name
PRINCIPAL = f"user:{NAME}"


SHORT = "user:" + "o" * 59  # the longest principal a run may have (the contracts' 64)


@pytest.fixture
def long_operator(world):
    return make_user(NAME, "north", "operator")


def test_a_run_cannot_be_started_for_a_principal_the_tools_would_refuse(client, long_operator):
    client.force_login(long_operator)
    response = client.post(
        reverse("runs-start"),
        {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"},
    )
    assert response.status_code == 400
    assert "may be at most 64" in response.content.decode()
    assert not Run.objects.exists()


def test_a_long_named_operator_cancels_a_run(client, long_operator):
    run = make_run(principal=SHORT, advance=False)
    client.force_login(long_operator)
    response = client.post(reverse("runs-cancel", args=[run.pk]), {"reason": "wrong van"})
    assert response.status_code == 302, response.content[:500]
    cancelled = Event.objects.get(run=run, type="run.cancelled")
    assert PRINCIPAL in str(cancelled.payload)


def test_long_named_approvers_reach_a_quorum_and_the_run_completes(world):
    ApprovalPolicy.objects.create(tenant="north", name="two", capability="reserve_part", quorum=2)
    first = make_user(NAME, "north", "approver")
    second = make_user(NAME[:-1] + "z", "north", "approver")
    run = make_run(principal=SHORT)
    assert approve(run, first, advance=False).recorded
    assert approve(run, second).recorded
    assert {v.by_ref for v in ApprovalVote.objects.all()} == {PRINCIPAL, PRINCIPAL[:-1] + "z"}
    assert Decision.objects.get().decided_by_ref in {PRINCIPAL, PRINCIPAL[:-1] + "z"}
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    assert LedgerEntry.objects.get(run_id=str(run.pk)).principal_ref == SHORT


def test_a_long_named_operator_runs_a_bulk_cancel(world):
    make_run(principal=SHORT, advance=False, namespace="live")
    operation = operations.operation_start_cancel(
        tenant="north",
        by_ref=PRINCIPAL,
        query={"state": "CREATED"},
        reason="drain",
        confirm=1,
    )
    assert Operation.objects.get(pk=operation.pk).created_by == PRINCIPAL
    assert OperationEvent.objects.filter(operation=operation, by=PRINCIPAL).exists()


def test_a_long_named_operator_runs_a_fault_lab_fixture(world):
    row = faultlab.fixture_run_recorded(name=faultlab.FIXTURES[0].name, by_ref=PRINCIPAL)
    assert FaultLabResult.objects.get(pk=row.pk).ran_by == PRINCIPAL


def test_long_named_catalog_admins_retire_a_version_by_two(world):
    first = make_user(NAME, "north", "catalog-admin")
    second = make_user(NAME[:-1] + "z", "north", "catalog-admin")
    row = CapabilityVersion.objects.get(capability_id="read_equipment", version="1.0.0")
    for user in (first, second):
        row = catalog.capability_decide(
            version_id=row.pk, user=user, action="retire", reason="replaced", acknowledge=True
        )
    assert row.lifecycle == "RETIRED"
    assert row.decisions.filter(action="retire").get().reviewer_ref.startswith("user:field.")
