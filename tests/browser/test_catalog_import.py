"""The catalog import through a real browser: its result page reloads without importing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from catalog.models import CapabilityVersion, LifecycleDecision, ToolListImport, ToolSighting
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOOL_LIST = {
    "tools": [
        {
            "name": "reload_lookup",
            "description": "Looks a part up (remote).",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
    ]
}


def _written() -> tuple[int, int, int]:
    return (
        LifecycleDecision.objects.count(),
        ToolSighting.objects.count(),
        ToolListImport.objects.count(),
    )


def test_reloading_an_import_result_imports_nothing_again(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """The result was the answer to the post: a reload sent the list again, and the page
    then said the tool just imported was "unchanged" (sighted, its sighting written again).
    Now the post is answered by a redirect to the stored import, which reloads as is."""
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/import/")
    page.get_by_label("Server the list came from").fill("mcp://reload.example.invalid")
    page.get_by_label("Tool list JSON").fill(json.dumps(TOOL_LIST))
    page.get_by_role("button", name="Import as candidates").click()
    page.wait_for_url(re.compile(r"/catalog/imports/\d+/$"))
    result = page.locator("#import-result")
    expect(result).to_contain_text("Imported from mcp://reload.example.invalid")
    expect(result).to_contain_text("1 new candidate(s)")
    written = _written()
    assert written[2] == 1
    posts: list[str] = []
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )

    page.reload()
    page.go_back()
    page.go_forward()
    expect(result).to_contain_text("1 new candidate(s)")
    expect(result).not_to_contain_text("unchanged")
    assert posts == []
    assert _written() == written
    candidate = CapabilityVersion.objects.get(capability_id="reload_lookup")
    assert candidate.sightings.count() == 1
    result.get_by_role("link", name="reload_lookup").click()
    page.wait_for_url(re.compile(rf"/catalog/candidates/{candidate.pk}/$"))


def test_a_long_server_name_does_not_widen_the_result_page_on_a_phone(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """The result's heading "Imported from <server>" did not wrap a long server address
    (up to 200 characters, no spaces): at 375 px the page scrolled sideways to 1900 px."""
    server = "mcp://" + "x" * 150 + ".example.invalid"
    page = new_page()
    page.set_viewport_size({"width": 375, "height": 800})
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/import/")
    page.get_by_label("Server the list came from").fill(server)
    page.get_by_label("Tool list JSON").fill(json.dumps(TOOL_LIST))
    page.get_by_role("button", name="Import as candidates").click()
    page.wait_for_url(re.compile(r"/catalog/imports/\d+/$"))
    expect(page.locator("#import-result")).to_contain_text(f"Imported from {server}")
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], widths


def test_after_an_import_the_keyboard_starts_at_the_result(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    # After the import's redirect to its result, focus stayed at the top of the page: a
    # keyboard or screen-reader user went through the menu again to reach what happened.
    # Focus now starts at the result's heading (as it starts at a refusal after a refused
    # post), and the next Tab reaches the first candidate imported.
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/import/")
    page.get_by_label("Server the list came from").fill("mcp://focus.example.invalid")
    page.get_by_label("Tool list JSON").fill(json.dumps(TOOL_LIST))
    page.get_by_role("button", name="Import as candidates").click()
    page.wait_for_url(re.compile(r"/catalog/imports/\d+/$"))
    heading = page.locator("#result-h")
    expect(heading).to_be_focused()
    expect(heading).to_contain_text("Imported from mcp://focus.example.invalid")
    page.keyboard.press("Tab")
    expect(page.locator("#import-result").get_by_role("link", name="reload_lookup")).to_be_focused()
