"""The fault lab's per-row Run in Chromium: while its fixture runs, the row says so and the
button is disabled and busy; when the request ends (answered or failed) it is usable again."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser_support import login, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURE = "abstain"


def test_a_rows_run_button_is_busy_while_its_fixture_runs(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    # Hold each run request until the test lets it go: "in flight" for as long as needed.
    held: list[Any] = []
    page.route("**/faultlab/run/", lambda route: held.append(route))
    row = page.locator(f"#fx-{FIXTURE}")
    button = row.get_by_role("button", name=f"Run fixture {FIXTURE}")

    button.click()
    expect(button).to_be_disabled()
    expect(button).to_have_attribute("aria-busy", "true")
    expect(row).to_have_class(re.compile(r"\bhtmx-request\b"))
    expect(row.get_by_text("running…")).to_be_visible()
    screenshot(page, "faultlab-row-running")
    assert len(held) == 1
    held.pop().continue_()
    expect(row).to_contain_text("PASS")
    expect(row.get_by_text("running…")).to_be_hidden()
    expect(button).to_be_enabled()
    expect(button).not_to_have_attribute("aria-busy", "true")

    # A request that fails swaps nothing: the same button works again, no longer busy.
    button.click()
    expect(button).to_have_attribute("aria-busy", "true")
    held.pop().abort()
    expect(button).to_be_enabled()
    expect(button).not_to_have_attribute("aria-busy", "true")
    expect(row).not_to_have_class(re.compile(r"\bhtmx-request\b"))


def test_a_keyboard_user_keeps_focus_on_the_run_button_after_the_row_is_swapped(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The button is disabled while its fixture runs (which drops focus), and the row is
    then replaced: focus comes back to the new row's button, not the top of the page."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    row = page.locator(f"#fx-{FIXTURE}")
    row.get_by_role("button", name=f"Run fixture {FIXTURE}").focus()
    page.keyboard.press("Enter")
    expect(row).to_contain_text("PASS")
    expect(row).not_to_have_class(re.compile(r"\bhtmx-(request|settling)\b"))
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()

    # A request that fails swaps nothing: focus is back on the same, usable button.
    page.route("**/faultlab/run/", lambda route: route.abort())
    page.keyboard.press("Enter")
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_enabled()
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()


# Every text the page's live announcer was given, in order (its emptying left out).
RECORD_ANNOUNCEMENTS = """() => {
  window.announced = [];
  const announcer = document.getElementById('live-announcer');
  new MutationObserver(() => {
    const text = announcer.textContent.trim();
    if (text) window.announced.push(text);
  }).observe(announcer, {childList: true, characterData: true, subtree: true});
}"""


def test_a_finished_fixture_is_announced_politely_and_focus_stays_on_its_button(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The result appears in the row; a screen reader is told too, through the page's
    polite live region, each time the fixture finishes (the same words twice are said
    twice), and the keyboard user's focus stays on the row's Run button."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    announcer = page.locator("#live-announcer")
    expect(announcer).to_have_attribute("role", "status")
    expect(announcer).to_have_attribute("aria-live", "polite")
    expect(announcer).to_have_text("")
    page.evaluate(RECORD_ANNOUNCEMENTS)
    said = f"Fixture {FIXTURE} finished: PASS"

    page.locator(f"#fx-run-{FIXTURE}").focus()
    page.keyboard.press("Enter")
    expect(announcer).to_have_text(re.compile(rf"^{said} \(\w+"))
    expect(page.locator(f"#fx-{FIXTURE}")).to_contain_text("PASS")
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()

    page.keyboard.press("Enter")  # the same fixture again: the same words, said again
    page.wait_for_function("() => window.announced.length >= 2")
    announced = page.evaluate("window.announced")
    assert len(announced) == 2 and all(text.startswith(said) for text in announced), announced
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()
    # Only a fixture that finished is announced: the page as loaded says nothing.
    page.reload()
    expect(page.locator(f"#fx-{FIXTURE}")).to_contain_text("PASS")
    expect(page.locator("#live-announcer")).to_have_text("")


def test_two_fixtures_finishing_together_are_both_announced(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Two rows whose answers arrive within the same moment are both said, in the order
    they arrived, in one announcement: neither outcome replaces the other."""
    second = "decreased_counter"
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    page.evaluate(RECORD_ANNOUNCEMENTS)
    # Each fixture runs on the server; its answer is held here until both are in, then
    # both are handed to the page one right after the other.
    answered: list[Any] = []
    page.route("**/faultlab/run/", lambda route: answered.append((route, route.fetch())))
    page.locator(f"#fx-run-{FIXTURE}").click()
    page.locator(f"#fx-run-{second}").click()
    for _ in range(600):
        if len(answered) == 2:
            break
        page.wait_for_timeout(50)
    assert len(answered) == 2
    for route, response in answered:
        route.fulfill(response=response)

    announcer = page.locator("#live-announcer")
    expect(page.locator(f"#fx-{second}")).to_contain_text("PASS")
    expect(announcer).to_contain_text(f"Fixture {FIXTURE} finished: PASS")
    expect(announcer).to_contain_text(f"Fixture {second} finished: PASS")
    page.wait_for_timeout(300)
    announced = page.evaluate("window.announced")
    assert len(announced) == 1, announced


