"""Whole jobs in Chromium against the deployment as documented: gunicorn, PostgreSQL and a
real Celery worker process on Redis (README "Running on PostgreSQL + Redis + Celery").

The embedded server the other browser tests use runs a run inside the web process; here
only the worker advances it, so a page that is to update by itself has to poll for real.
Every page is watched: a console error, an uncaught exception, a failed request or a 5xx
answer fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser.test_keyboard_and_phone import has_focus, tab_to
from tests.browser_support import login
from tests.deploy.servers import WebProcess, gunicorn
from tests.durable import conftest as durable

# Real Celery worker processes on the test's own Redis database and queue.
cluster = durable.cluster

pytestmark = [
    pytest.mark.browser,
    pytest.mark.celery,
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def deployment(cluster: Any, tmp_path: Path) -> Iterator[WebProcess]:
    """gunicorn and one worker on the test database, the broker and the cluster's queue."""
    cluster.log_dir = tmp_path
    cluster.start_worker(concurrency=2)
    web = gunicorn(
        {
            "DATABASE_URL": cluster.database_url,
            "CELERY_BROKER_URL": durable.REDIS_URL,
            "FIELDOPS_QUEUE": cluster.queue,
            "FIELDOPS_EXECUTION": "celery",
            "FIELDOPS_LEASE_SECONDS": str(cluster.lease_seconds),
        },
        tmp_path / "web.log",
    ).start()
    try:
        yield web
    finally:
        web.stop()


