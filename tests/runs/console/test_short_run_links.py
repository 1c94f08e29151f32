"""A run's short id (the eight digits every list shows) opens its page: ``/runs/<prefix>/``
redirects to the one run of the reader's tenant whose id starts with it, in any world; a
prefix several runs share opens the runs list searched by it; one that names no run of the
tenant (or only another tenant's) is the console's 404, so a prefix leaks nothing."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import Run

pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def run_with_id(digits: str, *, tenant: str = "north", namespace: str = "live") -> Run:
    """A run of ``tenant`` whose id is ``digits`` padded to a full id (a copy of a created
    run's row: the created one stays, under its random id)."""
    model = services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", start=False
    )
    row = Run.objects.filter(pk=model.pk).values().get()
    return Run.objects.create(
        **{**row, "id": uuid.UUID(digits.ljust(32, "7")), "tenant": tenant, "namespace": namespace}
    )


def test_a_unique_short_id_redirects_to_the_runs_page(world: None, approver: Any) -> None:
    run = run_with_id("2efff1c2e827")
    client = signed_in(approver)
    for prefix in ("2efff1c2", "2EFFF1C2", "2efff1c2-e827", "2efff"):
        response = client.get(f"/runs/{prefix}/")
        assert response.status_code == 302, prefix
        assert response["Location"] == reverse("runs-detail", args=[run.pk])
    assert client.get(response["Location"]).status_code == 200


def test_a_fault_lab_run_is_found_by_its_short_id_too(world: None, approver: Any) -> None:
    run = run_with_id("5a5a5a5a", namespace="faultlab")
    response = signed_in(approver).get("/runs/5a5a5a5a/")
    assert response["Location"] == reverse("runs-detail", args=[run.pk])


def test_a_shared_prefix_opens_the_list_searched_by_it(world: None, approver: Any) -> None:
    run_with_id("abcd1111")
    run_with_id("abcd2222", namespace="faultlab")
    response = signed_in(approver).get("/runs/abcd/")
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == reverse("runs-list")
    assert parse_qs(location.query) == {"q": ["abcd"], "world": ["all"]}
    page = signed_in(approver).get(response["Location"])
    assert page.status_code == 200
    assert b"abcd1111" in page.content and b"abcd2222" in page.content


def test_another_tenants_run_is_not_found_by_its_prefix(world: None, approver: Any) -> None:
    run_with_id("c0ffee00", tenant="south")
    response = signed_in(approver).get("/runs/c0ffee00/")
    assert response.status_code == 404
    assert b"c0ffee00" not in response.content


@pytest.mark.parametrize(
    "prefix", ["0000dead", "not-hex", "z", "0" * 33, "%C2%B2", "-", "..", "a" * 300]
)
def test_a_prefix_naming_no_run_is_the_not_found_page(
    world: None, approver: Any, prefix: str
) -> None:
    run_with_id("12345678")
    response = signed_in(approver).get(f"/runs/{prefix}/")
    assert response.status_code == 404
    assert b"Not found" in response.content


def test_a_short_link_needs_a_signed_in_reader(world: None) -> None:
    run_with_id("2efff1c2")
    response = Client().get("/runs/2efff1c2/")
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == reverse("login")


def test_a_short_link_changes_nothing_and_answers_only_safe_methods(
    world: None, operator: Any
) -> None:
    run = run_with_id("2efff1c2")
    client = signed_in(operator)
    assert client.post("/runs/2efff1c2/").status_code == 405
    assert client.head("/runs/2efff1c2/").status_code == 302
    run.refresh_from_db()
    assert run.revision == 0 and run.state == "CREATED"
