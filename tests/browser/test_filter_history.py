"""The filters of a list, through the browser's back and forward buttons: each filter
applied by htmx is its own history entry, and going back shows the list and the filter
form of that entry together (a form that says "any" above a filtered list would have the
next Apply select something else than what the operator sees)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.helpers import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _filter_runs_by_state(page: Any, state: str) -> None:
    """Choose ``state`` in the runs list's filter and apply it."""
    filters = page.get_by_role("search", name="Filter runs")
    filters.get_by_label("State").select_option(state)
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(rf"state={state}"))


def test_back_shows_the_filter_form_as_the_list_it_filtered(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    from tests.browser_support import login

    live = make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert Run.objects.get(pk=live.pk).scenario != "abstain"
    page = new_page()
    login(page, live_server.url, "operator")
    table = page.locator("#run-table")
    filters = page.get_by_role("search", name="Filter runs")
    state, scenario = filters.get_by_label("State"), filters.get_by_label("Scenario")
    run_id = filters.get_by_label("Run id")

    state.select_option("WAITING_HUMAN")
    run_id.fill(live.short_id)
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"state=WAITING_HUMAN"))
    expect(table).to_contain_text(live.short_id)

    scenario.select_option("abstain")
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"scenario=abstain"))
    expect(table).to_contain_text("No runs match these filters")

    page.go_back()
    expect(page).to_have_url(re.compile(r"state=WAITING_HUMAN&.*scenario=&"))
    expect(table).to_contain_text(live.short_id)
    expect(state).to_have_value("WAITING_HUMAN")
    expect(scenario).to_have_value("")
    expect(run_id).to_have_value(live.short_id)

    page.go_back()
    expect(page).to_have_url(f"{live_server.url}/")
    expect(state).to_have_value("")
    expect(run_id).to_have_value("")

    page.go_forward()
    expect(page).to_have_url(re.compile(r"state=WAITING_HUMAN"))
    expect(state).to_have_value("WAITING_HUMAN")
    expect(run_id).to_have_value(live.short_id)


