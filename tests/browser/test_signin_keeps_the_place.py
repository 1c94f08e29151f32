"""A link to a place in a page, opened in a browser that is signed out: the console's own
links point at a runbook's step (``/runbooks/<slug>/#step-5``, from a run's attempts) and
people pass them on. The login page kept the path to come back to but not the part after
``#`` (a browser never sends it to the server), so after signing in the page opened at its
top and the step had to be found again. The login form now carries it back."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_link_to_a_runbook_step_opens_at_that_step_after_signing_in(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    base = live_server.url
    page = new_page()
    page.goto(f"{base}/runbooks/repeated-reservation-attempts/#step-5")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("pw-operator")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/runbooks/repeated-reservation-attempts/#step-5")
    expect(page.locator("#step-5")).to_be_in_viewport()


def test_signing_in_from_the_login_page_itself_still_opens_the_runs(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    base = live_server.url
    page = new_page()
    page.goto(f"{base}/login/#main")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("pw-operator")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")
    expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible()


def test_the_place_is_kept_through_a_mistyped_password(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    base = live_server.url
    page = new_page()
    page.goto(f"{base}/runbooks/repeated-reservation-attempts/#step-5")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-error")).to_be_visible()
    page.get_by_label("Password").fill("pw-operator")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base}/runbooks/repeated-reservation-attempts/#step-5")
