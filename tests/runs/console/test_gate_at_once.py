"""Two operators on call close their tenant's effect gate from the runbook at the same
moment (and catalog admins the deployment gate): one closes it, and the other is told it
was already closed, by whom and why, not that their own change was made."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse

from catalog import services as catalog
from catalog.models import CapabilityVersion, LifecycleDecision
from tests.conftest import make_user
from tests.runs.console.conftest import client_for


def _said(response: Any) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_closing_the_tenant_gate_at_once(world: None, operator: Any) -> None:
    other = make_user("operator-2", "north", "operator")
    version = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    url = reverse("runbooks-gate", args=["repeated-reservation-attempts"])
    form = {"capability_id": "reserve_part", "version": "1.0.0", "open": "0"}
    people = {"operator": client_for(operator), "operator-2": client_for(other)}
    barrier = threading.Barrier(2, timeout=10)
    answers: dict[str, Any] = {}

    def close(name: str) -> None:
        try:
            barrier.wait()
            answers[name] = people[name].post(url, {**form, "reason": f"alert seen by {name}"})
        finally:
            connection.close()

    threads = [threading.Thread(target=close, args=(name,)) for name in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (decision,) = LifecycleDecision.objects.filter(version=version, action="close_tenant_gate")
    closer = decision.reviewer.get_username()
    late = "operator-2" if closer == "operator" else "operator"
    assert {a.status_code for a in answers.values()} == {302}
    assert "is closed: new dispatch stopped" in _said(answers[closer])
    told = _said(answers[late])
    assert "was already closed" in told and f"user:{closer}" in told, told
    assert f"“alert seen by {closer}”" in told and "your reason was not recorded" in told
    assert f"“alert seen by {late}”" not in told


@pytest.mark.django_db
def test_the_deployment_gate_set_as_it_is_says_so(world: None, catalog_admin: Any) -> None:
    other = make_user("catalog-admin-2", "north", "catalog-admin")
    version = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    url = reverse("catalog-gate", args=[version.pk])
    first = client_for(catalog_admin).post(url, {"open": "0", "reason": "supplier incident"})
    assert "is closed: new dispatch stopped" in _said(first)
    second = client_for(other).post(url, {"open": "0", "reason": "same incident"})
    told = _said(second)
    assert "was already closed" in told and "user:catalog-admin" in told, told
    assert "supplier incident" in told and "your reason was not recorded" in told
    assert LifecycleDecision.objects.filter(version=version, action="close_gate").count() == 1
    # A gate nobody ever changed: already open, by no one.
    catalog.capability_gate_set(
        capability_id="reserve_part",
        version="1.0.0",
        open_gate=True,
        reviewer=catalog_admin,
        reason="over",
    )
    again = client_for(other).post(url, {"open": "1", "reason": "open it"})
    assert "was already open" in _said(again) and "over" in _said(again)
