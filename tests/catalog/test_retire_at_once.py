"""Catalog admins act on one pending retirement request at the same moment: two withdraw
it, or one withdraws while another confirms it. One action is recorded; the other admin
is told the request was withdrawn, by whom, when and why (they heard only "nothing to
withdraw" or "was withdrawn")."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from catalog import services
from catalog.models import CapabilityVersion, Lifecycle
from tests.catalog.conftest import client_for
from tests.conftest import make_user


def _requested(user: Any) -> CapabilityVersion:
    """search_manual@1.0.0 with a pending retirement (no admitted successor: two people)."""
    row = CapabilityVersion.objects.get(capability_id="search_manual", version="1.0.0")
    row = services.capability_decide(
        version_id=row.pk, user=user, action="retire", reason="1.1.0 serves", acknowledge=True
    )
    assert row.retire_requested_by == user and row.lifecycle == Lifecycle.ADMITTED
    return row


def _at_once(posts: dict[str, Any]) -> dict[str, Any]:
    barrier = threading.Barrier(len(posts), timeout=10)
    answers: dict[str, Any] = {}

    def go(name: str) -> None:
        try:
            barrier.wait()
            answers[name] = posts[name]()
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=(name,)) for name in posts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_admins_withdrawing_one_request_at_once(world: None, catalog_admin: Any) -> None:
    row = _requested(catalog_admin)
    other = make_user("catalog-admin-2", "north", "catalog-admin")
    url = reverse("catalog-retire-withdraw", args=[row.pk])
    people = {"catalog-admin": client_for(catalog_admin), "catalog-admin-2": client_for(other)}
    answers = _at_once(
        {
            name: (lambda c=client, n=name: c.post(url, {"reason": f"not yet, says {n}"}))
            for name, client in people.items()
        }
    )
    (withdrawn,) = row.decisions.filter(action="retire_withdrawn")
    winner = withdrawn.reviewer.get_username()
    late = "catalog-admin-2" if winner == "catalog-admin" else "catalog-admin"
    assert answers[winner].status_code == 302
    told = answers[late].content.decode()
    assert answers[late].status_code == 409, told
    assert f"withdrawn by user:{winner} at " in told, told
    assert f"not yet, says {winner}" in told, told


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_confirmation_that_meets_a_withdrawal_names_who_withdrew(
    world: None, catalog_admin: Any
) -> None:
    row = _requested(catalog_admin)
    confirmer = make_user("catalog-admin-2", "north", "catalog-admin")
    confirm_client = client_for(confirmer)
    page = confirm_client.get(reverse("catalog-retire", args=[row.pk])).content.decode()
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    assert form.get("confirms"), "the retire page carries no request to confirm"
    services.capability_retire_withdraw(
        version_id=row.pk, user=catalog_admin, reason="supplier asked to wait"
    )
    response = confirm_client.post(
        reverse("catalog-retire", args=[row.pk]),
        {**form, "reason": "confirmed", "acknowledge": "1"},
    )
    told = response.content.decode()
    assert response.status_code == 409, told
    assert "withdrawn by user:catalog-admin at " in told and "supplier asked to wait" in told, told
    row.refresh_from_db()
    assert row.lifecycle == Lifecycle.ADMITTED
