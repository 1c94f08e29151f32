"""Regions that refresh themselves, seen in Chromium: a session that ends under them sends
the whole page to the login page (and back after signing in) instead of swapping the login
page into the region; a keyboard user's focus survives their swaps."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Run
from sim import faultlab
from tests.browser_support import login
from tests.helpers import approve, bulk_cancel_in_progress, make_run
from tests.runs.console.conftest import checkpoint_of

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


def test_a_decision_posted_from_a_page_whose_session_ended_signs_in_back_to_that_page(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """Logged out in another tab, the approver still submits the stale approval page: the
    sign-in leads back to the approval (still pending, nothing applied), not to the
    POST-only decide address, which answered a 405 page after the sign-in."""
    base = live_server.url
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, base, "approver")
    page.goto(f"{base}/approvals/{checkpoint.pk}/")

    other_tab = page.context.new_page()
    other_tab.goto(f"{base}/")
    other_tab.get_by_role("button", name="Log out").click()
    other_tab.wait_for_url(re.compile(r"/login/"))
    other_tab.close()

    page.get_by_label("Reason (required, recorded with your decision)").fill("looks right")
    page.get_by_role("button", name="Approve exactly this proposal").click()
    page.wait_for_url(f"{base}/login/?next=/approvals/{checkpoint.pk}/")
    page.get_by_label("Username").fill("approver")
    page.get_by_label("Password").fill("pw-approver")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/approvals/{checkpoint.pk}/")
    expect(page.get_by_role("button", name="Approve exactly this proposal")).to_be_visible()
    checkpoint.refresh_from_db()
    assert checkpoint.status == "PENDING"


# Everything a keyboard reaches inside a region that swaps itself: each needs an id that is
# unique on the page, the one thing htmx matches to give focus back after a swap.
FOCUS_WITHOUT_ID = """
() => {
  const focusable =
    'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]';
  const regions = [...document.querySelectorAll('[hx-trigger*="every"], table.faultlab tbody tr')];
  const unmatched = [];
  for (const region of regions) {
    for (const el of region.querySelectorAll(focusable)) {
      if (!el.id || document.querySelectorAll('#' + CSS.escape(el.id)).length !== 1) {
        unmatched.push(el.outerHTML.slice(0, 160));
      }
    }
  }
  const counts = regions.map(r => r.querySelectorAll(focusable).length);
  return {regions: regions.length, focusable: counts, unmatched};
}
"""


def test_a_keyboard_user_keeps_focus_in_the_approvals_queue_across_its_refresh(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    link = page.locator("#queue").get_by_role("link", name=checkpoint.pk)
    expect(link).to_be_visible()
    for _ in range(60):
        page.keyboard.press("Tab")
        if link.evaluate("el => el === document.activeElement"):
            break
    else:
        pytest.fail("Tab never reached the checkpoint's link in the queue")
    page.evaluate("() => { window.focusedBefore = document.activeElement; }")

    with page.expect_response(
        lambda r: r.request.headers.get("hx-target") == "queue", timeout=QUEUE_REFRESH_MS * 3
    ):
        pass
    # The queue was swapped (the link is a new element), and focus is on the new link.
    page.wait_for_function("() => !document.body.contains(window.focusedBefore)")
    focused = page.evaluate(
        "() => ({id: document.activeElement.id, href: document.activeElement.getAttribute('href')})"
    )
    assert focused == {
        "id": f"queue-open-{checkpoint.pk}",
        "href": f"/approvals/{checkpoint.pk}/",
    }
    page.keyboard.press("Tab")  # and the keyboard goes on from there: the run's link
    assert page.evaluate("document.activeElement.id") == f"queue-run-{checkpoint.pk}"


def test_every_focusable_element_of_a_refreshing_region_has_a_unique_id(
    live_server: Any, new_page: Any, operator: Any, approver: Any, waiting: Run
) -> None:
    bulk_cancel_in_progress(reason="still running", total=3)
    faultlab.fixture_run_recorded(name=faultlab.FIXTURES[0].name, by_ref="user:operator")
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    pages = {
        "runs list (state counts)": "/",
        "run (live area)": f"/runs/{waiting.pk}/",
        "operations": "/operations/",
        "fault lab": "/faultlab/",
    }
    for name, path in pages.items():
        page.goto(f"{base}{path}")
        if path == "/":  # the counts load after the page, then refresh themselves
            expect(page.locator('#state-counts[hx-trigger*="every"]')).to_have_count(1)
        found = page.evaluate(FOCUS_WITHOUT_ID)
        assert found["regions"] and sum(found["focusable"]), (name, found)
        assert not found["unmatched"], (name, found["unmatched"])
    approvals = new_page()
    login(approvals, base, "approver")
    approvals.goto(f"{base}/approvals/")
    found = approvals.evaluate(FOCUS_WITHOUT_ID)
    assert found["regions"] == 1 and found["focusable"] == [2], found
    assert not found["unmatched"], found["unmatched"]
    # At phone width a table's scrolling box becomes a tab stop too: it needs an id as well.
    for viewer, paths in ((page, pages.values()), (approvals, ["/approvals/"])):
        viewer.set_viewport_size({"width": 375, "height": 800})
        for path in paths:
            viewer.goto(f"{base}{path}")
            found = viewer.evaluate(FOCUS_WITHOUT_ID)
            assert not found["unmatched"], (path, found["unmatched"])
    expect(approvals.locator("#queue-scroll")).to_have_attribute("tabindex", "0")


def test_focus_on_a_scrolling_table_survives_the_queue_refresh_at_phone_width(
    live_server: Any, new_page: Any, approver: Any, operator: Any, waiting: Run
) -> None:
    page = new_page()
    page.set_viewport_size({"width": 375, "height": 800})
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    box = page.locator("#queue-scroll")
    expect(box).to_have_attribute("tabindex", "0")
    box.focus()
    page.evaluate("() => { window.focusedBefore = document.activeElement; }")
    # The refresh brings a new checkpoint: the table's text changes, its box stays.
    arrived = make_run(principal="user:operator", requested_by=operator, namespace="live")
    expect(page.locator("#queue")).to_contain_text(arrived.short_id, timeout=QUEUE_REFRESH_MS * 3)
    with page.expect_response(
        lambda r: r.request.headers.get("hx-target") == "queue", timeout=QUEUE_REFRESH_MS * 3
    ):
        pass
    page.wait_for_function("() => !document.body.contains(window.focusedBefore)")
    page.wait_for_function("() => document.activeElement.id === 'queue-scroll'")


def test_a_run_that_ends_while_the_operator_types_a_reason_leaves_the_focus_on_its_actions(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """The operator is typing a cancellation reason when the run completes: the refresh
    replaces the actions (the cancel form gives way to "The run has ended"). Focus went to
    <body>, the top of the page, with nothing said; it now lands on the actions card, whose
    words say why the form is gone, and the next Tab goes on from there."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    reason = page.get_by_label("Cancellation reason (required)")
    reason.focus()
    page.keyboard.type("the customer called")
    approve(waiting, approver)
    expect(page.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    expect(page.locator("#run-actions")).to_contain_text("The run has ended")
    page.wait_for_function("() => document.activeElement !== document.body", timeout=3_000)
    assert page.evaluate("document.activeElement.id") == "run-actions"
    page.keyboard.press("Tab")  # on to the next control after the card, not back to the top
    assert page.evaluate(
        "document.getElementById('run-actions').compareDocumentPosition("
        "document.activeElement) & Node.DOCUMENT_POSITION_FOLLOWING"
    )


def test_a_table_scrolled_sideways_stays_where_it_was_across_the_queue_refresh(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """On a phone the approver swipes the queue's table sideways to read "Expires in":
    every 5 seconds the refresh put it back at its first column. A scrolled box in a
    refreshed region keeps its scroll position."""
    page = new_page()
    page.set_viewport_size({"width": 375, "height": 800})
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    box = page.locator("#queue-scroll")
    expect(box).to_have_attribute("tabindex", "0")
    box.evaluate("el => { el.scrollLeft = el.scrollWidth; window.scrolledBox = el; }")
    scrolled = box.evaluate("el => el.scrollLeft")
    assert scrolled > 100
    with page.expect_response(
        lambda r: r.request.headers.get("hx-target") == "queue", timeout=QUEUE_REFRESH_MS * 3
    ):
        pass
    page.wait_for_function("() => !document.body.contains(window.scrolledBox)")
    page.wait_for_timeout(100)  # the swap settles
    assert page.locator("#queue-scroll").evaluate("el => el.scrollLeft") == scrolled