def test_a_refused_bulk_cancel_comes_back_on_the_list_as_filtered_on_the_page(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The bulk cancel form's address carried the filter the page was first loaded with;
    after a filter applied by htmx, a refused bulk cancel came back on the whole list,
    under a filter form that said "any"."""
    from tests.browser_support import login

    chosen = make_run(principal="user:operator", requested_by=operator, namespace="live")
    other = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    filters = page.get_by_role("search", name="Filter runs")
    filters.get_by_label("Run id").fill(chosen.short_id)
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(rf"q={chosen.short_id}"))
    expect(page.locator("#run-table")).not_to_contain_text(other.short_id)

    page.get_by_label(f"Select run {chosen.short_id}").check()
    page.get_by_label("Reason (recorded on every cancelled run)").fill("   ")
    page.get_by_role("button", name="Cancel selected runs").click()
    expect(page.locator("#bulk-error")).to_contain_text("needs a reason")
    expect(page.locator("#run-table")).to_contain_text(chosen.short_id)
    expect(page.locator("#run-table")).not_to_contain_text(other.short_id)
    expect(filters.get_by_label("Run id")).to_have_value(chosen.short_id)
    expect(page.get_by_label(f"Select run {chosen.short_id}")).to_be_checked()


def test_a_view_saved_after_filtering_the_approval_queue_keeps_that_filter(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    """The queue's "Save this view" sent the query the page was first loaded with: a view
    saved after choosing a kind (applied by htmx) opened the unfiltered queue."""
    from tests.browser_support import login

    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    filters = page.get_by_role("search")
    filters.get_by_label("Kind").select_option("clarification")
    filters.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"kind=clarification"))

    page.get_by_label("Save this view as").fill("clarifications")
    page.get_by_role("button", name="Save view").click()
    expect(page.locator("main .messages")).to_contain_text("View “clarifications” saved")
    page.get_by_text("Saved views").click()
    page.get_by_role("link", name="Approvals: clarifications").click()
    expect(page).to_have_url(re.compile(r"/approvals/\?.*kind=clarification"))
    expect(page.get_by_role("search").get_by_label("Kind")).to_have_value("clarification")


def test_back_from_a_run_opened_in_a_filtered_list_shows_the_whole_page(
    live_server: Any, new_page: Any, operator: Any, catalog_admin: Any
) -> None:
    """Filter a list, open one of its rows (or the list's next page), press Back: the
    browser showed its cached copy of the htmx answer for that address, the list's table
    alone, without the page around it (no header, no filter form, no style). The answers
    now vary by the htmx request header, so the page is fetched whole."""
    from tests.browser_support import login

    live = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    _filter_runs_by_state(page, "WAITING_HUMAN")
    page.locator("#run-table").get_by_role("link", name=live.short_id).click()
    expect(page).to_have_url(re.compile(rf"/runs/{live.pk}/"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"state=WAITING_HUMAN"))
    expect(page.get_by_role("search", name="Filter runs").get_by_label("State")).to_have_value(
        "WAITING_HUMAN"
    )
    expect(page.locator("#run-table")).to_contain_text(live.short_id)
    expect(page.get_by_role("navigation").first).to_be_visible()

    admin = new_page()
    login(admin, live_server.url, "catalog-admin")
    admin.goto(f"{live_server.url}/catalog/")
    catalog_filters = admin.get_by_role("search")
    catalog_filters.get_by_label("Lifecycle").select_option("ADMITTED")
    expect(admin).to_have_url(re.compile(r"lifecycle=ADMITTED"))
    admin.locator("#catalog-table").get_by_role("link", name="reserve_part").first.click()
    expect(admin).to_have_url(re.compile(r"/catalog/reserve_part/"))
    admin.go_back()
    expect(admin).to_have_url(re.compile(r"lifecycle=ADMITTED"))
    expect(admin.get_by_role("search").get_by_label("Lifecycle")).to_have_value("ADMITTED")


def test_a_filter_applied_from_the_keyboard_says_what_the_list_now_shows(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """A screen-reader user chooses a state and presses Apply: htmx replaced the table
    and nothing was said, so the user could not tell the filter had worked. The page's
    live region now says how many runs the list shows, also when the count is the same
    as before the filter."""
    from tests.browser_support import login

    make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    announcer = page.locator("#live-announcer")
    filters = page.get_by_role("search", name="Filter runs")
    filters.get_by_label("State").focus()
    filters.get_by_label("State").select_option("WAITING_HUMAN")
    filters.get_by_role("button", name="Apply").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"state=WAITING_HUMAN"))
    expect(announcer).to_have_text("1 run matches the filters.")

    filters.get_by_label("Scenario").select_option("abstain")
    filters.get_by_role("button", name="Apply").focus()
    page.keyboard.press("Enter")
    expect(announcer).to_have_text("No runs match these filters.")
    # The same words again: said again (the region is emptied first, then filled).
    announcer.evaluate(
        "el => { window.emptied = 0; new MutationObserver(() => {"
        " if (el.textContent === '') window.emptied += 1; })"
        ".observe(el, {childList: true, characterData: true, subtree: true}); }"
    )
    page.keyboard.press("Enter")
    page.wait_for_function("() => window.emptied === 1")
    expect(announcer).to_have_text("No runs match these filters.")


def test_a_catalog_filter_says_what_it_found_and_how_to_leave_an_empty_result(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """The catalog's filter applies itself on every change: it said nothing, and a search
    that found nothing said so without a way back but the browser's."""
    from tests.browser_support import login

    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/")
    filters = page.get_by_role("search")
    filters.get_by_label("Lifecycle").select_option("DISCOVERED")
    expect(page.locator("#live-announcer")).to_have_text(
        re.compile(r"^\d+ capability versions? shown\.$")
    )
    filters.get_by_label("Lifecycle").select_option("RETIRED")
    expect(page.locator("#live-announcer")).to_have_text(
        "No capability version matches these filters."
    )
    page.locator("#catalog-table").get_by_role("link", name="Clear the filters").click()
    expect(page).to_have_url(f"{live_server.url}/catalog/")
    expect(page.locator("#catalog-table tbody tr").first).to_be_visible()


def test_a_state_count_under_a_state_filter_opens_that_state(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The per-state counts ignore the list's state filter, so each links to its state: with
    a state chosen, the link named the state twice (state=WAITING_HUMAN&state=CANCELLED),
    and the console's 400 page answered the list's own link."""
    from runs import services as runs
    from tests.browser_support import login

    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    ended = make_run(principal="user:operator", requested_by=operator, namespace="live")
    runs.run_cancel(run_id=str(ended.pk), by_ref="user:operator", reason="part found locally")
    page = new_page()
    login(page, live_server.url, "operator")
    _filter_runs_by_state(page, "WAITING_HUMAN")
    expect(page.locator("#run-table")).not_to_contain_text(ended.short_id)

    page.locator("#state-count-CANCELLED").click()
    expect(page).to_have_url(re.compile(r"\?state=CANCELLED$"))
    expect(page.locator("h1")).to_have_text("Runs")
    expect(page.get_by_role("search", name="Filter runs").get_by_label("State")).to_have_value(
        "CANCELLED"
    )
    expect(page.locator("#run-table")).to_contain_text(ended.short_id)
    expect(page.locator("#run-table")).not_to_contain_text(waiting.short_id)


def test_one_back_undoes_a_catalog_filter_chosen_and_applied(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """The catalog's filter applies itself when a choice changes, and Apply sends it again:
    each pushed the same address, so the first Back after a filter did nothing visible."""
    from tests.browser_support import login

    page = new_page()
    login(page, live_server.url, catalog_admin.get_username())
    page.goto(f"{live_server.url}/catalog/")
    filters = page.get_by_role("search", name="Filter versions")
    lifecycle = filters.get_by_label("Lifecycle", exact=True)
    lifecycle.select_option("DISCOVERED")
    # Apply's own request answered before Back (when the change's request had already
    # answered, Apply sends another; one still in flight after Back would push again).
    with page.expect_response(lambda r: "lifecycle=DISCOVERED" in r.url):
        filters.get_by_role("button", name="Apply").click()
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    expect(page).to_have_url(re.compile(r"lifecycle=DISCOVERED"))
    expect(page.locator("#catalog-table")).not_to_contain_text("ADMITTED")

    page.go_back()
    expect(page).to_have_url(f"{live_server.url}/catalog/")
    expect(lifecycle).to_have_value("")
    expect(page.locator("#catalog-table")).to_contain_text("ADMITTED")
