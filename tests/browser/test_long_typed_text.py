"""Text people type, shown in a table cell, at desktop width (1280 px): one long word (a
token name like ``FIELDOPS_NORTH_DEPOT_NIGHTLY_...`` or a reason that is a link to a
ticket) made its column as wide as the word, so the table scrolled sideways even on a
desktop and pushed the columns after it (a token's status and its Revoke button, a
decision's requested change and whether it was consumed) out of view. So did a tool name
a server chose (a discovered candidate in the catalog's list of versions). Such a cell wraps
its word instead; the table fits its box."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from api.tokens import token_create
from catalog import services as catalog_services
from tests.browser_support import login
from tests.helpers import approve, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# 80 characters, the longest name a token may have, without a space (named like the
# environment variable the integration reads it from).
LONG_NAME = "FIELDOPS_NORTH_DEPOT_NIGHTLY_INVENTORY_RECONCILIATION_EXPORT_TOKEN_FOR_CI_RUNNER"
TICKET = "https://tickets.example.invalid/browse/OPS-1234?focusedCommentId=998877&page=" + (
    "com.example.tickets:comment-tabpanel" * 3
)

# The table's scroll box: how much wider its table is than the box shows.
OVERFLOW = "box => box.scrollWidth - box.clientWidth"


def test_a_long_token_name_leaves_the_revoke_button_in_view(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    assert len(LONG_NAME) == 80
    token_create(user=approver, name=LONG_NAME)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/api/tokens/")
    box = page.locator(".table-scroll", has_text=LONG_NAME)
    assert box.evaluate(OVERFLOW) <= 1
    expect(page.get_by_role("link", name=f"Revoke {LONG_NAME}…")).to_be_in_viewport()


def test_a_reason_that_is_a_link_leaves_the_decision_history_readable(
    live_server: Any, new_page: Any, approver: Any, operator: Any
) -> None:
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(run, approver, reason=TICKET)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/history/")
    box = page.locator(".table-scroll", has_text=TICKET)
    expect(box).to_be_visible()
    assert box.evaluate(OVERFLOW) <= 1
    expect(box.get_by_role("columnheader", name="Consumed")).to_be_in_viewport()


def test_a_long_discovered_tool_name_leaves_the_catalogs_columns_in_view(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    name = "get_" + "very_long_tool_name_" * 3
    tools = {"tools": [{"name": name, "inputSchema": {"type": "object"}}]}
    catalog_services.tool_list_import(
        text=json.dumps(tools),
        server="mcp://tools.example.invalid",
        user=catalog_admin,
        tenant="north",
    )
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/")
    box = page.locator(".table-scroll", has_text=name)
    expect(box).to_be_visible()
    assert box.evaluate(OVERFLOW) <= 1
    expect(box.get_by_role("columnheader", name="Digest")).to_be_in_viewport()
