"""The console used the way people use it: a slow answer is seen to be on its way, one
that never comes or is refused is said, a page offers no link its reader's roles refuse
(a click that ends on the 403 page) and no action on a selection it refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs import services
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


def test_a_filter_whose_answer_is_slow_marks_the_list_busy_until_it_arrives(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """Apply on a slow server changed nothing on the page until the answer came: no sign
    the click was taken, so people clicked again or left. The list it will replace is
    marked busy (dimmed, aria-busy) while the request is out, and no longer after."""
    page = new_page()
    login(page, live_server.url, "operator")
    table = page.locator("#run-table")
    expect(table).to_contain_text(completed.short_id)
    held: list[Any] = []
    page.route(re.compile(r"/\?.*state=COMPLETED"), lambda route: held.append(route))
    page.get_by_label("State").select_option("COMPLETED")
    page.get_by_role("button", name="Apply").click()
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the filter request was never sent"
    expect(table).to_have_attribute("aria-busy", "true")
    page.wait_for_timeout(600)  # past the short delay that keeps a quick answer from flickering
    assert float(table.evaluate("el => getComputedStyle(el).opacity")) < 1
    held[0].continue_()
    expect(page).to_have_url(re.compile(r"state=COMPLETED"))
    expect(table).not_to_have_attribute("aria-busy", "true")
    expect(table).to_contain_text(completed.short_id)
    assert float(table.evaluate("el => getComputedStyle(el).opacity")) == 1


def test_a_timeline_page_whose_answer_is_slow_marks_the_timeline_busy(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{completed.pk}/")
    held: list[Any] = []
    page.route(re.compile(r"kind=transitions"), lambda route: held.append(route))
    page.locator("#timeline-kind-transitions").click()
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the timeline request was never sent"
    expect(page.locator("#run-live")).to_have_attribute("aria-busy", "true")
    held[0].continue_()
    expect(page).to_have_url(re.compile(r"kind=transitions"))
    expect(page.locator("#run-live")).not_to_have_attribute("aria-busy", "true")


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


def test_a_filter_that_cannot_reach_the_server_says_so_instead_of_nothing(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """The connection drops (a laptop off the VPN, the server restarting) and Apply is
    pressed: htmx gets no answer at all, and the page did nothing, the list still under
    the old filter as if it had been applied. It says the server was not reached."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.route(
        re.compile(r"/\?.*state=COMPLETED"), lambda route: route.abort("internetdisconnected")
    )
    page.get_by_label("State").select_option("COMPLETED")
    page.get_by_role("button", name="Apply").click()
    refusal = page.locator("#request-refused")
    expect(refusal).to_be_visible()
    expect(refusal).to_have_attribute("role", "alert")
    expect(refusal).to_contain_text("No answer from the server")
    expect(refusal.get_by_role("link", name="Reload this page")).to_be_visible()
    expect(page.locator("#run-table")).not_to_have_attribute("aria-busy", "true")
    expect(page.get_by_role("button", name="Apply")).to_be_focused()
    page.unroute(re.compile(r"/\?.*state=COMPLETED"))
    page.get_by_role("button", name="Apply").click()  # sent again, answered: the alert goes
    expect(page).to_have_url(re.compile(r"state=COMPLETED"))
    expect(refusal).to_have_count(0)


