"""What a mouse user would read in a hover tooltip (a ``title``) is also there for a keyboard
or touch user: the scenario filter's descriptions, what the capability filter selects and
the budget's "(was X)" note (a tooltip never shows on a phone, nor on keyboard focus)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from runs import services
from runs.policies import registry as policy_registry
from tests.browser_support import login
from tests.conftest import make_user
from tests.helpers import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def test_the_scenario_and_capability_filters_explain_themselves_without_a_hover(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    help_ = page.locator("#filter-help")
    summary = help_.locator("summary")
    # Reached and opened from the keyboard, it shows what each scenario does.
    summary.focus()
    page.keyboard.press("Enter")
    for name, scenario in policy_registry.scenarios().items():
        expect(help_.get_by_text(scenario.description, exact=True)).to_be_visible()
        expect(help_.locator("dt", has_text=name)).to_be_visible()
    capability = page.get_by_label("Capability called")
    explanation = page.locator(f"#{capability.get_attribute('aria-describedby')}")
    expect(explanation).to_be_visible()
    expect(explanation).to_contain_text("validation admitted a call of this capability")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # Escape closes it again, the focus back on its summary.
    page.keyboard.press("Escape")
    expect(help_).not_to_have_attribute("open", "")
    expect(summary).to_be_focused()


def test_a_changed_budget_says_in_words_that_an_operator_changed_it(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    services.run_budget_change(
        run_id=run.pk, by_ref="user:operator", budget="turns", limit=30, reason="more turns"
    )
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    gauges = page.locator("section[aria-labelledby=budgets-h]")
    note = gauges.get_by_text("changed by an operator from 24")
    expect(note).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


@pytest.mark.parametrize("path", ["/", "/approvals/"])
def test_that_a_saved_view_is_shared_is_said_beside_the_field_not_in_a_clipped_placeholder(
    live_server: Any, new_page: Any, world: None, path: str
) -> None:
    make_user("lead", "north", "operator", "approver")
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "lead")
    page.goto(live_server.url + path)
    name = page.get_by_label("Save this view as")
    hint = page.locator(f"#{name.get_attribute('aria-describedby')}")
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("shared within your tenant")
    # What placeholder is left fits the field at phone width (a placeholder never wraps).
    fits = name.evaluate(
        """el => { const c = document.createElement('canvas').getContext('2d');
        c.font = getComputedStyle(el).font;
        return c.measureText(el.placeholder).width <= el.clientWidth; }"""
    )
    assert fits
