"""Regions that refresh themselves, seen in Chromium: a session that ends under them sends
the whole page to the login page (and back after signing in) instead of swapping the login
page into the region."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser_support import login
from tests.helpers import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUEUE_REFRESH_MS = 5_000


@pytest.fixture
def waiting(operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_a_session_ended_in_another_tab_sends_the_page_to_login_and_back(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    base = live_server.url
    page = new_page()
    login(page, base, "approver")
    # Every answer the page's htmx requests received (the URL each ended at, after any
    # redirect the XHR followed): none may be the login page, nothing to swap in.
    htmx_answers: list[tuple[str, int, str | None]] = []

    def note(response: Any) -> None:
        if response.request.headers.get("hx-request") == "true":
            htmx_answers.append(
                (response.url, response.status, response.headers.get("hx-redirect"))
            )

    page.on("response", note)
    page.goto(f"{base}/approvals/?kind=approval")
    expect(page.locator("#queue")).to_contain_text(waiting.short_id)

    other_tab = page.context.new_page()
    other_tab.goto(f"{base}/")
    other_tab.get_by_role("button", name="Log out").click()
    other_tab.wait_for_url(re.compile(r"/login/"))
    other_tab.close()

    # The queue's next refresh finds no session: the page itself goes to the login page.
    page.wait_for_url(
        f"{base}/login/?next=/approvals/%3Fkind%3Dapproval", timeout=QUEUE_REFRESH_MS * 3
    )
    login_fetched = [a for a in htmx_answers if a[0].startswith(f"{base}/login/")]
    assert not login_fetched, login_fetched
    assert (
        f"{base}/approvals/?kind=approval",
        200,
        "/login/?next=/approvals/%3Fkind%3Dapproval",
    ) in htmx_answers
    expect(page.locator("form input[name=password]")).to_have_count(1)
    expect(page.locator("#queue")).to_have_count(0)

    page.get_by_label("Username").fill("approver")
    page.get_by_label("Password").fill("pw-approver")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/approvals/?kind=approval")
    expect(page.locator("#queue")).to_contain_text(waiting.short_id)
    expect(page.get_by_label("Kind")).to_have_value("approval")
    expect(page.locator("input[name=password]")).to_have_count(0)
