"""Revoking an API token takes two steps: Revoke (a GET) shows what the token is and what
stops working, and only the Confirm form posted from that page revokes. A revoke posted
without the confirmation, for another user's token, for one already revoked, or for a
malformed id says why and changes nothing. Without JavaScript: every step is a plain page
and a plain form (the test client runs no script)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from api.models import ApiToken
from kernel import clock
from tests.api.test_token_expiry import DAY, console, create, get

pytestmark = pytest.mark.django_db


def revoke_url(row: ApiToken) -> str:
    return reverse("api-tokens-revoke", args=[row.pk])


def confirm_form(html: str) -> dict[str, str]:
    """The fields of the page's confirm form, as a browser sends them."""
    form = re.search(r'<form[^>]*id="revoke-confirm".*?</form>', html, re.S)
    assert form, "the page offers no confirm form"
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(0)))


def test_revoke_shows_a_confirmation_naming_the_token_and_only_confirm_revokes(
    approver: Any,
) -> None:
    row, secret = create(approver, name="nightly export", lifetime="30")
    client = console(approver)
    # The list's Revoke leads to the confirmation page (a GET: nothing changes).
    listing = client.get(reverse("api-tokens")).content.decode()
    assert f'<a class="button danger" href="{revoke_url(row)}"' in listing
    page = client.get(revoke_url(row))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Revoke the token “nightly export”?" in html
    assert f"fo_{row.prefix}_…" in html
    assert "401" in html and "unauthenticated" in html  # what stops working
    assert "cannot be undone" in html
    assert f'href="{reverse("api-tokens")}"' in html and ">Cancel<" in html
    row.refresh_from_db()
    assert row.revoked_at is None and get("/checkpoints", secret).status_code == 200
    # Confirm posts the form the page showed: revoked, said by name on the list.
    done = client.post(revoke_url(row), confirm_form(html), follow=True)
    assert done.redirect_chain[-1][0] == reverse("api-tokens")
    assert "Token “nightly export”" in done.content.decode()
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert get("/checkpoints", secret).json()["code"] == "unauthenticated"


def test_a_revoke_posted_without_the_confirmation_revokes_nothing_and_says_why(
    approver: Any,
) -> None:
    row, secret = create(approver, name="nightly export", lifetime="30")
    other, _ = create(approver, name="weekly export", lifetime="30")
    client = console(approver)
    for form in ({}, {"confirm": ""}, {"confirm": other.prefix}, {"confirm": "x" * 5000}):
        refused = client.post(revoke_url(row), form)
        assert refused.status_code == 400, form
        html = refused.content.decode()
        assert "Nothing was revoked" in html
        assert 'role="alert"' in html
        # The confirmation is offered again, right here.
        assert confirm_form(html) == {
            "csrfmiddlewaretoken": confirm_form(html)["csrfmiddlewaretoken"],
            "confirm": row.prefix,
        }
    row.refresh_from_db()
    assert row.revoked_at is None and get("/checkpoints", secret).status_code == 200


def test_another_users_token_a_revoked_one_or_a_malformed_id_is_refused_and_changes_nothing(
    approver: Any, operator: Any, outsider: Any
) -> None:
    row, secret = create(approver, name="nightly export", lifetime="30")
    for stranger in (operator, outsider):  # same tenant, other tenant
        for method in ("get", "post"):
            answer = getattr(console(stranger), method)(revoke_url(row), {"confirm": row.prefix})
            assert answer.status_code == 404
            html = answer.content.decode()
            assert "No token of yours" in html and "nothing was revoked" in html
            assert "nightly export" not in html and row.prefix not in html
    row.refresh_from_db()
    assert row.revoked_at is None and get("/checkpoints", secret).status_code == 200

    client = console(approver)
    page = client.get(revoke_url(row)).content.decode()
    assert client.post(revoke_url(row), confirm_form(page)).status_code == 302
    row.refresh_from_db()
    first = row.revoked_at
    clock.advance(60)
    # Confirmed again (a second tab, Back and resend): told when, nothing changes.
    again = client.post(revoke_url(row), confirm_form(page))
    assert again.status_code == 409
    assert "already revoked" in again.content.decode()
    assert "revoke-confirm" not in again.content.decode()
    shown = client.get(revoke_url(row))
    assert shown.status_code == 409 and "already revoked" in shown.content.decode()
    row.refresh_from_db()
    assert row.revoked_at == first

    for bad in ("abc", "-1", "1.5", "%C2%B2", "99999999999999999999999"):
        answer = client.post(f"/api/tokens/{bad}/revoke/", {"confirm": row.prefix})
        assert answer.status_code == 404, bad
    assert ApiToken.objects.filter(revoked_at__isnull=False).count() == 1


def test_an_expired_token_is_confirmed_as_already_refused_by_the_api(approver: Any) -> None:
    """An expired token stays revocable (the API's token_expired answer sends its holder
    to this page to do it); the confirmation says the API refuses it already."""
    row, secret = create(approver, name="old sync", lifetime="7")
    clock.advance(8 * DAY)
    client = console(approver)
    page = client.get(revoke_url(row)).content.decode()
    assert "already expired" in page and "token_expired" in page
    assert client.post(revoke_url(row), confirm_form(page)).status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert get("/checkpoints", secret).json()["code"] == "unauthenticated"


def test_the_confirmation_needs_a_login_and_a_csrf_token(approver: Any) -> None:
    row, _ = create(approver, name="nightly export", lifetime="30")
    anonymous = Client().get(revoke_url(row))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(approver)
    assert strict.post(revoke_url(row), {"confirm": row.prefix}).status_code == 403
    row.refresh_from_db()
    assert row.revoked_at is None
