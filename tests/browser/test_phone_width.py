"""What a phone (390 px) showed squeezed: a key/value list (``dl.kv``) whose keys' column took
what its longest key wanted ("Description" with its "untrusted text" badge), leaving a
candidate's name, version and description a column a word wide; and the runbook steps'
tables, whose cells broke every word into letters (a step is a list item, and list items
wrap anywhere) instead of scrolling in their box."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from catalog import services as catalog_services
from catalog.models import CapabilityVersion
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
TOOLS = {
    "tools": [
        {
            "name": "get_current_time",
            "description": "Get current time in a specific timezone",
            "inputSchema": {"type": "object", "properties": {"tz": {"type": "string"}}},
        }
    ]
}


def _candidate_page_at_phone_width(live_server: Any, new_page: Any, catalog_admin: Any) -> Any:
    """A catalog admin's page of a discovered candidate (a recorded tool), on a phone."""
    catalog_services.tool_list_import(
        text=json.dumps(TOOLS),
        server="mcp://time.example.invalid",
        user=catalog_admin,
        tenant="north",
    )
    candidate = CapabilityVersion.objects.get(capability_id="get_current_time")
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/candidates/{candidate.pk}/")
    return page


# Each row's key and value widths, as rendered, in the list's own width.
ROWS = """dl => [...dl.querySelectorAll(':scope > dt')].map(dt => ({
  key: dt.textContent.trim(), list: dl.clientWidth,
  value: dt.nextElementSibling.getBoundingClientRect().width }))"""


def test_a_candidates_definition_is_readable_at_phone_width(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    page = _candidate_page_at_phone_width(live_server, new_page, catalog_admin)
    definition = page.locator("dl.kv", has_text="Candidate version").first
    rows = definition.evaluate(ROWS)
    assert rows
    for row in rows:
        assert row["value"] >= 0.5 * row["list"], row


# The lines each one-word cell of a table is rendered on: the distinct tops of its text's
# line boxes (a text node's Range has one client rect a line).
ONE_WORD_CELL_LINES = """table => [...table.querySelectorAll('th, td')]
  .filter(cell => cell.textContent.trim() && !/\\s/.test(cell.textContent.trim()))
  .map(cell => {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    const tops = new Set();
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange(); range.selectNodeContents(node);
      for (const rect of range.getClientRects()) if (rect.width) tops.add(Math.round(rect.top));
    }
    return {text: cell.textContent.trim(), lines: tops.size}; })"""


def test_a_runbook_steps_table_scrolls_in_its_box_rather_than_breaking_words(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runbooks/ledger-outage/")
    gates = page.locator("#step-2 table")
    cells = gates.evaluate(ONE_WORD_CELL_LINES)
    assert any(cell["text"].startswith("reserve_part@") for cell in cells)
    assert [cell for cell in cells if cell["lines"] > 1] == []
    # The box scrolls; the page does not.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


# The placeholders wider than their field (a placeholder is cut off, never wrapped).
CLIPPED_PLACEHOLDERS = """() => [...document.querySelectorAll('input[placeholder]')]
  .filter(el => el.offsetParent !== null)
  .filter(el => { const c = document.createElement('canvas').getContext('2d');
    c.font = getComputedStyle(el).font;
    const s = getComputedStyle(el);
    const room = el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    return c.measureText(el.placeholder).width > room; })
  .map(el => el.id + ': ' + el.placeholder)"""


def test_the_admission_forms_examples_are_read_whole_at_phone_width(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    page = _candidate_page_at_phone_width(live_server, new_page, catalog_admin)
    page.locator("#admit-form").locator("xpath=ancestor::details").locator("summary").click()
    for label, example in (
        ("Task transition served", "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE"),
        ("Expiry / invalidation rule", "expires on contract change (digest) or owner change"),
    ):
        field = page.get_by_label(label, exact=True)
        hint = page.locator(f"#{field.get_attribute('aria-describedby')}")
        expect(hint).to_be_visible()
        expect(hint).to_contain_text(example)
    assert page.evaluate(CLIPPED_PLACEHOLDERS) == []


# Each select of a form: its box, the form's box, and for its longest option the width a
# copy of the select sized to that option (``field-sizing: content``: its text, padding
# and dropdown arrow) takes, next to the select's own width.
SELECT_FIT = """form => {
  const box = form.getBoundingClientRect();
  return [...form.querySelectorAll('select')].map(select => {
    const copy = select.cloneNode(true);
    copy.removeAttribute('id');
    copy.style.fieldSizing = 'content';
    copy.style.width = 'auto';
    select.after(copy);
    let needs = 0, text = '';
    for (let i = 0; i < copy.options.length; i++) {
      copy.selectedIndex = i;
      const width = copy.getBoundingClientRect().width;
      if (width > needs) { needs = width; text = copy.options[i].text; }
    }
    copy.remove();
    const rect = select.getBoundingClientRect();
    return {id: select.id, text, needs, has: rect.width, right: rect.right, formRight: box.right};
  });
}"""


def test_the_run_start_forms_selects_show_their_text_at_phone_width(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """At 390 px the start form's selects cut their chosen option off mid-word (a closed
    select shows one line): the scenario's ("reservation — " and a 213-character
    description) at any width, the equipment's ("EQ-17 (pump-fixture r7, North plant,")
    by a few characters."""
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    page.locator("#start-run > summary").click()
    form = page.locator("#start-run form")
    expect(form).to_be_visible()
    selects = form.evaluate(SELECT_FIT)
    assert {s["id"] for s in selects} >= {"id_scenario", "id_equipment_id", "id_location_id"}
    for select in selects:
        assert select["right"] <= select["formRight"] + 0.5, select
        assert select["needs"] <= select["has"], select
