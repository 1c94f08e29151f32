"""Through a real browser: an admin imports a tool list, sees the candidates with their
untrusted hints and rejects one; a second admin admits another with an admission record."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from catalog.models import CapabilityVersion, LifecycleDecision
from tests.browser_support import SCREENSHOTS, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


TOOL_LIST = {
    "tools": [
        {
            "name": "search_manual",
            "title": "Manual search",
            "description": "Search equipment manuals; returns up to ten passages with relevance.",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "family": {"type": "string"}},
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        },
        {
            "name": "inventory_admin",
            "description": "Read, reserve, adjust or transfer any stock.",
            "inputSchema": {"type": "object", "properties": {"op": {"type": "string"}}},
            "annotations": {"readOnlyHint": False, "destructiveHint": True},
        },
    ]
}


def signed_in(chromium: Any, base: str, username: str, violations: list[str]) -> Any:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = watch_csp(context.new_page(), violations)
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"pw-{username}")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/$"))
    return page


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"catalog-{name}.png"), full_page=True)


def test_import_reject_one_and_admit_another_with_an_admission_record(
    live_server: Any,
    browser: Any,
    catalog_admin: Any,
    catalog_reviewer: Any,
    csp_violations: list[str],
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    admin = signed_in(browser, base, "catalog-admin", csp_violations)
    admin.get_by_role("link", name="Catalog", exact=True).click()
    expect(admin.get_by_role("heading", name="Capability catalog")).to_be_visible()
    admin.get_by_role("link", name="Import a tool list").click()
    admin.get_by_label("Server the list came from").fill("mcp://manuals.example.invalid")
    admin.get_by_label("Tool list JSON").fill(json.dumps(TOOL_LIST, indent=2))
    admin.get_by_role("button", name="Import as candidates").click()

    result = admin.locator("#import-result")
    expect(result).to_contain_text("2 new candidate(s)")
    expect(result).to_contain_text("untrusted hints: readOnlyHint=true")
    expect(result).to_contain_text("previously rejected name")
    shot(admin, "import-result")

    # The candidate page marks the hints untrusted; the rejection log already knows the name.
    admin.locator("#import-result").get_by_role("link", name="inventory_admin").click()
    expect(admin.get_by_role("heading", name=re.compile("Untrusted hints"))).to_be_visible()
    expect(admin.locator('tr[data-hint="destructiveHint"]')).to_contain_text("(unverified)")
    expect(admin.get_by_text("Previously rejected name.")).to_be_visible()
    admin.get_by_label("Reason to reject").fill(
        "Mixes read, reservation, adjustment and transfer; the rejection log stands."
    )
    admin.get_by_role("button", name="Reject").click()
    expect(admin.locator("h1 .badge")).to_have_text("REJECTED")
    shot(admin, "candidate-rejected")

    # The importer may not admit the other candidate: two people are required.
    candidate = CapabilityVersion.objects.get(capability_id="search_manual", source="discovered")
    admin.goto(f"{base}/catalog/candidates/{candidate.pk}/")
    expect(admin.get_by_text("two-person rule")).to_be_visible()

    reviewer = signed_in(browser, base, "catalog-reviewer", csp_violations)
    reviewer.goto(f"{base}/catalog/?source=discovered")
    reviewer.locator("#catalog-table").get_by_role("link", name="search_manual").click()
    expect(reviewer.locator('tr[data-hint="readOnlyHint"]')).to_contain_text("true (unverified)")
    expect(reviewer.get_by_text("no contradiction").first).to_be_visible()
    reviewer.get_by_text("Admit", exact=True).click()
    reviewer.get_by_label("Local reviewed contract this tool maps to").select_option(
        "search_manual@1.1.0"
    )
    reviewer.get_by_label("Task transition served").fill(
        "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE"
    )
    reviewer.get_by_label("Alternatives considered (one per line)").fill(
        "keep search_manual 1.0.0 (three passages)\nhuman lookup in the manual"
    )
    reviewer.get_by_label("Expiry / invalidation rule").fill(
        "expires when the remote definition or the local contract digest changes"
    )
    reviewer.get_by_label("Reason", exact=True).fill(
        "Mapped to the reviewed search_manual 1.1.0; the hint is not evidence."
    )
    reviewer.get_by_role("button", name="Admit with this record").click()
    expect(reviewer.locator(".messages")).to_contain_text("admitted with an admission record")
    expect(reviewer.locator("h1 .badge")).to_have_text("ADMITTED")
    record = reviewer.locator(".admission").first
    expect(record).to_contain_text("NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE")
    expect(record).to_contain_text("read_only_observation")
    expect(record).to_contain_text("(local classification)")
    shot(reviewer, "candidate-admitted")

    candidate.refresh_from_db()
    assert candidate.lifecycle == "ADMITTED"
    assert candidate.local_contract_ref == "search_manual@1.1.0"
    admission = LifecycleDecision.objects.get(version=candidate, action="admit")
    assert admission.reviewer == catalog_reviewer
    assert admission.admission["alternatives"] == [
        "keep search_manual 1.0.0 (three passages)",
        "human lookup in the manual",
    ]
    rejected = CapabilityVersion.objects.get(capability_id="inventory_admin")
    assert rejected.lifecycle == "REJECTED"
    assert rejected.decisions.get(action="reject").reviewer == catalog_admin

    # The rejection log page shows the console rejection with its reason.
    reviewer.goto(f"{base}/catalog/rejections/")
    expect(reviewer.get_by_text("the rejection log stands")).to_be_visible()


def test_the_routing_report_and_the_version_diff_in_a_browser(
    live_server: Any, browser: Any, approver: Any, csp_violations: list[str]
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    page = signed_in(browser, base, "approver", csp_violations)
    page.goto(f"{base}/catalog/routing/")
    expect(page.locator("svg.funnel")).to_have_count(4)
    expect(page.locator("#routing-report")).to_contain_text("Comparison at k=3")
    shot(page, "routing-report")
    # Changing k swaps the report in place (HTMX), without a full page load.
    page.evaluate("window.__marker = 'same page'")
    page.get_by_label(re.compile("Retrieval budget k")).select_option("1")
    expect(page.locator("#routing-report")).to_contain_text("Comparison at k=1")
    assert page.evaluate("window.__marker") == "same page"
    bars = page.locator("#eval-double-confusable g.stage-retrieval")
    assert int(bars.get_attribute("data-count")) < 36

    page.goto(f"{base}/catalog/diff/?a=reserve_part@1.0.0&b=reserve_part@2.0.0")
    expect(page.locator(".diff-summary")).to_contain_text("new approvals required")
    expect(page.locator('tr.change[data-class="added_effect_field"]').first).to_be_visible()
    # "show only changed lines" (static/fieldops.js: no inline handler under the CSP).
    table = page.locator("#sbs")
    expect(table).to_have_class(re.compile(r"\bonly-changed\b"))
    unchanged = page.locator("#sbs tr.sbs-same").first
    expect(unchanged).to_be_hidden()
    page.get_by_label("show only changed lines").uncheck()
    expect(table).not_to_have_class(re.compile(r"\bonly-changed\b"))
    expect(unchanged).to_be_visible()
    shot(page, "diff-reserve-part-v2")
