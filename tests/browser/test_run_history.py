"""A long run through a real browser: the timeline pages and filters by kind, and the run's
many checkpoints show as a bounded list with the whole list a click away."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from runs.console import runs_selectors as selectors
from tests.browser_support import login
from tests.runs.console.test_run_page_bounds import add_checkpoints
from tests.runs.histories import long_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_pages_a_long_history_and_opens_every_checkpoint(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    run = long_run(2500, control_at=frozenset({700, 1800, 2300}))
    ids = add_checkpoints(run, selectors.RELATED_PAGE + 30)
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runs/{run.pk}/")
    rows = page.locator("table.timeline tbody tr")
    expect(rows).to_have_count(selectors.TIMELINE_LIMIT)
    expect(rows.last).to_have_attribute("id", "ev-2500")
    page.get_by_role("link", name="← older events").click()
    expect(rows.first).to_have_attribute("id", "ev-501")
    expect(rows.last).to_have_attribute("id", "ev-1500")
    page.get_by_role("navigation", name="Filter events").get_by_role(
        "link", name="rejected"
    ).click()
    expect(rows).to_have_count(2)  # the 1st and 3rd control events are refusals
    expect(rows.first).to_have_attribute("id", "ev-700")
    expect(rows.last).to_have_attribute("id", "ev-2300")

    checkpoints = page.locator("#checkpoints-h + p + ul li")
    expect(checkpoints).to_have_count(selectors.RELATED_LIMIT)
    expect(checkpoints.last).to_contain_text(ids[-1])
    page.get_by_role("link", name="all checkpoints of this run").click()
    listed = page.locator("#related tbody tr")
    expect(listed).to_have_count(selectors.RELATED_PAGE)
    expect(listed.first).to_contain_text(ids[-1])
    page.get_by_role("link", name="Older »").click()
    expect(listed).to_have_count(30)
    expect(listed.last).to_contain_text(ids[0])
    expect(page.get_by_role("link", name="Older »")).to_have_count(0)
