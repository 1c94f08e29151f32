"""The API tokens page as a user meets it: a lifetime chosen from the offered set, the
expiry told in the list (the exact UTC time beside it), an expired token refused by the API
and still revocable from the list."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from playwright.sync_api import expect

from api.models import ApiToken
from kernel import clock
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_token_made_for_30_days_expires_then_is_revoked_from_the_list(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/api/tokens/")
    lifetime = page.get_by_label("Expires after")
    expect(lifetime).to_have_value("90")  # the default
    page.get_by_label("Name (what integration uses it)").fill("nightly export")
    lifetime.select_option("30")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-token").inner_text().strip()
    row = ApiToken.objects.get(name="nightly export")
    exact = row.expires_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    expect(page.locator("#new-h").locator("..")).to_contain_text(f"It expires at {exact}.")
    listed = page.locator(f'tr[data-token="{row.prefix}"]')
    expect(listed.locator("time").first).to_have_text("expires in 29 days")
    expect(listed).to_contain_text(f"expires in 29 days ({exact})")  # text, not a hover title

    api = page.request.get(
        f"{live_server.url}/api/v1/checkpoints", headers={"Authorization": f"Bearer {secret}"}
    )
    assert api.status == 200
    clock.advance(30 * 24 * 3600 + 1)
    api = page.request.get(
        f"{live_server.url}/api/v1/checkpoints", headers={"Authorization": f"Bearer {secret}"}
    )
    assert api.status == 401 and api.json()["code"] == "token_expired"
    assert exact in api.json()["message"] and secret not in api.text()

    page.goto(f"{live_server.url}/api/tokens/")
    expect(listed).to_have_attribute("data-status", "expired")
    expect(listed.locator(".badge")).to_have_text("expired")
    listed.get_by_role("link", name="Revoke nightly export…").click()
    expect(page.locator("#revoke-effect")).to_contain_text("already expired")
    page.get_by_role("button", name="Confirm: revoke “nightly export”").click()
    expect(listed).to_have_attribute("data-status", "revoked")


def test_a_refused_name_keeps_the_lifetime_and_takes_the_focus(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/api/tokens/")
    page.get_by_label("Name (what integration uses it)").fill("   ")
    page.get_by_label("Expires after").select_option("7")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_load_state()
    expect(page.locator('main .refusal[role="alert"]')).to_contain_text("needs a name")
    name = page.get_by_label("Name (what integration uses it)")
    expect(name).to_be_focused()
    expect(name).to_have_attribute("aria-describedby", "token-error")
    expect(page.get_by_label("Expires after")).to_have_value("7")
    assert not ApiToken.objects.exists()


def test_reloading_the_page_with_the_new_token_creates_no_second_token(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    """The page that shows a new token's secret answers the create form's post: reloading
    it sends the form again, and a second active token with the same name was made (one
    nobody holds). The form's key is spent: the reload says what it made, and creates none."""
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/api/tokens/")
    page.get_by_label("Name (what integration uses it)").fill("nightly export")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_be_visible()
    row = ApiToken.objects.get(name="nightly export")
    page.reload()
    expect(page.locator("#token-error")).to_contain_text(
        f"This form already created the token “nightly export” (fo_{row.prefix}_…)"
    )
    expect(page.locator("#new-token")).to_have_count(0)
    assert ApiToken.objects.filter(name="nightly export").count() == 1
    # The form on that page is a new one: it creates the next token.
    page.get_by_label("Name (what integration uses it)").fill("weekly export")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_be_visible()
    assert ApiToken.objects.count() == 2


def test_back_to_the_form_that_made_a_token_gives_a_form_that_makes_the_next_one(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    """Back from the page showing a new token returns to the form that made it. The
    browser put the spent one-time key back into that form's hidden field, so a new name
    typed there was refused as 'This form already created the token …' and nothing was
    made. The key field is not restored: the form sent after Back creates the new token."""
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/api/tokens/")
    page.get_by_label("Name (what integration uses it)").fill("nightly export")
    page.get_by_label("Name (what integration uses it)").press("Enter")
    expect(page.locator("#new-token")).to_be_visible()
    page.go_back()
    page.wait_for_load_state()
    page.get_by_label("Name (what integration uses it)").fill("weekly export")
    page.get_by_label("Name (what integration uses it)").press("Enter")
    expect(page.locator("#new-h")).to_have_text("New token “weekly export”")
    expect(page.locator("#token-error")).to_have_count(0)
    assert ApiToken.objects.filter(name="weekly export").count() == 1


def test_revoking_without_javascript_asks_then_revokes_only_when_confirmed(
    live_server: Any, browser: Any, approver: Any, csp_violations: list[str]
) -> None:
    """With scripts off, Revoke… is a page with the token, what stops working, Confirm and
    Cancel; Cancel changes nothing, Confirm revokes and says so on the list."""
    from api.tokens import token_create

    row, _ = token_create(user=approver, name="nightly export")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        login(page, live_server.url, "approver")
        page.goto(f"{live_server.url}/api/tokens/")
        page.get_by_role("link", name="Revoke nightly export…").click()
        expect(page.get_by_role("heading", level=1)).to_have_text(
            "Revoke the token “nightly export”?"
        )
        expect(page.locator("main")).to_contain_text(f"fo_{row.prefix}_…")
        expect(page.locator("#revoke-effect")).to_contain_text("401 unauthenticated")
        page.get_by_role("link", name="Cancel").click()
        expect(page.locator(f'tr[data-token="{row.prefix}"]')).to_have_attribute(
            "data-status", "active"
        )
        page.get_by_role("link", name="Revoke nightly export…").click()
        page.get_by_role("button", name="Confirm: revoke “nightly export”").click()
        expect(page.locator("main .messages")).to_contain_text("Token “nightly export”")
        expect(page.locator(f'tr[data-token="{row.prefix}"]')).to_have_attribute(
            "data-status", "revoked"
        )
    finally:
        context.close()
    row.refresh_from_db()
    assert row.revoked_at is not None
