"""The console used the way people use it: a page offers no link its reader's roles refuse
(a click that ends on the 403 page) and no action on a selection it refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser_support import login
from tests.helpers import approve, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def completed(operator: Any, approver: Any) -> Run:
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(run, approver)
    assert run.state == "COMPLETED"
    return run


def test_an_approver_reading_a_run_is_offered_no_link_into_recovery(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """The run page linked each effect attempt to the recovery page, which only operators
    may open: an approver who followed one met "403 · Not allowed". The attempt is shown
    as text to them; an operator keeps the link."""
    approver_page = new_page()
    login(approver_page, live_server.url, "approver")
    for address in (f"/runs/{completed.pk}/", f"/runs/{completed.pk}/attempts/"):
        approver_page.goto(f"{live_server.url}{address}")
        expect(approver_page.get_by_role("heading", level=1)).to_be_visible()
        assert approver_page.locator('main a[href^="/recovery/"]').count() == 0, address
    operator_page = new_page()
    login(operator_page, live_server.url, "operator")
    operator_page.goto(f"{live_server.url}/runs/{completed.pk}/")
    link = operator_page.locator('main a[href^="/recovery/"]').first
    link.click()
    expect(operator_page.get_by_role("heading", name="Ledger records")).to_be_visible()


def test_a_search_that_is_not_a_run_id_offers_no_action_on_its_selection(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """A search for "pump-7" (not hexadecimal) says a run id is hexadecimal, yet the list
    still offered "export CSV", "export JSON" and "Cancel every run matching this
    filter…", each ending on the 400 page ("…or a prefix).."). The list offers none of
    them until the search is a run id, and the 400 page ends its sentence once."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.get_by_label("Run id").fill("pump-7")
    page.get_by_label("Run id").press("Enter")
    expect(page).to_have_url(re.compile(r"q=pump-7"))
    table = page.locator("#run-table")
    expect(table.get_by_role("alert")).to_have_text(
        "A run id is hexadecimal (a full id or a prefix)."
    )
    expect(table.get_by_role("link", name="export CSV")).to_have_count(0)
    expect(table.get_by_role("link", name="export JSON")).to_have_count(0)
    expect(page.locator("#cancel-by-filter")).to_have_count(0)
    page.goto(f"{live_server.url}/operations/cancel/?q=pump-7")
    expect(page.get_by_role("alert")).to_contain_text(
        "A run id is hexadecimal (a full id or a prefix)."
    )
    expect(page.get_by_role("alert")).not_to_contain_text("prefix)..")
