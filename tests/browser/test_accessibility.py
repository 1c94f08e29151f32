"""Accessibility as a keyboard-only and screen-reader user meets the console.

axe-core (bundled by ``axe-playwright-python``, no network) checks the rendered pages in
Chromium; the tests that follow each name one finding that was fixed.
"""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from runs.models import Run
from tests.browser_support import login
from tests.helpers import make_run

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