def test_a_timeline_link_refused_by_the_server_says_so_instead_of_nothing(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """A timeline link (not in a form) whose answer is an error page: htmx swaps no error,
    and the click did nothing visible. It says what the server's page says."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{completed.pk}/")
    page.route(
        re.compile(r"kind=transitions"),
        lambda route: route.fulfill(
            status=500,
            content_type="text/html",
            body="<main><section role=alert><h1>500 · Something failed on our side</h1>"
            "<p>The request did not complete.</p></section></main>",
        ),
    )
    page.locator("#timeline-kind-transitions").click()
    refusal = page.locator("#request-refused")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("500 · Something failed on our side")
    expect(page.locator("#run-live")).not_to_have_attribute("aria-busy", "true")


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


def test_the_second_catalog_admin_finds_a_requested_retirement_from_the_catalog(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """A risky retirement needs a second catalog admin, but only the version's own pages
    said one was requested: the catalog list, where the second admin starts, showed the
    row as any admitted version. The row says so and leads to the retire page."""
    from catalog.models import CapabilityVersion
    from tests.conftest import make_user

    make_user("catalog-reviewer", "north", "catalog-admin")
    row = CapabilityVersion.objects.get(capability_id="reserve_part", version="1.0.0")
    first = new_page()
    login(first, live_server.url, "catalog-admin")
    first.goto(f"{live_server.url}/catalog/versions/{row.pk}/retire/")
    first.get_by_label("Reason").fill("the supplier withdrew the part service")
    first.locator("#retire-ack").check()
    first.get_by_role("button", name="Request retirement").click()
    expect(first.locator("#retire-own-request")).to_be_visible()

    second = new_page()
    login(second, live_server.url, "catalog-reviewer")
    second.goto(f"{live_server.url}/catalog/")
    requested = second.locator("#catalog-table").get_by_role(
        "link", name="retirement requested (confirm or withdraw)"
    )
    expect(requested).to_have_count(1)
    requested.click()
    expect(second).to_have_url(f"{live_server.url}/catalog/versions/{row.pk}/retire/")
    second.get_by_label("Reason", exact=True).fill("agreed: no runs depend on it")
    second.locator("#retire-ack").check()
    second.get_by_role("button", name="Confirm retirement").click()
    expect(second.locator("#retire-pending")).to_have_count(0)
    second.goto(f"{live_server.url}/catalog/")
    expect(second.locator("#catalog-table").get_by_text("retirement requested")).to_have_count(0)
    row.refresh_from_db()
    assert row.lifecycle == "RETIRED"


def test_a_run_page_that_loses_the_server_says_its_live_updates_stopped(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The run page refreshes itself every 2 s. With the server gone (a restart, the
    connection dropped) every refresh failed in silence: the page kept showing the state
    it had, as if current, while the run may have moved on. It says the live updates are
    paused and since when; the next answered refresh takes that back."""
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    expect(page.locator("#run-live")).to_have_attribute("data-state", "WAITING_HUMAN")
    polls = re.compile(r"since=")
    page.route(polls, lambda route: route.abort("connectionrefused"))
    paused = page.locator("#live-paused")
    expect(paused).to_be_visible(timeout=8_000)
    expect(paused).to_have_attribute("role", "status")
    expect(paused).to_contain_text("Live updates paused")
    expect(paused).to_contain_text(re.compile(r"since \d\d:\d\d:\d\d UTC"))
    page.unroute(polls)
    expect(paused).to_have_count(0, timeout=8_000)


# The elements whose content runs out of their box (what widens the page), for the message.
OVERFLOWING = r"""() => [...document.querySelectorAll("main *")]
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1
    && getComputedStyle(e).overflowX === "visible")
  .map(e => `${e.tagName}#${e.id}.${e.className}`)"""

# A reason as people paste it: one long unbroken string (a ticket URL, a log line).
PASTED = "https://tickets.example.invalid/browse/FIELD-4711?focus=" + "a1b2c3d4" * 60


@pytest.mark.parametrize("width", [375, 1280])
def test_a_long_unbroken_reason_wraps_instead_of_widening_the_page(
    live_server: Any, browser: Any, operator: Any, approver: Any, width: int
) -> None:
    """An approval reason of one unbroken string (a pasted URL) widened the checkpoint
    page by thousands of pixels, on a desktop too: the page scrolled sideways to read a
    line. Reasons wrap inside their card, as the cancel reason of a closed checkpoint does."""
    from approvals.models import Checkpoint

    approved = make_run(principal="user:operator", requested_by=operator, namespace="live")
    checkpoint = Checkpoint.objects.get(pk=approved.waiting_checkpoint)
    approve(approved, approver, reason=PASTED)
    cancelled = make_run(principal="user:operator", requested_by=operator, namespace="live")
    closed = Checkpoint.objects.get(pk=cancelled.waiting_checkpoint)
    services.run_cancel(run_id=str(cancelled.pk), by_ref="user:operator", reason=PASTED[:500])
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        login(page, live_server.url, "approver")
        for address in (
            f"/approvals/{checkpoint.pk}/",
            f"/approvals/{closed.pk}/",
            "/approvals/history/",
            f"/runs/{approved.pk}/",
            f"/runs/{cancelled.pk}/",
        ):
            page.goto(f"{live_server.url}{address}")
            expect(page.get_by_role("heading", level=1)).to_be_visible()
            sideways = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            wide = page.evaluate(OVERFLOWING)
            assert sideways == 0, (address, sideways, wide)
    finally:
        context.close()


def test_a_history_search_that_is_not_a_run_id_does_not_say_it_found_nothing(
    live_server: Any, new_page: Any, completed: Run
) -> None:
    """The decision history refused "pump-7" (a run id is hexadecimal) and then said "No
    decision on a run starting pump-7" and "No refused decision on a run starting
    pump-7", as if it had searched. It says only why the search was refused."""
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/history/")
    expect(page.get_by_role("cell", name="looks right")).to_be_visible()
    search = page.get_by_role("search", name="Find decisions by run").get_by_label("Run id")
    search.fill("pump-7")
    search.press("Enter")
    expect(page.locator("#h-q-error")).to_have_text(
        "A run id is hexadecimal (a full id or a prefix)."
    )
    expect(page.get_by_text("run starting pump-7")).to_have_count(0)
    expect(page.get_by_role("heading", name="Decisions")).to_have_count(0)


@pytest.mark.parametrize("failure", ["no_answer", "error_page"])
def test_state_counts_that_cannot_load_say_so_instead_of_counting_forever(
    live_server: Any, new_page: Any, completed: Run, failure: str
) -> None:
    """The runs list loads its per-state counts after the page; when that request got no
    answer or an error page, "Counting per state…" stayed on the page for good, as if the
    count were still coming. The placeholder now says the counts could not be loaded and
    how to try again; the list itself stays usable."""
    page = new_page()
    counts = re.compile(r"/operations/counts/")

    def fail(route: Any) -> None:
        if failure == "no_answer":
            route.abort("connectionrefused")
        else:
            route.fulfill(status=503, content_type="text/html", body="<main><h1>Busy</h1></main>")

    page.route(counts, fail)
    login(page, live_server.url, "operator")
    placeholder = page.locator("#state-counts")
    expect(placeholder).to_contain_text("could not be loaded")
    expect(placeholder).not_to_contain_text("Counting per state")
    expect(placeholder.get_by_role("link", name="Reload")).to_be_visible()
    expect(page.locator("#run-table")).to_contain_text(completed.short_id)
