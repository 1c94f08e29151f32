"""Through a real browser: an admin registers a live MCP server and discovers it, sees the
candidates with their untrusted hints; a second admin admits one mapping; the server
changes; re-discovery pauses the mapping, raises the drift and shows the side-by-side diff.
The server is the SDK test server ``mcp_servers/changing.py``, started over stdio by the
live console itself."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from catalog.models import CapabilityVersion, Lifecycle, ToolDrift
from tests.catalog.conftest import ChangingServer
from tests.catalog.test_browser import shot, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_register_discover_see_untrusted_hints_rediscover_after_a_change_see_the_diff(
    live_server: Any,
    browser: Any,
    catalog_admin: Any,
    catalog_reviewer: Any,
    stdio_commands: list[str],
    changing_server: ChangingServer,
    csp_violations: list[str],
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    admin = signed_in(browser, base, "catalog-admin", csp_violations)
    admin.get_by_role("link", name="Catalog", exact=True).click()
    admin.locator(".subnav").get_by_role("link", name="Tool servers").click()
    admin.get_by_label("Name").fill("parts")
    admin.get_by_label("stdio (a command on this host)").check()
    admin.get_by_label("Command (stdio)").fill(sys.executable)
    admin.get_by_label("Arguments (stdio; split like a shell, never run by one)").fill(
        changing_server.args
    )
    admin.get_by_role("button", name="Register server").click()
    expect(admin.get_by_role("heading", name=re.compile("Tool server parts"))).to_be_visible()
    shot(admin, "server-registered")

    admin.get_by_role("button", name="Discover now").click()
    result = admin.locator("#discovery-result")
    expect(result).to_contain_text("3 new")
    expect(result).to_contain_text("readOnlyHint=true")
    expect(result).to_contain_text("openWorldHint=false")
    expect(admin.get_by_text("fieldops-test-parts").first).to_be_attached()
    shot(admin, "discovery-result")

    result.get_by_role("link", name="lookup_part").click()
    expect(admin.get_by_role("heading", name=re.compile("Untrusted hints"))).to_be_visible()
    expect(admin.locator('tr[data-hint="readOnlyHint"]')).to_contain_text("true (unverified)")
    expect(admin.locator('tr.sighting[data-server="parts"]')).to_contain_text("fieldops-test-parts")
    first = CapabilityVersion.objects.get(capability_id="lookup_part")

    # A second catalog admin maps the candidate to a reviewed local contract.
    reviewer = signed_in(browser, base, "catalog-reviewer", csp_violations)
    reviewer.goto(f"{base}/catalog/candidates/{first.pk}/")
    reviewer.get_by_text("Admit", exact=True).click()
    reviewer.get_by_label("Local reviewed contract this tool maps to").select_option(
        "read_equipment@1.0.0"
    )
    reviewer.get_by_label("Task transition served").fill(
        "NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE"
    )
    reviewer.get_by_label("Alternatives considered (one per line)").fill("human lookup")
    reviewer.get_by_label("Expiry / invalidation rule").fill("expires on a definition change")
    reviewer.get_by_label("Reason", exact=True).fill("Matches the reviewed read contract.")
    reviewer.get_by_role("button", name="Admit with this record").click()
    expect(reviewer.locator("h1 .badge")).to_have_text("ADMITTED")

    # The server changes; the admin re-discovers from the catalog page.
    changing_server.set(description="Look up any part, with live supplier prices.", legacy=False)
    admin.goto(f"{base}/catalog/")
    admin.get_by_role("button", name="Discover now: parts").click()
    result = admin.locator("#discovery-result")
    expect(result).to_contain_text("1 changed")
    expect(result).to_contain_text("1 gone")
    expect(result.locator(".warn-box")).to_contain_text("Admitted mapping(s) paused")
    shot(admin, "rediscovery-drift")

    admin.goto(f"{base}/catalog/")
    drift = admin.locator("#catalog-drift")
    expect(drift).to_contain_text("admitted mapping paused")
    expect(drift).to_contain_text("no longer listed")
    drift.get_by_role("link", name="side-by-side diff").click()
    expect(admin.get_by_role("heading", name="Side by side")).to_be_visible()
    description = admin.locator("#sbs tr.sbs-changed", has_text="description")
    expect(description).to_contain_text("Look up one spare part by id.")
    expect(description).to_contain_text("Look up any part, with live supplier prices.")
    expect(admin.get_by_text("discovered definition: no reviewed semantics")).to_be_visible()
    shot(admin, "drift-diff")

    first.refresh_from_db()
    assert first.lifecycle == Lifecycle.DEPRECATED
    changed = ToolDrift.objects.get(kind="changed")
    assert changed.paused == [first.ref]
    assert changed.after is not None and changed.after.lifecycle == Lifecycle.DISCOVERED


def test_a_server_that_needs_a_key_is_registered_with_the_keyboard_alone(
    live_server: Any,
    browser: Any,
    catalog_admin: Any,
    stdio_commands: list[str],
    csp_violations: list[str],
    monkeypatch: Any,
) -> None:
    """Keyboard only: the environment entries field is reached with Tab, a hostile name is
    refused beside it (the focus returns there, the message is its description), the fixed
    entry registers the server, and Discover now lists the tools of a server that exits
    without its key (``mcp_servers/keyed.py``); the key is on no page."""
    from playwright.sync_api import expect

    from tests.catalog.conftest import server_script

    key = "keyboard-test-key-5e1d2c3b"
    monkeypatch.setenv("FIELDOPS_MCP_ENV_EXAMPLE", key)
    base = live_server.url
    admin = signed_in(browser, base, "catalog-admin", csp_violations)
    admin.goto(f"{base}/catalog/servers/")
    admin.locator("#s-name").focus()
    admin.keyboard.type("keyed")
    admin.keyboard.press("Tab")  # the transport's radio group (stdio is checked)
    expect(admin.locator("#t-stdio")).to_be_focused()
    admin.keyboard.press("Tab")
    expect(admin.locator("#s-command")).to_be_focused()
    admin.keyboard.type(sys.executable)
    admin.keyboard.press("Tab")
    admin.keyboard.type(server_script("keyed"))
    admin.keyboard.press("Tab")
    expect(admin.locator("#s-env")).to_be_focused()
    admin.keyboard.type("LD_PRELOAD=env:FIELDOPS_MCP_ENV_EXAMPLE")
    admin.locator("#server-form button[type=submit]").focus()
    admin.keyboard.press("Enter")
    env = admin.locator("#s-env")
    expect(env).to_be_focused()
    expect(env).to_have_attribute("aria-invalid", "true")
    expect(env).to_have_accessible_description(re.compile(r"Refused \(env_name_forbidden\)"))
    shot(admin, "server-env-refused")
    admin.keyboard.press("Control+A")
    admin.keyboard.type("EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_EXAMPLE")
    admin.locator("#server-form button[type=submit]").focus()
    admin.keyboard.press("Enter")
    expect(admin.get_by_role("heading", name=re.compile("Tool server keyed"))).to_be_visible()
    expect(admin.locator(".page-head")).to_contain_text(
        "EXAMPLE_API_KEY=env:FIELDOPS_MCP_ENV_EXAMPLE"
    )
    admin.get_by_role("button", name="Discover now").focus()
    admin.keyboard.press("Enter")
    expect(admin.locator("#discovery-result")).to_contain_text("1 new", timeout=30_000)
    for url in ("/catalog/servers/", "/catalog/"):
        admin.goto(f"{base}{url}")
        assert key not in admin.content()
