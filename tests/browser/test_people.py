"""The console used the way people use it: a page offers no link its reader's roles refuse
(a click that ends on the 403 page) and no action on a selection it refused."""

from __future__ import annotations

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
