"""The runs list offers to cancel only when it shows something that can be cancelled: with
no runs, or only ended ones (also after a filter swapped the table in place), neither the
selected-runs form nor the by-filter link is there."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser_support import login
from tests.helpers import approve, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _apply_state(page: Any, state: str) -> None:
    filters = page.get_by_role("search", name="Filter runs")
    filters.get_by_label("State").select_option(state)
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(rf"state={state}"))


def test_an_empty_list_offers_no_cancel(live_server: Any, new_page: Any, operator: Any) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    expect(page.locator("#run-table")).to_contain_text("No runs in the live world yet")
    expect(page.get_by_role("button", name="Cancel selected runs")).to_be_hidden()
    expect(page.get_by_label("Reason (recorded on every cancelled run)")).to_be_hidden()
    expect(page.get_by_role("link", name="Cancel every run matching this filter…")).to_have_count(0)


def test_only_ended_runs_offer_no_cancel_and_a_filter_brings_it_back(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    done = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(done, approver)
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    button = page.get_by_role("button", name="Cancel selected runs")
    expect(button).to_be_visible()

    _apply_state(page, "COMPLETED")  # the table is swapped in place: only ended runs
    expect(page.locator("#run-table")).to_contain_text(done.short_id)
    expect(button).to_be_hidden()

    _apply_state(page, "WAITING_HUMAN")
    expect(page.get_by_label(f"Select run {waiting.short_id}")).to_be_visible()
    expect(button).to_be_visible()
