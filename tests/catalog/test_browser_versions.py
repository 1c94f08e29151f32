"""Capability versions through a real browser (issue 16): one admin imports the reviewed
manual search, a second admin admits it as ``search_manual@1.1.0`` (the importer may not:
two people), the first deprecates 1.0.0 and requests its retirement on the live retire
page (a run is still pinned to it, so two admins must agree), the second confirms; an
operator starts a run, an approver approves it and the operator watches it complete on
the version it pinned: 1.1.0."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from catalog.models import CapabilityVersion, Lifecycle
from runs.models import Event, Evidence, Run
from tests.catalog.test_browser import shot, signed_in
from tests.helpers import make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOOL_LIST = {
    "tools": [
        {
            "name": "search_manual",
            "title": "Manual search",
            "description": "Search equipment manuals; returns up to ten scored passages.",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "family": {"type": "string"}},
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        }
    ]
}


def reviewed(ref: str) -> CapabilityVersion:
    capability_id, _, version = ref.rpartition("@")
    return CapabilityVersion.objects.get(
        capability_id=capability_id, version=version, source="reviewed"
    )


def test_admit_1_1_0_with_two_admins_retire_1_0_0_with_two_admins_and_a_run_completes_on_1_1_0(
    live_server: Any,
    browser: Any,
    catalog_admin: Any,
    catalog_reviewer: Any,
    operator: Any,
    approver: Any,
    csp_violations: list[str],
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    # A run created before the admission pins 1.0.0 (the only admitted version then) and
    # has not ended: retiring 1.0.0 is a two-person decision.
    pinned_old = make_run(advance=False, namespace="live", requested_by=operator)
    assert pinned_old.components["search_manual"].startswith("1.0.0#")

    # -- admission: the importer cannot admit; a second admin maps it to 1.1.0 ------------
    admin = signed_in(browser, base, "catalog-admin", csp_violations)
    admin.goto(f"{base}/catalog/import/")
    admin.get_by_label("Server the list came from").fill("mcp://manuals.example.invalid")
    admin.get_by_label("Tool list JSON").fill(json.dumps(TOOL_LIST, indent=2))
    admin.get_by_role("button", name="Import as candidates").click()
    expect(admin.locator("#import-result")).to_contain_text("1 new candidate(s)")
    candidate = CapabilityVersion.objects.get(capability_id="search_manual", source="discovered")
    admin.goto(f"{base}/catalog/candidates/{candidate.pk}/")
    expect(admin.get_by_text("two-person rule")).to_be_visible()

    reviewer = signed_in(browser, base, "catalog-reviewer", csp_violations)
    reviewer.goto(f"{base}/catalog/candidates/{candidate.pk}/")
    reviewer.get_by_text("Admit", exact=True).click()
    reviewer.get_by_label("Local reviewed contract this tool maps to").select_option(
        "search_manual@1.1.0"
    )
    reviewer.get_by_label("Task transition served").fill(
        "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE"
    )
    reviewer.get_by_label("Alternatives considered (one per line)").fill(
        "keep search_manual 1.0.0 (three passages)"
    )
    reviewer.get_by_label("Expiry / invalidation rule").fill("expires on contract change")
    reviewer.get_by_label("Reason", exact=True).fill("Ten scored passages; reviewed contract.")
    reviewer.get_by_role("button", name="Admit with this record").click()
    expect(reviewer.locator("h1 .badge")).to_have_text("ADMITTED")
    assert reviewed("search_manual@1.1.0").lifecycle == Lifecycle.ADMITTED

    reviewer.goto(f"{base}/catalog/search_manual/1.1.0/")
    expect(reviewer.locator("#dispatch-status")).to_have_attribute(
        "data-status", "new_and_pinned_runs"
    )
    shot(reviewer, "versions-1-1-0-admitted")

    # -- drain and retire 1.0.0: the first admin deprecates and requests ------------------
    admin.goto(f"{base}/catalog/search_manual/1.0.0/")
    admin.get_by_label("Reason to deprecate").fill("1.1.0 serves new runs")
    admin.get_by_role("button", name="Deprecate").click()
    expect(admin.locator("h1 .badge")).to_have_text("DEPRECATED")
    admin.get_by_role("link", name="Retire…").click()
    expect(admin.locator("#retire-successor")).to_contain_text("search_manual@1.1.0")
    expect(admin.locator("#retire-runs")).to_contain_text("1 run(s)")
    expect(admin.locator("#retire-run-list")).to_contain_text(str(pinned_old.pk))
    expect(admin.locator("#retire-risks")).to_contain_text("pinned_runs")
    admin.get_by_label("Reason", exact=True).fill("drained to 1.1.0")
    admin.locator("#retire-ack").check()
    admin.get_by_role("button", name="Request retirement").click()
    expect(admin.locator("#retire-pending")).to_contain_text("catalog-admin")
    # The requester cannot confirm their own request: told who must, offered no button.
    expect(admin.locator("#retire-own-request")).to_contain_text("another catalog admin")
    expect(admin.get_by_role("button", name="Confirm retirement")).to_have_count(0)
    shot(admin, "versions-retire-requested")
    assert reviewed("search_manual@1.0.0").lifecycle == Lifecycle.DEPRECATED

    # -- the second admin confirms ----------------------------------------------------------
    reviewer.goto(f"{base}/catalog/search_manual/1.0.0/")
    reviewer.get_by_role("link", name="Retire…").click()
    expect(reviewer.locator("#retire-pending")).to_contain_text("catalog-admin")
    # Either admin could withdraw the request instead (not done here).
    expect(reviewer.get_by_role("button", name="Withdraw retirement request")).to_be_visible()
    reviewer.get_by_label("Reason", exact=True).fill("confirmed: 1.1.0 is admitted and dispatches")
    reviewer.locator("#retire-ack").check()
    reviewer.get_by_role("button", name="Confirm retirement").click()
    expect(reviewer.locator("h1 .badge")).to_have_text("RETIRED")
    expect(reviewer.locator("#dispatch-status")).to_have_attribute("data-status", "nothing")
    shot(reviewer, "versions-1-0-0-retired")
    old = reviewed("search_manual@1.0.0")
    assert old.lifecycle == Lifecycle.RETIRED
    retirement = old.decisions.get(action="retire")
    assert retirement.details["requested_by"] == "user:catalog-admin"
    assert retirement.details["confirmed_by"] == "user:catalog-reviewer"

    # -- an operator starts a run; it pins 1.1.0 and waits for approval -------------------
    ops = signed_in(browser, base, "operator", csp_violations)
    ops.get_by_role("link", name="Runs", exact=True).click()
    start = ops.locator("#start-run")
    start.locator(":scope > summary").click()
    start.get_by_label("Scenario").select_option("reservation")
    start.get_by_label("Equipment").select_option("EQ-17")
    start.get_by_label("Location").select_option("LOC-N1")
    start.get_by_role("button", name="Start run").click()
    ops.wait_for_url(re.compile(r"/runs/[0-9a-f-]+/$"))
    run = Run.objects.exclude(pk=pinned_old.pk).get()
    expect(ops.locator("#live-state")).to_have_text("WAITING_HUMAN")
    ops.locator("#run-components summary").click()
    expect(ops.locator("#run-components")).to_contain_text(
        re.compile(r"search_manual@1\.1\.0#[0-9a-f]{16}")
    )
    expect(ops.locator("#run-components")).not_to_contain_text("search_manual@1.0.0")

    # -- an approver approves; the operator's tab sees the run complete --------------------
    from tests.runs.console.conftest import checkpoint_of

    checkpoint = checkpoint_of(run)
    approvals = signed_in(browser, base, "approver", csp_violations)
    approvals.goto(f"{base}/approvals/{checkpoint.pk}/")
    approvals.get_by_label("Reason (required, recorded with your decision)").fill(
        "Part and slot match the manual and the depot stock."
    )
    approvals.get_by_role("button", name="Approve exactly this proposal").click()
    expect(ops.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    expect(ops.locator("#run-timeline")).to_contain_text("completion.verified")
    shot(ops, "versions-run-completed-on-1-1-0")

    run.refresh_from_db()
    assert run.state == "COMPLETED"
    started = Event.objects.get(run=run, type="run.started").payload["components"]
    assert dict(started)["search_manual"] == run.components["search_manual"]
    assert run.components["search_manual"].startswith("1.1.0#")
    # 1.1.0's own behaviour: scored passages (1.0.0 returns none).
    [manual] = [
        e.content
        for e in Evidence.objects.filter(run=run, kind="observation")
        if e.content.get("capability") == "search_manual"
    ]
    assert manual["ok"] and all("relevance" in p for p in manual["data"]["passages"])