class Watch:
    """What a person would see go wrong in the browser's own tools."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def page(self, page: Any) -> Any:
        page.on(
            "console",
            lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"),
        )
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        page.on(
            "requestfailed",
            lambda r: self.problems.append(f"failed: {r.method} {r.url} {r.failure}"),
        )
        page.on(
            "response",
            lambda r: r.status >= 500 and self.problems.append(f"{r.status}: {r.url}"),
        )
        return page


@pytest.fixture
def watch() -> Iterator[Watch]:
    found = Watch()
    yield found
    assert not found.problems, "\n".join(found.problems)


def _start_from_runs_page(page: Any, base: str, scenario: str | None = None) -> Run:
    page.goto(f"{base}/")
    page.locator("#start-run > summary").click()
    if scenario:
        page.get_by_label("Scenario").select_option(scenario)
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/"))
    run_id = re.search(r"/runs/([0-9a-f-]{36})/", page.url)
    assert run_id
    return Run.objects.get(pk=run_id.group(1))


def test_a_run_started_approved_by_keyboard_and_finished_on_its_own_page(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any, approver: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    # The worker takes the run to its approval; the page shows it without a reload.
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    expect(desk.locator("#head-state")).to_have_text("WAITING_HUMAN")

    reviewer = watch.page(new_page())
    login(reviewer, base, "approver")
    reviewer.goto(f"{base}/approvals/")
    link = reviewer.locator("a[id^=queue-open-]")
    expect(link).to_have_count(1)
    tab_to(reviewer, link)
    reviewer.keyboard.press("Enter")
    reviewer.wait_for_url(re.compile(r"/approvals/[^/]+/$"))
    expect(reviewer.locator("#proposal-hash")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    reason = reviewer.get_by_label("Reason (required, recorded with your decision)")
    tab_to(reviewer, reason)
    reviewer.keyboard.type("Checked the part and the location.")
    approve = reviewer.get_by_role("button", name="Approve exactly this proposal")
    tab_to(reviewer, approve)
    assert has_focus(approve)
    reviewer.keyboard.press("Space")
    reviewer.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    expect(reviewer.locator("#live-state")).to_have_text("COMPLETED", timeout=20_000)
    # The operator's page, never reloaded, ends too: its actions say the run has ended.
    expect(desk.locator("#live-state")).to_have_text("COMPLETED", timeout=20_000)
    expect(desk.locator("#head-state")).to_have_text("COMPLETED")
    expect(desk.locator("#run-actions")).to_contain_text("The run has ended")
    # Back and reload send nothing again.
    reviewer.go_back()
    reviewer.reload()
    run.refresh_from_db()
    assert run.state == "COMPLETED"


def test_an_operator_changes_a_budget_then_cancels_the_run_the_worker_holds(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)

    budget = desk.locator("#budget-name")
    name = budget.locator("option").first.get_attribute("value")
    desk.get_by_label("New limit").fill("7")
    desk.get_by_label("Reason (required)", exact=True).fill("the site asked for a tighter limit")
    desk.get_by_role("button", name="Record budget change").click()
    expect(desk.locator(".messages")).to_contain_text("Budget change recorded")
    expect(desk.locator("#budgets-h + ul")).to_contain_text(f"{name}")
    expect(desk.locator("#budgets-h + ul")).to_contain_text("changed by an operator")
    # Reload does not send the change again.
    desk.reload()
    assert run.events.filter(type="budget.changed").count() == 1

    desk.get_by_label("Cancellation reason (required)").fill("duplicate request")
    desk.get_by_role("button", name="Cancel run").click()
    expect(desk.locator(".messages")).to_contain_text("Run cancelled: cancelled_no_dispatch")
    expect(desk.locator("#head-state")).to_have_text("CANCELLED")
    expect(desk.locator("#run-actions")).to_contain_text("The run has ended")
    desk.go_back()
    desk.reload()
    run.refresh_from_db()
    assert run.state == "CANCELLED"
    assert run.events.filter(type="run.cancelled").count() <= 1


def test_an_operator_bulk_cancels_the_runs_of_a_filter_the_worker_drains(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    runs = [_start_from_runs_page(desk, base) for _ in range(3)]
    for run in runs:
        desk.goto(f"{base}/runs/{run.pk}/")
        expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)

    desk.goto(f"{base}/")
    desk.get_by_label("State").select_option("WAITING_HUMAN")
    desk.get_by_role("button", name="Apply").click()
    expect(desk).to_have_url(re.compile(r"state=WAITING_HUMAN"))
    expect(desk.locator("#run-table tbody tr")).to_have_count(3)
    desk.get_by_role("link", name="Cancel every run matching this filter…").click()
    expect(desk.locator("#preview-count")).to_have_text("3 runs match now")
    desk.get_by_label("Reason (recorded on the operation and on every item's run)").fill(
        "duplicate requests"
    )
    desk.get_by_label("Type 3 to confirm the number of runs").fill("3")
    desk.get_by_role("button", name="Start the bulk cancel").click()
    desk.wait_for_url(re.compile(r"/operations/[0-9a-f-]{36}/$"))
    expect(desk.locator("#op-percent")).to_have_text("100 %", timeout=30_000)
    expect(desk.locator("#op-status")).to_have_text("finished")
    expect(desk.locator("#op-done")).to_have_text("3")
    desk.reload()
    expect(desk.locator("#op-status")).to_have_text("finished")
    assert {r.state for r in Run.objects.filter(pk__in=[r.pk for r in runs])} == {"CANCELLED"}

    # The runs list, filtered the same way, now has nothing to cancel: it says so.
    desk.goto(f"{base}/?state=WAITING_HUMAN")
    expect(desk.locator("#run-table")).to_contain_text(re.compile(r"[Nn]o run"))


def test_an_unknown_effect_from_the_fault_lab_is_reconciled_from_its_runbook(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    from runs.models import EffectAttempt

    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    desk.goto(f"{base}/faultlab/")
    row = desk.locator("#fx-ledger_outage")
    row.get_by_role("button", name="Run fixture ledger_outage").click()
    expect(row).to_contain_text("PASS", timeout=30_000)
    link = row.locator("#fx-open-ledger_outage")
    run = Run.objects.get(pk__startswith=link.inner_text())
    link.click()
    desk.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.status == "UNRESOLVED"
    desk.get_by_role("link", name="Runbook: Ledger outage").click()
    desk.wait_for_url(f"{base}/runbooks/ledger-outage/")
    expect(desk.locator("#step-1")).to_contain_text(run.short_id)
    desk.locator("#step-3").get_by_role(
        "button", name=f"Reconcile with ledger: attempt {attempt.pk}"
    ).click()
    desk.wait_for_url(re.compile(r"/runbooks/ledger-outage/"))
    expect(desk.locator(".messages")).to_contain_text(f"{attempt.pk}: reconciled")
    desk.reload()
    expect(desk.locator(".messages")).to_have_count(0)
    attempt.refresh_from_db()
    assert attempt.status == "CONFIRMED"
    desk.goto(f"{base}/runs/{run.pk}/")
    expect(desk.locator("#terminal-unresolved")).to_be_visible()
    expect(desk.locator("#terminal-reconcile")).to_have_count(0)
