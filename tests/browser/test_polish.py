"""The console polish of issue 20, seen in Chromium: the state diagram's labels as
rendered, the effects gauge's colour, the ledger lookup box, the skip link to the
decision form, the live world by default, the project's error pages, static files and
favicon, all under the Content-Security-Policy (the suite fails on any violation)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from fieldops.csp import POLICY
from runs.models import Run
from tests.browser_support import SCREENSHOTS, login, screenshot
from tests.helpers import approve, make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The rendered boxes of every label and state, in the SVG's own units.
MEASURE = """
svg => {
  const box = el => { const b = el.getBBox(); return [b.x, b.y, b.width, b.height]; };
  return {
    view: svg.viewBox.baseVal ? [svg.viewBox.baseVal.width, svg.viewBox.baseVal.height] : null,
    labels: [...svg.querySelectorAll('text.edge-label')].map(t => ({
      text: t.textContent, glyphs: box(t), rect: box(t.previousElementSibling) })),
    states: [...svg.querySelectorAll('g.state rect')].map(box),
  };
}
"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def within(inner: list[float], outer: list[float], slack: float = 0.5) -> bool:
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[0] + inner[2] <= outer[0] + outer[2] + slack
        and inner[1] + inner[3] <= outer[1] + outer[3] + slack
    )


@pytest.fixture
def waiting(operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_the_state_diagram_labels_as_rendered_never_overlap(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    svg = page.locator("svg.state-diagram")
    expect(svg).to_be_visible()
    found = svg.evaluate(MEASURE)
    width, height = found["view"]
    labels = found["labels"]
    assert len(labels) > 20
    for label in labels:
        # The glyphs Chromium drew fit the box the layout reserved for them...
        assert within(label["glyphs"], label["rect"]), label
        # ...which lies inside the view box, off every state box.
        x, y, w, h = label["rect"]
        assert x >= 0 and y >= 0 and x + w <= width and y + h <= height, label
        assert not any(overlap(label["glyphs"], state) for state in found["states"]), label
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert not overlap(a["glyphs"], b["glyphs"]), (a["text"], b["text"])
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    svg.screenshot(path=str(SCREENSHOTS / "state-diagram.png"))


def test_a_successful_runs_effects_gauge_is_green_not_an_alarm(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    approve(waiting, approver)
    assert waiting.state == "COMPLETED"
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    effects = page.locator('.gauge[aria-label="effects used"]')
    expect(effects).to_have_attribute("aria-valuetext", "1 of 1: the run's effect happened")
    fill = effects.locator("rect").evaluate("r => getComputedStyle(r).fill")
    assert fill == "rgb(26, 127, 55)"  # --ok, not --bad (rgb(207, 34, 46))
    fills = page.locator(".gauge rect").evaluate_all("rs => rs.map(r => getComputedStyle(r).fill)")
    assert "rgb(207, 34, 46)" not in fills
    width = effects.locator("rect").get_attribute("width")
    assert width == "100"
    page.locator("#budgets-h").scroll_into_view_if_needed()
    screenshot(page, "run-completed-gauges")


def test_the_ledger_lookup_box_shows_a_whole_64_character_key(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/recovery/")
    key = "9f" * 32
    box = page.get_by_label("Idempotency key, attempt id or effect id")
    box.fill(key)
    assert box.input_value() == key
    # Nothing scrolls out of sight: the whole key is visible at once.
    assert box.evaluate("el => el.scrollWidth <= el.clientWidth")
    screenshot(page, "recovery-ledger-lookup")


def test_the_decision_form_is_three_tabs_from_the_top_and_a_landmark(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    focused = "document.activeElement"
    page.keyboard.press("Tab")
    assert page.evaluate(f"{focused}.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    assert page.evaluate(f"{focused}.textContent") == "Skip to your decision"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate(f"{focused}.id") == "decision-reason"  # three Tabs and an Enter
    expect(page.get_by_role("form", name="Your decision")).to_be_visible()
    expect(page.get_by_role("main")).to_have_count(1)
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.keyboard.type("Checked against the manual.")
    screenshot(page, "approval-decision-by-keyboard")


def test_the_runs_list_shows_the_live_world_until_another_is_chosen(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    lab = make_run("abstain")  # the fault lab's world
    page = new_page()
    login(page, live_server.url, "operator")
    table = page.locator("#run-table")
    expect(table).to_contain_text(waiting.short_id)
    expect(table).not_to_contain_text(lab.short_id)
    expect(page.get_by_label("World")).to_have_value("live")
    screenshot(page, "runs-list-live-world")
    page.get_by_label("World").select_option("faultlab")
    page.get_by_role("button", name="Apply").click()
    expect(table).to_contain_text(lab.short_id)
    expect(table).not_to_contain_text(waiting.short_id)
    expect(page).to_have_url(re.compile(r"world=faultlab"))


def test_error_pages_static_files_and_the_favicon_work_under_the_policy(
    live_server: Any, new_page: Any, outsider: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "approver-south")
    response = page.goto(f"{live_server.url}/no/such/page/")
    assert response is not None and response.status == 404
    assert response.headers["content-security-policy"] == POLICY
    expect(page.get_by_role("heading", name="404 · Not found")).to_be_visible()
    assert "URLconf" not in page.content()
    # The stylesheet applied (a static file served by whitenoise under the policy).
    background = page.locator(".card").first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background == "rgb(255, 255, 255)"
    assert page.evaluate("typeof htmx") == "object"
    screenshot(page, "not-found")
    icon = page.request.get(f"{live_server.url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/")
    svg_icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert page.request.get(f"{live_server.url}{svg_icon}").status == 200


def test_the_policy_is_enforced_and_the_suite_would_see_a_violation(
    live_server: Any, new_page: Any, csp_violations: list[str], operator: Any
) -> None:
    page = new_page()
    page.goto(f"{live_server.url}/login/")
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.__inline = 1'; document.head.appendChild(s);"
        " const st = document.createElement('div'); st.setAttribute('style', 'color: red');"
        " document.body.appendChild(st); }"
    )
    page.wait_for_timeout(200)
    assert page.evaluate("window.__inline") is None  # the inline script never ran
    seen = list(csp_violations)
    assert any("script-src" in v for v in seen), seen
    csp_violations.clear()  # seen on purpose: the watcher is not blind


def test_a_key_pasted_with_spaces_around_it_is_found_in_the_ledger(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    """A key copied with a space or line break before it (a table cell, a log line): the
    box's maxlength of 64 cut its last characters off as it was pasted, and the page said
    the ledger held no record of a key it holds. Room for the spaces; the server trims."""
    from runs.models import EffectAttempt

    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(run, approver)
    key = EffectAttempt.objects.get(run=run).idempotency_key
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/recovery/")
    box = page.get_by_label("Idempotency key, attempt id or effect id")
    box.focus()
    page.keyboard.insert_text(f"\t {key} \n")
    box.press("Enter")
    expect(page.get_by_role("heading", name="Ledger records")).to_be_visible()
    expect(page.get_by_text("The ledger holds no record")).to_have_count(0)
    expect(box).to_have_value(key)
