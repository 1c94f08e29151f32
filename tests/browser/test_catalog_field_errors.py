"""A catalog admin, by keyboard only, submits a bad value: the page comes back as typed,
the refusal sits right under the field it is about, and the focus is on that field, its
bad value selected so typing replaces it."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from catalog.models import CapabilityVersion, LifecycleDecision, ToolServer
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The message is in the field's group and its aria-describedby names it.
BESIDE = """el => {
  const message = document.getElementById(el.getAttribute('aria-describedby'));
  return !!message && el.closest('.field').contains(message) ? message.textContent : null;
}"""


def focused_id(page: Any) -> str:
    return str(page.evaluate("() => document.activeElement.id"))


def tab_to(page: Any, element_id: str, *, limit: int = 12) -> None:
    """Press Tab until ``element_id`` has the focus (a keyboard user's way there)."""
    for _ in range(limit):
        if focused_id(page) == element_id:
            return
        page.keyboard.press("Tab")
    assert focused_id(page) == element_id


def assert_refused_beside(page: Any, field_id: str, text: str) -> None:
    field = page.locator(f"#{field_id}")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-invalid", "true")
    message = field.evaluate(BESIDE)
    assert message is not None and text in message
    # Right under the field, not at the top of the page; no other refusal is shown.
    below = field.bounding_box()
    error = page.locator(f"#{field_id}-error").bounding_box()
    assert below is not None and error is not None
    assert 0 <= error["y"] - (below["y"] + below["height"]) < 40
    expect(page.locator("main .refusal")).to_have_count(0)
    serious = [
        f"{v['id']}: {v['help']}"
        for v in Axe().run(page, options={"resultTypes": ["violations"]}).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert serious == []


def test_a_bad_server_url_is_shown_by_the_url_which_keeps_the_focus(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/servers/")
    # The URL box is as wide as the other text boxes of the form (a URL is long).
    widths = page.evaluate("['s-name', 's-url'].map(id => document.getElementById(id).offsetWidth)")
    assert widths[0] == widths[1], widths
    page.locator("#s-name").focus()
    page.keyboard.type("tools")
    page.keyboard.press("Tab")  # into the transport radio group, on stdio
    page.keyboard.press("ArrowDown")  # HTTP
    expect(page.locator("#t-http")).to_be_checked()
    tab_to(page, "s-url")
    page.keyboard.type("ftp://files.example.invalid/mcp")
    page.keyboard.press("Enter")
    page.wait_for_load_state()

    assert_refused_beside(page, "s-url", "an HTTP server needs an http:// or https:// URL")
    expect(page.locator("#s-name")).to_have_value("tools")
    expect(page.locator("#t-http")).to_be_checked()
    assert not ToolServer.objects.exists()

    # The bad value is selected: typing replaces it, and the corrected form registers.
    page.keyboard.type("https://tools.example.invalid/mcp")
    expect(page.locator("#s-url")).to_have_value("https://tools.example.invalid/mcp")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Tool server tools")).to_be_visible()
    assert ToolServer.objects.get().url == "https://tools.example.invalid/mcp"


def test_a_short_expiry_rule_is_shown_by_it_and_a_bare_reason_by_its_own_form(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    target = CapabilityVersion.objects.get(capability_id="search_manual", version="1.1.0")
    before = LifecycleDecision.objects.count()
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/search_manual/1.1.0/")
    summary = page.locator("details summary", has_text="Admit")
    summary.focus()
    page.keyboard.press("Enter")  # opens the admission form
    tab_to(page, "task_transition")
    page.keyboard.type("NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE")
    page.keyboard.press("Tab")
    page.keyboard.type("keep 1.0.0")
    tab_to(page, "expiry")
    page.keyboard.type("soon")
    page.keyboard.press("Tab")
    page.keyboard.type("longer procedures need more passages")
    page.keyboard.press("Enter")
    page.wait_for_load_state()

    assert_refused_beside(page, "expiry", "state the expiry or invalidation rule")
    expect(page.locator("#task_transition")).to_have_value(
        "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE"
    )
    expect(page.locator("#alternatives")).to_have_value("keep 1.0.0")
    expect(page.locator("#admit-reason")).to_have_value("longer procedures need more passages")

    # A deferral with a blank reason: that form's own reason, not the admission's.
    page.locator("#reason-defer").focus()
    page.keyboard.type("  ")
    page.keyboard.press("Enter")
    page.wait_for_load_state()
    assert_refused_beside(page, "reason-defer", "every lifecycle decision needs a reason")
    expect(page.locator("#expiry")).not_to_have_attribute("aria-invalid", "true")
    target.refresh_from_db()
    assert target.lifecycle == "DISCOVERED"
    assert LifecycleDecision.objects.count() == before
