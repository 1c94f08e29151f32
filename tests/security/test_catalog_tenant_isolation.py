"""The catalog is shared by every tenant, its runs are not: a catalog page lists the runs
(and unknown effects) of the viewer's tenant only. The counts a retirement decides on stay
global (the decision affects every tenant), the run ids of another tenant are never shown.

Found over real HTTP against the production settings: the retire page of a version
pinned by a south run listed (and linked) that run's id to every signed-in north user.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from catalog.models import CapabilityVersion
from tests.conftest import make_user
from tests.helpers import make_run

pytestmark = pytest.mark.django_db


def _seeded() -> None:
    from sim.setup import seed

    seed(demo_users=False)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _pinned_version(run: Any) -> CapabilityVersion:
    capability_id, pin = next((c, p) for c, p in run.components.items() if c == "reserve_part")
    return CapabilityVersion.objects.get(
        capability_id=capability_id, version=str(pin).split("#", 1)[0]
    )


def test_the_retire_page_lists_only_the_viewers_tenants_pinned_runs() -> None:
    _seeded()
    north_admin = make_user("cat-north", "north", "catalog-admin")
    north_operator = make_user("op-north", "north", "operator")
    south = make_run(
        "reservation",
        tenant="south",
        principal="user:operator-south",
        equipment_id="EQ-31",
        location_id="LOC-S1",
    )
    north = make_run("reservation", tenant="north")
    assert not south.disposition and not north.disposition
    version = _pinned_version(south)
    url = reverse("catalog-retire", args=[version.pk])

    for user in (north_admin, north_operator):
        page = _client(user).get(url).content.decode()
        assert str(south.pk) not in page, "another tenant's run id is on the retire page"
        assert str(north.pk) in page  # the viewer's own pinned run is still listed
        # The decision is global: the count covers every tenant's pinned runs.
        assert "2 run(s) that have not ended" in page
        assert "1 of them in other tenants" in page


def test_a_recorded_retirement_request_shows_no_other_tenants_run_ids() -> None:
    _seeded()
    north_admin = make_user("cat-north", "north", "catalog-admin")
    south = make_run(
        "reservation",
        tenant="south",
        principal="user:operator-south",
        equipment_id="EQ-31",
        location_id="LOC-S1",
    )
    version = _pinned_version(south)
    client = _client(north_admin)
    page = client.get(reverse("catalog-retire", args=[version.pk])).content.decode()
    assert str(south.pk) not in page
    response = client.post(
        reverse("catalog-retire", args=[version.pk]),
        {"reason": "replaced", "acknowledge": "1", "lifecycle": version.lifecycle},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    version.refresh_from_db()
    assert version.retire_requested_by_id == north_admin.pk
    for url in (
        reverse("catalog-retire", args=[version.pk]),
        reverse("catalog-contract", args=[version.capability_id, version.version]),
    ):
        page = client.get(url).content.decode()
        assert str(south.pk) not in page, f"another tenant's run id is on {url}"
