"""Discover now in a real browser, as on a deployment with workers: the admin is sent to
the discovery's page, which says it is running and, once a worker has recorded the outcome,
shows it without a manual reload."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from playwright.sync_api import expect

from catalog import servers
from catalog.models import Discovery
from tests.browser_support import login
from tests.catalog.conftest import ChangingServer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def test_the_discovery_page_follows_a_discovery_to_its_outcome(
    live_server: Any, new_page: Any, catalog_admin: Any, settings: Any, tmp_path: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "deferred"  # the "worker" is this test, below
    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable]
    state = ChangingServer(tmp_path / "state.json")
    server = state.register(catalog_admin, "parts")
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/servers/{server.pk}/")
    page.get_by_role("button", name="Discover now").click()
    page.wait_for_url(re.compile(r"/catalog/discoveries/\d+/$"))
    progress = page.locator("#discovery-progress")
    expect(progress.get_by_role("heading", name="Discovering…")).to_be_visible()
    expect(progress.locator("#discovery-elapsed")).to_contain_text("s so far")
    run = Discovery.objects.get(server=server)

    done = servers.discovery_continue(discovery_id=run.pk)  # what the worker does
    assert done is not None and done.ok, done.message
    expect(page.locator("#discovery-result")).to_contain_text(done.message, timeout=10_000)
    expect(page.locator("#discovery-progress")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_contain_text("ok")
