"""An operator follows the incident runbooks in Chromium, step by step, as written.

Each test injects a failure from the fault lab page (the way an outside tester does), opens
the runbook the console links from the run it produced, and carries out every step with the
control the step names: after each, the page and the authoritative records (attempts, run
events, gates) must be what the runbook says.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from catalog.models import CapabilityVersion
from catalog.services import tenant_gate_open
from runs.models import EffectAttempt, Event, Run
from tests.browser_support import login
from tests.durable import conftest as durable

# Real Celery worker processes on the test's own Redis database and queue.
cluster = durable.cluster

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _inject(page: Any, base: str, fixture: str) -> Run:
    """Run one fault fixture from the fault lab page; the run it produced."""
    page.goto(f"{base}/faultlab/")
    row = page.locator(f"#fx-{fixture}")
    row.get_by_role("button", name=f"Run fixture {fixture}").click()
    expect(row).to_contain_text("PASS")
    link = row.locator(f"#fx-open-{fixture}")
    run = Run.objects.get(pk__startswith=link.inner_text())
    link.click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    return run


def _admitted_reserve_part() -> CapabilityVersion:
    return CapabilityVersion.objects.get(capability_id="reserve_part", lifecycle="ADMITTED")


def test_the_ledger_outage_runbook_followed_step_by_step(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    run = _inject(page, base, "ledger_outage")
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.status == "UNRESOLVED"

    # The run links the runbook of its incident.
    page.get_by_role("link", name="Runbook: Ledger outage").click()
    page.wait_for_url(f"{base}/runbooks/ledger-outage/")

    # Step 1: the run is among those that could not reconcile.
    expect(page.locator("#step-1")).to_contain_text(run.short_id)

    # Step 2: close the tenant's effect gate of the affected version, with a reason.
    version = _admitted_reserve_part()
    step = page.locator("#step-2")
    step.get_by_role(
        "textbox", name=f"Reason to close the gate for reserve_part v{version.version}"
    ).fill("ledger outage: stop new reservations")
    step.get_by_role("button", name=f"Close gate for reserve_part v{version.version}").click()
    expect(page.locator(".messages")).to_contain_text("is closed: new dispatch stopped")
    assert not tenant_gate_open(version, "north")

    # Step 3: reconcile the obligation; the operator stays on the runbook, at this step.
    page.locator("#step-3").get_by_role(
        "button", name=f"Reconcile with ledger: attempt {attempt.pk}"
    ).click()
    page.wait_for_url(re.compile(r"/runbooks/ledger-outage/"))
    expect(page.locator(".messages")).to_contain_text(f"{attempt.pk}: reconciled")
    expect(page.locator("#step-3")).not_to_contain_text(attempt.pk)
    attempt.refresh_from_db()
    assert attempt.status == "CONFIRMED"
    assert Event.objects.filter(run=run, type="effect.reconciled").count() == 1

    # Step 4: with no obligation left, the gate is opened again (the runbook says so), with
    # the row of the gate step that closed it.
    expect(page.locator("#step-4").get_by_role("heading", level=2)).to_have_text(
        re.compile("Open the effect gate again")
    )
    step = page.locator("#step-2")
    step.get_by_role(
        "textbox", name=f"Reason to open the gate for reserve_part v{version.version}"
    ).fill("ledger answers again; obligations reconciled")
    step.get_by_role("button", name=f"Open gate for reserve_part v{version.version}").click()
    expect(page.locator(".messages")).to_contain_text("is open: new dispatch allowed")
    assert tenant_gate_open(version, "north")

    # Last step: the fault lab, where the fixture's latest result is the one just run.
    last = page.locator("ol.steps > li").last
    expect(last).to_contain_text("ledger_outage")
    expect(last).to_contain_text("PASS")
    last.get_by_role("link", name="Open the fault lab").click()
    page.wait_for_url(f"{base}/faultlab/")


def test_the_repeated_reservation_runbook_followed_step_by_step(
    live_server: Any, new_page: Any, operator: Any, approver: Any, settings: Any
) -> None:
    from runs.domain import effects
    from tests.operations.test_batch_cancel import sending

    # Built step by step (no commit hands the run to an executor meanwhile): its worker
    # died past the send gate, so the effect may exist and the run still owns the attempt.
    settings.FIELDOPS_EXECUTION = "deferred"
    run = sending(approver=approver)
    settings.FIELDOPS_EXECUTION = "inprocess"
    attempt = EffectAttempt.objects.get(run=run)
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runbooks/repeated-reservation-attempts/")

    # Step 1: stop new effect dispatch.
    version = _admitted_reserve_part()
    step = page.locator("#step-1")
    step.get_by_role(
        "textbox", name=f"Reason to close the gate for reserve_part v{version.version}"
    ).fill("repeated reservation attempts")
    step.get_by_role("button", name=f"Close gate for reserve_part v{version.version}").click()
    expect(page.locator(".messages")).to_contain_text("is closed: new dispatch stopped")
    assert not tenant_gate_open(version, "north")

    # Step 2: the intent is classified by its key, with the ledger's answer beside it.
    row = page.locator("#step-2 tr").filter(has_text=run.short_id)
    expect(row).to_contain_text("ambiguous")

    # Step 3: cancel the run that still owns the attempt; the result leads back here.
    step = page.locator("#step-3")
    expect(step.get_by_role("checkbox", name=re.compile(run.short_id))).to_be_checked()
    step.get_by_label("Reason (recorded on every cancelled run)").fill(
        "repeated reservation attempts: stop the owner"
    )
    step.get_by_role("button", name="Cancel selected runs").click()
    expect(page.locator("main table")).to_contain_text("cancelled_effect_unknown")
    page.get_by_role("link", name="Back to the runbook: Repeated reservation attempts").click()
    page.wait_for_url(re.compile(r"/runbooks/repeated-reservation-attempts/#step-3$"))
    expect(page.locator("#step-3")).to_contain_text("No active run holds an effect attempt.")
    run.refresh_from_db()
    assert run.state == "CANCELLED"

    # Step 4: the unknown attempt the cancelled run keeps is reconciled by its key, here.
    page.locator("#step-4").get_by_role(
        "button", name=f"Reconcile with ledger: attempt {attempt.pk}"
    ).click()
    page.wait_for_url(re.compile(r"/runbooks/repeated-reservation-attempts/#step-4$"))
    expect(page.locator(".messages")).to_contain_text(f"{attempt.pk}: reconciled")
    expect(page.locator("#step-4")).not_to_contain_text(attempt.pk)
    attempt.refresh_from_db()
    assert attempt.status not in effects.UNRESOLVED
    assert Event.objects.filter(run=run, type="effect.reconciled").count() == 1


@pytest.mark.celery
@pytest.mark.postgres
def test_the_ambiguous_effect_runbook_re_drives_a_stuck_recovery_to_a_real_worker(
    live_server: Any, new_page: Any, operator: Any, approver: Any, cluster: Any, settings: Any
) -> None:
    """A run in RECOVERING whose worker died after reading the ledger: the runbook's first
    step names the control it shows (Re-drive reconciliation), and a real Celery worker then
    reconciles the run by the same key, as the step says."""
    import time

    from fieldops import points
    from runs.engine import runner
    from tests.helpers import approve, make_run

    settings.FIELDOPS_EXECUTION = "deferred"  # built step by step, nothing handed over
    run = make_run(
        namespace="live",
        fault_plan=[
            {"point": "after_commit_before_response", "capability": "reserve_part", "on_call": 1}
        ],
    )
    approve(run, approver, advance=False)

    def die(name: str, run_id: str) -> None:
        if name == "after_reconciliation_read" and run_id == str(run.pk):
            raise points.WorkerKilled(name)

    previous = points.install(die)
    try:
        with pytest.raises(points.WorkerKilled):
            runner.advance(str(run.pk), worker="test")
    finally:
        points.install(previous)
    run.refresh_from_db()
    attempt = EffectAttempt.objects.get(run=run)
    assert (run.state, attempt.status) == ("RECOVERING", "AMBIGUOUS")
    settings.FIELDOPS_EXECUTION = "celery"
    cluster.start_worker()
    time.sleep(cluster.lease_seconds + 0.5)  # the dead worker's lease has run out

    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runs/{run.pk}/")
    page.get_by_role("link", name="Runbook: Ambiguous effect").click()
    page.wait_for_url(f"{base}/runbooks/ambiguous-effect/")

    # Step 1 names the control the row shows for a run still in RECOVERING.
    step = page.locator("#step-1")
    expect(step.locator("p").first).to_contain_text("Re-drive reconciliation")
    step.get_by_role("button", name=f"Re-drive reconciliation: attempt {attempt.pk}").click()
    page.wait_for_url(re.compile(r"/runbooks/ambiguous-effect/#step-1$"))
    expect(page.locator(".messages")).to_contain_text(f"{attempt.pk}: redriven")

    # The worker takes the run and reconciles by the same key: one effect, recorded once.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_terminal:
            break
        time.sleep(0.3)
    attempt.refresh_from_db()
    assert (run.state, attempt.status) == ("COMPLETED", "CONFIRMED")
    assert Event.objects.filter(run=run, type="reconciliation.matched").count() == 1
    page.reload()
    expect(page.locator("#step-1")).not_to_contain_text(attempt.pk)
    row = page.locator("#step-2 tr").filter(has_text=run.short_id)
    expect(row).to_contain_text("confirmed")
    expect(row).to_contain_text(attempt.effect_id)


def test_a_catalog_admin_finds_runbooks_in_the_menu_and_reviews_a_drift_from_its_step(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """A catalog admin got 403 on /runbooks/ (and no menu entry) though the drift runbook's
    review step is theirs; an operator's step now says whose it is, with no form."""
    from catalog.models import DriftKind, ToolDrift

    drift = ToolDrift.objects.create(
        server_label="mcp://manuals.example.invalid",
        capability_id="search_manual",
        kind=DriftKind.GONE,
        before=CapabilityVersion.objects.get(capability_id="search_manual", version="1.0.0"),
    )
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runbooks").click()
    page.get_by_role("link", name="Tool definition changed under an admitted mapping").click()
    gate_step = page.locator("#step-2")
    expect(gate_step.locator("[data-operator-step]")).to_contain_text("An operator does this step")
    expect(gate_step.locator("form")).to_have_count(0)
    review = page.locator("#step-3")
    review.get_by_label("Reason").fill("compared: the tool is gone; mapping stays paused")
    review.get_by_role("button", name="Mark reviewed").click()
    expect(page.locator("main .messages")).to_contain_text("reviewed")
    assert page.url.startswith(f"{live_server.url}/runbooks/tool-definition-drift/")
    drift.refresh_from_db()
    assert drift.resolved_at is not None