def test_a_run_refused_by_the_server_says_so_instead_of_nothing(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Signed out and in again in another tab, the open fault lab's form token is stale:
    the server refuses the row's Run with its CSRF 403 page, which htmx does not swap.
    The page showed nothing at all (the button simply came back); it must say what the
    server said and how to go on, with the keyboard user's focus left on the button."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    other_tab = page.context.new_page()
    other_tab.goto(f"{live_server.url}/")
    other_tab.get_by_role("button", name="Log out").click()
    other_tab.wait_for_url(re.compile(r"/login/"))
    login(other_tab, live_server.url, "operator")
    other_tab.close()

    page.locator(f"#fx-run-{FIXTURE}").focus()
    page.keyboard.press("Enter")
    refusal = page.locator("#request-refused")
    expect(refusal).to_be_visible()
    expect(refusal).to_have_attribute("role", "alert")
    expect(refusal).to_contain_text("403 · The form has expired")
    expect(refusal).to_contain_text("nothing was changed")
    expect(refusal.get_by_role("link", name="Reload this page")).to_have_attribute(
        "href", f"{live_server.url}/faultlab/"
    )
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()
    expect(page.locator(f"#fx-{FIXTURE}")).to_contain_text("not run yet")
    screenshot(page, "faultlab-run-refused")

    page.keyboard.press("Enter")  # refused again: still one refusal on the page
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()
    expect(page.locator("#request-refused")).to_have_count(1)


def test_a_run_whose_database_connection_died_says_it_may_or_may_not_be_recorded(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The console's answer when the database connection dies under a request (the 503
    page, fieldops.middleware) reaches an HTMX form as the alert above the content: the
    database is unreachable, the action may or may not have been recorded, how to check.
    (The server cannot lose its connection on cue here: the row's Run is answered with the
    page the middleware renders for it; tests/fieldops/test_database_unavailable.py breaks
    a real connection.)"""
    from django.test import RequestFactory

    from fieldops.middleware import database_unavailable_page

    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    answer = database_unavailable_page(
        RequestFactory().post("/faultlab/", HTTP_HX_CURRENT_URL=f"{live_server.url}/faultlab/")
    )
    page.route(
        re.compile(r".*/faultlab/.+"),
        lambda route: (
            route.fulfill(
                status=answer.status_code,
                headers={k: v for k, v in answer.items()},
                body=answer.content,
            )
            if route.request.method == "POST"
            else route.continue_()
        ),
    )
    page.locator(f"#fx-run-{FIXTURE}").focus()
    page.keyboard.press("Enter")
    refusal = page.locator("#request-refused")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("503 · The database is unreachable")
    expect(refusal).to_contain_text("may or may not have been recorded")
    expect(refusal).to_contain_text("look for your action in its timeline")
    expect(page.locator(f"#fx-run-{FIXTURE}")).to_be_focused()


def test_a_rolled_back_fixture_opens_the_history_of_its_run(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """tenant_gate_closed rolls its gate change back, and its run with it: the row links the
    fixture's result page, which shows what that run did."""
    name = "tenant_gate_closed"
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/faultlab/")
    row = page.locator(f"#fx-{name}")
    row.get_by_role("button", name=f"Run fixture {name}").click()
    expect(row).to_contain_text("PASS")
    row.get_by_role("link", name="rolled back: its history").click()
    page.wait_for_url(f"{live_server.url}/faultlab/{name}/")
    history = page.get_by_role("region", name="Its run, rolled back")
    expect(history).to_contain_text("tenant_effect_gate_closed")
    expect(history).to_contain_text("escalation.admitted")
