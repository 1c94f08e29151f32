"""At phone width a key/value list (``dl.kv``) leaves its values room to be read: the keys'
column took what its longest key wanted ("Description" with its "untrusted text" badge), and
a candidate's name, version and description were squeezed into a column a word wide."""

from __future__ import annotations

import json
from typing import Any

import pytest

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

# Each row's key and value widths, as rendered, in the list's own width.
ROWS = """dl => [...dl.querySelectorAll(':scope > dt')].map(dt => ({
  key: dt.textContent.trim(), list: dl.clientWidth,
  value: dt.nextElementSibling.getBoundingClientRect().width }))"""


def test_a_candidates_definition_is_readable_at_phone_width(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
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
    definition = page.locator("dl.kv", has_text="Candidate version").first
    rows = definition.evaluate(ROWS)
    assert rows
    for row in rows:
        assert row["value"] >= 0.5 * row["list"], row
