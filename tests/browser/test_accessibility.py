"""Accessibility as a keyboard-only and screen-reader user meets the console.

axe-core (bundled by ``axe-playwright-python``, no network) checks the rendered pages in
Chromium; the tests that follow each name one finding that was fixed.
"""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.template import loader
from playwright.sync_api import expect

from runs.models import Run
from tests.browser_support import login
from tests.helpers import approve, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BLOCKING = ("serious", "critical")


def axe_violations(page: Any, *rules: str) -> list[str]:
    """Return the serious and critical axe findings on ``page`` (only ``rules`` if given)."""
    options: dict[str, Any] = {"resultTypes": ["violations"]}
    if rules:
        options["runOnly"] = {"type": "rule", "values": list(rules)}
    response = Axe().run(page, options=options).response
    return [
        f"{page.url} [{v['impact']}] {v['id']}: {node['target']} {node['failureSummary']}"
        for v in response["violations"]
        if v["impact"] in BLOCKING
        for node in v["nodes"]
    ]


@pytest.fixture
def waiting(operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_links_on_the_page_background_have_enough_contrast(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    for path in (f"/runs/{waiting.pk}/", "/recovery/", "/packet/"):
        page.goto(live_server.url + path)
        assert axe_violations(page, "color-contrast") == []


def test_the_api_tokens_link_in_the_top_bar_is_told_apart_from_its_text(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    assert axe_violations(page, "link-in-text-block") == []


def test_a_json_block_that_scrolls_can_be_reached_and_scrolled_by_keyboard(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/catalog/reserve_part/1.0.0/")
    assert axe_violations(page, "scrollable-region-focusable") == []
    block = page.locator('section[aria-labelledby="mp-h"] pre.json')
    assert block.evaluate("el => el.scrollHeight > el.clientHeight")
    block.focus()
    page.keyboard.press("PageDown")
    # Chromium scrolls smoothly: wait for the block to have moved.
    page.wait_for_function("el => el.scrollTop > 0", arg=block.element_handle(), timeout=3000)


def test_a_table_that_scrolls_at_phone_width_can_be_reached_by_keyboard(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    page.set_viewport_size({"width": 375, "height": 800})
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/packet/")
    assert axe_violations(page, "scrollable-region-focusable") == []
    box = page.locator("main .table-scroll").first
    assert box.evaluate("el => el.scrollWidth > el.clientWidth")
    box.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("el => el.scrollLeft > 0", arg=box.element_handle(), timeout=3000)
    # At a width where it fits, it is no tab stop.
    page.set_viewport_size({"width": 1600, "height": 900})
    page.wait_for_function("el => !el.hasAttribute('tabindex')", arg=box.element_handle())


DESCRIBED_BY = """el => (el.getAttribute('aria-describedby') || '').split(/\\s+/)
    .filter(Boolean)
    .map(id => document.getElementById(id)?.textContent ?? '<missing ' + id + '>')
    .join(' ')"""


def described_by(field: Any) -> str:
    """The text of the elements ``field``'s aria-describedby names ("<missing id>" if absent)."""
    return str(field.evaluate(DESCRIBED_BY))


def test_a_failed_login_marks_both_fields_and_names_the_error(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    for name in ("Username", "Password"):
        field = page.get_by_label(name)
        assert field.get_attribute("aria-invalid") == "true"
        assert "didn't match" in described_by(field)
    assert axe_violations(page) == []


def test_a_start_run_field_error_is_tied_to_its_field(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.locator("#start-run > summary").click()
    # A value no option offers (a stale page, a tampered form): the server refuses it.
    page.locator("#id_location_id option").first.evaluate("o => { o.value = 'nowhere'; }")
    page.get_by_role("button", name="Start run").click()
    field = page.get_by_label("Location")
    assert field.get_attribute("aria-invalid") == "true"
    assert "valid choice" in described_by(field)
    assert axe_violations(page) == []


def test_a_refused_cancel_or_budget_change_marks_the_field_at_fault(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    page.get_by_label("Cancellation reason (required)").fill("   ")
    page.get_by_role("button", name="Cancel run").click()
    reason = page.get_by_label("Cancellation reason (required)")
    assert reason.get_attribute("aria-invalid") == "true"
    assert "needs a reason" in described_by(reason)

    page.get_by_label("Budget", exact=True).select_option("actions")
    page.get_by_label("New limit").fill("0")
    page.get_by_label("Reason (required)", exact=True).fill("tighter")
    page.get_by_role("button", name="Record budget change").click()
    limit = page.get_by_label("New limit")
    assert limit.get_attribute("aria-invalid") == "true"
    assert "already used" in described_by(limit)
    budget_reason = page.get_by_label("Reason (required)", exact=True)
    assert budget_reason.get_attribute("aria-invalid") != "true"
    assert axe_violations(page) == []


def test_a_refused_budget_change_keeps_what_the_operator_typed_in_its_own_form(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    """The budget, limit and reason come back as typed (the error names that budget), and
    the budget's reason never turns up in the cancellation box of the same page."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    page.get_by_label("Budget", exact=True).select_option("actions")
    page.get_by_label("New limit").fill("0")
    page.get_by_label("Reason (required)", exact=True).fill("tighter for the night shift")
    page.get_by_role("button", name="Record budget change").click()
    expect(page.locator("#budget-error")).to_contain_text("already used")
    expect(page.get_by_label("Budget", exact=True)).to_have_value("actions")
    expect(page.get_by_label("New limit")).to_have_value("0")
    expect(page.get_by_label("Reason (required)", exact=True)).to_have_value(
        "tighter for the night shift"
    )
    expect(page.get_by_label("Cancellation reason (required)")).to_have_value("")


def focused_id(page: Any) -> str:
    return str(page.evaluate("() => document.activeElement.id"))


def test_after_a_refused_submit_the_focus_is_on_the_field_at_fault(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    page.get_by_label("New limit").fill("0")
    page.get_by_label("Reason (required)", exact=True).fill("tighter")
    page.get_by_role("button", name="Record budget change").click()
    page.wait_for_load_state()
    assert focused_id(page) == "budget-limit"
    # Typing goes straight into the field that needs it.
    page.keyboard.type("9")
    assert page.get_by_label("New limit").input_value() == "9"

    page.get_by_label("Cancellation reason (required)").fill("   ")
    page.get_by_role("button", name="Cancel run").click()
    page.wait_for_load_state()
    assert focused_id(page) == "cancel-reason"

    page.goto(live_server.url + "/")
    page.locator("#start-run > summary").click()
    page.locator("#id_scenario option").first.evaluate("o => { o.value = 'nothing'; }")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_load_state()
    assert focused_id(page) == "id_scenario"


def test_the_state_diagram_says_in_words_where_the_run_can_go_next(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    diagram = page.get_by_role("img", name="Run state: WAITING_HUMAN", exact=False)
    name = diagram.get_attribute("aria-label") or ""
    assert "approval.granted to VALIDATING" in name
    assert "run.cancelled to CANCELLED" in name


def test_a_refreshed_run_page_announces_the_new_state_in_a_live_region_that_stays(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    announcer = page.locator("#live-announcer")
    expect(announcer).to_have_attribute("aria-live", "polite")
    expect(announcer).to_have_text("")  # nothing to say on arrival
    announcer.evaluate("el => { el.dataset.original = 'yes'; }")
    approve(waiting, approver)
    expect(page.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    expect(announcer).to_contain_text("State COMPLETED at revision")
    # The region a screen reader listens to is the same node, never swapped out.
    expect(announcer).to_have_attribute("data-original", "yes")


def test_the_approval_queue_announces_a_new_checkpoint(
    live_server: Any, new_page: Any, approver: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    expect(page.locator("#live-announcer")).to_have_text(
        "1 checkpoint waits for a decision.", timeout=15_000
    )


# Counts the htmx swaps that have settled (once fieldops.js's handlers have run).
COUNT_SETTLES = """() => { window.settled = 0; document.addEventListener(
    'htmx:afterSettle', () => setTimeout(() => { window.settled += 1; }, 50)); }"""


def test_the_approval_queue_refresh_keeps_the_keyboard_focus_where_it_was(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/")
    page.evaluate(COUNT_SETTLES)
    link = page.locator("#queue a").first
    href = link.get_attribute("href")
    link.focus()
    # The queue refreshes every 5 seconds, replaced whole.
    page.wait_for_function("() => window.settled > 0", timeout=15_000)
    assert page.evaluate("() => document.activeElement.getAttribute('href')") == href
    # Enter still opens what the user was on.
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}{href}")


def test_a_run_page_refresh_keeps_the_focus_on_the_timeline_link(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    page.evaluate(COUNT_SETTLES)
    link = page.locator("#run-live table a[href*='/evidence/']").first
    href = link.get_attribute("href")
    link.focus()
    approve(waiting, approver)
    expect(page.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    page.wait_for_function("() => window.settled > 0")
    assert page.evaluate("() => document.activeElement.getAttribute('href')") == href


def test_a_decision_refused_for_its_reason_marks_the_reason_and_takes_the_focus_there(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{waiting.waiting_checkpoint}/")
    page.get_by_label("Reason (required, recorded with your decision)").fill("   ")
    page.get_by_role("button", name="Approve exactly this proposal").click()
    page.wait_for_load_state()
    reason = page.get_by_label("Reason (required, recorded with your decision)")
    assert reason.get_attribute("aria-invalid") == "true"
    assert "needs a reason" in described_by(reason)
    assert focused_id(page) == "decision-reason"
    assert axe_violations(page) == []


# The console's pages per role (README's console table), with a waiting and an ended run,
# an empty state (another tenant), the error pages and the login page. Every page must be
# free of serious and critical axe findings; there is no allow-list.
PAGES = {
    "operator": [
        "/",
        "/runs/{waiting}/",
        "/runs/{completed}/",
        "/runs/{completed}/audit/",
        "/runs/{completed}/replay/decision/",
        "/recovery/",
        "/runbooks/",
        "/runbooks/ledger-outage/",
        "/faultlab/",
        "/packet/",
        "/operations/",
        "/operations/cancel/?state=WAITING_HUMAN",
        "/api/tokens/",
        "/approvals/",
        "/no-such-page/",
    ],
    "approver": [
        "/approvals/",
        "/approvals/{checkpoint}/",
        "/approvals/history/",
        "/approvals/deliveries/",
        "/runs/{waiting}/",
        "/recovery/",
    ],
    "catalog-admin": [
        "/catalog/",
        "/catalog/reserve_part/1.0.0/",
        "/catalog/import/",
        "/catalog/servers/",
        "/catalog/diff/",
        "/catalog/rejections/",
        "/catalog/routing/",
    ],
    "approver-south": ["/", "/approvals/", "/approvals/history/", "/recovery/", "/runbooks/"],
}


@pytest.mark.parametrize("role", list(PAGES))
def test_every_page_of_a_role_has_no_serious_or_critical_axe_finding(
    live_server: Any,
    new_page: Any,
    approver: Any,
    operator: Any,
    catalog_admin: Any,
    outsider: Any,
    waiting: Run,
    role: str,
) -> None:
    completed = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(completed, approver)
    names = {
        "waiting": waiting.pk,
        "completed": completed.pk,
        "checkpoint": waiting.waiting_checkpoint,
    }
    page = new_page()
    login(page, live_server.url, role)
    found = []
    for path in PAGES[role]:
        page.goto(live_server.url + path.format(**names))
        found += axe_violations(page)
    if role == "operator":
        page.goto(f"{live_server.url}/runs/{completed.pk}/")
        page.locator("#run-live a[href*='/evidence/']").first.click()
        found += axe_violations(page)
    assert found == []


def serve(status: int, body: str) -> Any:
    """A Playwright route handler answering with ``status`` and the HTML ``body``."""
    return lambda route: route.fulfill(status=status, content_type="text/html", body=body)


def test_the_login_and_error_pages_have_no_serious_or_critical_axe_finding(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    page = new_page()
    page.goto(f"{live_server.url}/login/")
    found = axe_violations(page)
    page.goto(f"{live_server.url}/no-such-page/")
    found += axe_violations(page)
    login(page, live_server.url, "approver")
    assert page.goto(f"{live_server.url}/recovery/").status == 403
    found += axe_violations(page)
    assert page.goto(f"{live_server.url}/runs/start/").status == 405  # a POST-only address
    expect(page.get_by_role("heading", name="405 · Method not allowed")).to_be_visible()
    found += axe_violations(page)
    # A form body the server cannot read (the 400 page), the 500 page and the database's
    # 503 page, shown as served.
    unreadable = page.request.post(
        f"{live_server.url}/runs/start/",
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=latin-1"},
        data="scenario=x",
    )
    assert unreadable.status == 400
    for status, body in (
        (400, unreadable.text()),
        (500, loader.render_to_string("500.html")),
        (503, loader.render_to_string("503.html")),
    ):
        page.route(f"{live_server.url}/error-{status}/", serve(status, body))
        page.goto(f"{live_server.url}/error-{status}/")
        found += axe_violations(page)
    assert found == []


def test_a_refused_confirmation_count_marks_the_count_and_takes_the_focus_there(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/operations/cancel/?state=WAITING_HUMAN")
    page.locator("#op-reason").fill("incident 7")
    page.locator("#op-confirm").fill("99")
    page.locator("#start-operation button[type=submit]").click()
    page.wait_for_load_state()
    confirm = page.locator("#op-confirm")
    assert confirm.get_attribute("aria-invalid") == "true"
    assert described_by(confirm).strip() != ""
    assert "<missing" not in described_by(confirm)
    assert page.locator("#op-reason").get_attribute("aria-invalid") != "true"
    assert focused_id(page) == "op-confirm"
    assert axe_violations(page) == []


def test_a_refusal_without_a_field_takes_the_focus_so_it_is_read(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    from catalog.models import CapabilityVersion

    version = CapabilityVersion.objects.get(capability_id="search_manual", version="1.0.0")
    url = f"{live_server.url}/catalog/versions/{version.pk}/retire/"
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(url)
    # The same admin requests it from a second page, then sends this page's (older) form:
    # the requester confirming their own request is refused for who asks, not for a field.
    other = new_page()
    login(other, live_server.url, "catalog-admin")
    other.goto(url)
    other.locator("#retire-reason").fill("1.1.0 serves new runs")
    other.locator("#retire-ack").check()
    other.locator(".retire-form button[type=submit]").click()
    expect(other.locator("#retire-pending")).to_be_visible()
    page.locator("#retire-reason").fill("confirming it myself")
    page.locator("#retire-ack").check()
    page.locator(".retire-form button[type=submit]").click()
    page.wait_for_load_state()
    refusal = page.locator('main .refusal[role="alert"]')
    expect(refusal).to_contain_text("two_person_rule")
    expect(refusal).to_be_visible()
    assert refusal.evaluate("el => el === document.activeElement")

    # The token limit is a refusal of no field (a refused name marks the name field:
    # tests/browser/test_api_tokens.py).
    from api.tokens import MAX_ACTIVE_TOKENS, token_create

    for i in range(MAX_ACTIVE_TOKENS):
        token_create(user=catalog_admin, name=f"t{i}")
    page.goto(f"{live_server.url}/api/tokens/")
    page.get_by_label("Name (what integration uses it)").fill("one too many")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_load_state()
    refusal = page.locator('main .refusal[role="alert"]')
    expect(refusal).to_be_visible()
    assert refusal.evaluate("el => el === document.activeElement")


def test_a_refused_tool_list_import_takes_the_focus_so_it_is_read(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/import/")
    page.locator("#server").fill("mcp://manuals.example.invalid")
    page.locator("#tool_list").fill("{ this is not JSON")
    page.locator("#import-form button[type=submit]").click()
    page.wait_for_load_state()
    refusal = page.locator("#import-errors")
    expect(refusal).to_be_visible()
    assert refusal.evaluate("el => el === document.activeElement")


def test_a_reconcile_button_is_named_by_the_words_it_shows(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """WCAG 2.5.3 (label in name): someone who says or searches for the text on the button,
    "Reconcile with ledger", finds it; its name adds which attempt it reconciles."""
    from sim import faultlab

    faultlab.run_fixture(faultlab.BY_NAME["ledger_outage"])
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/recovery/")
    attempt = page.locator("main form input[name=attempt_id]").input_value()
    button = page.get_by_role("button", name=f"Reconcile with ledger: attempt {attempt}")
    expect(button).to_have_count(1)
    expect(button).to_have_text("Reconcile with ledger")


def tab_to(page: Any, control: Any, most: int = 60) -> None:
    """Press Tab until ``control`` has the focus, as a keyboard user reaches it."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if control.evaluate("el => el === document.activeElement"):
            return
    pytest.fail(f"Tab never reached {control}")


def test_a_keyboard_user_who_cancels_a_run_hears_the_outcome(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    """Tab to the reason, type, Tab to "Cancel run", Enter: the page that follows shows
    "Run cancelled: ..." in a status list that was already there when the page loaded,
    which screen readers do not read (a live region speaks when it changes). The page's
    one live region now says it once the page has loaded."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    tab_to(page, page.get_by_label("Cancellation reason (required)"))
    page.keyboard.type("Technician on site already.")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Cancel run"
    page.keyboard.press("Enter")
    expect(page.locator("#live-state")).to_have_text("CANCELLED")
    expect(page.locator(".messages")).to_contain_text("Run cancelled: cancelled_no_dispatch")
    expect(page.locator("#live-announcer")).to_have_text(
        "Run cancelled: cancelled_no_dispatch.", timeout=3_000
    )
