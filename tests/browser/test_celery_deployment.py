"""Whole jobs in Chromium against the deployment as documented: gunicorn, PostgreSQL and a
real Celery worker process on Redis (README "Running on PostgreSQL + Redis + Celery").

The embedded server the other browser tests use runs a run inside the web process; here
only the worker advances it, so a page that is to update by itself has to poll for real.
Every page is watched: a console error, an uncaught exception, a failed request or a 5xx
answer fails the test.
"""

from __future__ import annotations

import re
import sys
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


# The stdio tool servers the catalog tests register: run by this Python.
STDIO = {"FIELDOPS_MCP_STDIO_COMMANDS": sys.executable}


@pytest.fixture
def deployment(cluster: Any, tmp_path: Path) -> Iterator[WebProcess]:
    """gunicorn and one worker on the test database, the broker and the cluster's queue."""
    cluster.log_dir = tmp_path
    cluster.start_worker(concurrency=2, **STDIO)
    web = gunicorn(
        {
            **STDIO,
            "DATABASE_URL": cluster.database_url,
            "CELERY_BROKER_URL": durable.REDIS_URL,
            "FIELDOPS_QUEUE": cluster.queue,
            "FIELDOPS_EXECUTION": "celery",
            "FIELDOPS_LEASE_SECONDS": str(cluster.lease_seconds),
            "FIELDOPS_STUCK_AFTER_SECONDS": "2",  # as the cluster's: a stall shows in 4 s
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
        self.allowed: list[str] = []

    def expected(self, text: str) -> None:
        """A problem the test causes on purpose (a refusal's status) is not one."""
        self.allowed.append(text)

    def unexpected(self) -> list[str]:
        return [p for p in self.problems if not any(a in p for a in self.allowed)]

    def page(self, page: Any) -> Any:
        page.on(
            "console",
            lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"),
        )
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        # A poll in flight when the person leaves the page is aborted by the browser
        # itself (net::ERR_ABORTED): not a failure anybody sees.
        page.on(
            "requestfailed",
            lambda r: (
                "ERR_ABORTED" not in (r.failure or "")
                and self.problems.append(f"failed: {r.method} {r.url} {r.failure}")
            ),
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
    assert not found.unexpected(), "\n".join(found.unexpected())


def _start_from_runs_page(page: Any, base: str, scenario: str | None = None) -> Run:
    page.goto(f"{base}/")
    page.locator("#start-run > summary").click()
    if scenario:
        page.locator("#start-run").get_by_label("Scenario").select_option(scenario)
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


def test_every_fault_lab_fixture_passes_on_the_celery_deployment(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    from sim.faultlab import FIXTURES

    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    desk.goto(f"{base}/faultlab/")
    desk.get_by_role("button", name=f"Run all {len(FIXTURES)} fixtures").click()
    last = desk.locator(f"#fx-{FIXTURES[-1].name}")
    expect(last).to_contain_text(re.compile(r"PASS|FAIL"), timeout=240_000)
    failed = [f.name for f in FIXTURES if "PASS" not in desk.locator(f"#fx-{f.name}").inner_text()]
    assert not failed, failed


def test_a_discovery_on_the_worker_then_a_second_admin_admits_and_retires(
    deployment: WebProcess,
    new_page: Any,
    watch: Watch,
    catalog_admin: Any,
    tmp_path: Path,
) -> None:
    from catalog.models import CapabilityVersion
    from tests.catalog.conftest import ChangingServer
    from tests.conftest import make_user

    make_user("catalog-reviewer", "north", "catalog-admin")
    server = ChangingServer(tmp_path / "state.json")
    base = deployment.url
    admin = watch.page(new_page())
    login(admin, base, "catalog-admin")
    admin.goto(f"{base}/catalog/servers/")
    admin.get_by_label("Name").fill("parts")
    admin.get_by_label("stdio (a command on this host)").check()
    admin.get_by_label("Command (stdio)").fill(sys.executable)
    admin.get_by_label("Arguments (stdio; split like a shell, never run by one)").fill(server.args)
    admin.get_by_role("button", name="Register server").click()
    admin.get_by_role("button", name="Discover now").click()
    # The worker discovers; the page follows it to its result without a reload.
    admin.wait_for_url(re.compile(r"/catalog/discoveries/\d+/$"))
    result = admin.locator("#discovery-result")
    expect(result).to_contain_text("3 new", timeout=30_000)
    admin.reload()
    expect(result).to_contain_text("3 new")

    # The importer may not admit what it discovered: the page says why.
    candidate = CapabilityVersion.objects.get(capability_id="lookup_part")
    admin.goto(f"{base}/catalog/candidates/{candidate.pk}/")
    expect(admin.locator(".warn-box")).to_contain_text("Another catalog admin must admit it")

    reviewer = watch.page(new_page())
    login(reviewer, base, "catalog-reviewer")
    reviewer.goto(f"{base}/catalog/candidates/{candidate.pk}/")
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
    reviewer.reload()
    expect(reviewer.locator("h1 .badge")).to_have_text("ADMITTED")

    # Retiring it: the admin reads what it changes, then retires it.
    admin.goto(f"{base}/catalog/candidates/{candidate.pk}/")
    admin.get_by_role("link", name="Retire…").click()
    admin.get_by_label("Reason", exact=True).fill("the mapping is no longer needed")
    admin.locator("#retire-ack").check()
    # Nothing would serve new runs after it: a second catalog admin must confirm.
    admin.get_by_role("button", name="Request retirement").click()
    expect(admin.locator(".messages")).to_contain_text("a second catalog admin must confirm")
    admin.reload()
    expect(admin.locator("#retire-own-request")).to_be_visible()
    reviewer.goto(f"{base}/catalog/")
    reviewer.get_by_role("link", name=re.compile("retirement requested")).first.click()
    reviewer.get_by_label("Reason", exact=True).fill("confirmed: no run needs it")
    reviewer.locator("#retire-ack").check()
    reviewer.get_by_role("button", name="Confirm retirement").click()
    expect(reviewer.locator("h1 .badge")).to_have_text("RETIRED")
    reviewer.go_back()
    reviewer.reload()
    candidate.refresh_from_db()
    assert candidate.lifecycle == "RETIRED"


def test_a_question_the_run_asks_is_answered_and_the_run_goes_on_on_the_worker(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any, approver: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base, scenario="clarify")
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    expect(desk.locator("[data-live-summary]")).to_contain_text("waiting for an answer")
    desk.locator("#live-waiting-checkpoint").click()
    desk.wait_for_url(re.compile(r"/approvals/[^/]+/$"))
    desk.get_by_label(re.compile("Your answer")).fill("LOC-N1")
    desk.get_by_role("button", name="Answer").click()
    desk.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    expect(desk.locator("[data-live-summary]")).to_contain_text(
        "waiting for an approval", timeout=20_000
    )
    desk.reload()
    assert run.checkpoints.filter(kind="clarification").count() == 1


def test_every_scenario_started_from_the_page_reaches_an_end_or_an_approval_by_itself(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    from runs.policies import registry

    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    for scenario in registry.scenarios():
        run = _start_from_runs_page(desk, base, scenario=scenario)
        expect(desk.locator("#live-state"), scenario).to_have_text(
            re.compile(r"^(WAITING_HUMAN|WAITING_EXTERNAL|COMPLETED|FAILED|ESCALATED|CANCELLED)$"),
            timeout=30_000,
        )
        run.refresh_from_db()
        expect(desk.locator("#head-state"), scenario).to_have_text(run.state)


def test_the_approval_queue_shows_a_new_proposal_by_itself(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any, approver: Any
) -> None:
    base = deployment.url
    reviewer = watch.page(new_page())
    login(reviewer, base, "approver")
    reviewer.goto(f"{base}/approvals/")
    expect(reviewer.locator("#queue .empty")).to_contain_text("Nothing in the live world waits")

    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    row = reviewer.locator("#queue tbody tr")
    expect(row).to_have_count(1, timeout=20_000)
    expect(row).to_contain_text(run.short_id)
    expect(reviewer.locator("#queue .empty")).to_have_count(0)

    # The operator cancels it: the queue drops it by itself too.
    desk.get_by_label("Cancellation reason (required)").fill("not needed after all")
    desk.get_by_role("button", name="Cancel run").click()
    expect(desk.locator("#head-state")).to_have_text("CANCELLED")
    expect(reviewer.locator("#queue tbody tr")).to_have_count(0, timeout=15_000)
    expect(reviewer.locator("#queue .empty")).to_be_visible()


def test_unknown_effects_are_reconciled_by_filter_from_recovery_on_the_worker(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    from runs.models import EffectAttempt

    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    desk.goto(f"{base}/faultlab/")
    row = desk.locator("#fx-ledger_outage")
    for _ in range(2):
        row.get_by_role("button", name="Run fixture ledger_outage").click()
        expect(row).to_contain_text("PASS", timeout=30_000)
        expect(row.get_by_role("button", name="Run fixture ledger_outage")).to_be_enabled()
    assert EffectAttempt.objects.filter(status="UNRESOLVED").count() == 2

    desk.goto(f"{base}/recovery/")
    desk.get_by_role("button", name="Preview the bulk reconcile").click()
    expect(desk.locator("#preview-count")).to_have_text("2 unknown effects match now")
    desk.get_by_label("Reason (recorded on the operation and on every item's run)").fill(
        "the ledger answers again"
    )
    desk.get_by_label(re.compile("Type 2 to confirm")).fill("2")
    desk.locator("#start-operation button[type=submit]").click()
    desk.wait_for_url(re.compile(r"/operations/[0-9a-f-]{36}/$"))
    expect(desk.locator("#op-percent")).to_have_text("100 %", timeout=30_000)
    expect(desk.locator("#op-status")).to_have_text("finished")
    assert EffectAttempt.objects.filter(status="UNRESOLVED").count() == 0


def test_a_follow_up_of_a_cancelled_run_starts_once_and_runs_on_the_worker(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    desk.get_by_label("Cancellation reason (required)").fill("wrong location")
    desk.get_by_role("button", name="Cancel run").click()
    expect(desk.locator("#head-state")).to_have_text("CANCELLED")
    desk.get_by_role("button", name="Start a follow-up run").click()
    desk.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/"))
    assert f"/runs/{run.pk}/" not in desk.url
    follow = Run.objects.get(follows_run_id=run.pk)
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    # Back to the ended run: its page no longer offers a second follow-up.
    desk.go_back()
    expect(desk.locator("#run-actions")).not_to_contain_text("Start a follow-up run")
    expect(desk.locator("#follow-up-taken")).to_be_visible()
    desk.reload()
    assert Run.objects.filter(follows_run_id=run.pk).count() == 1
    assert follow.pk


def test_an_operation_paused_and_resumed_while_no_worker_runs_then_drained(
    deployment: WebProcess, cluster: Any, new_page: Any, watch: Watch, operator: Any
) -> None:
    base = deployment.url
    cluster.stop_all()  # the workers are down: what is handed over waits on the broker
    desk = watch.page(new_page())
    login(desk, base, "operator")
    runs = [_start_from_runs_page(desk, base) for _ in range(3)]
    desk.goto(f"{base}/?state=CREATED")
    expect(desk.locator("#run-table tbody tr")).to_have_count(3)
    desk.get_by_role("link", name="Cancel every run matching this filter…").click()
    desk.get_by_label("Reason (recorded on the operation and on every item's run)").fill(
        "started by mistake"
    )
    desk.get_by_label("Type 3 to confirm the number of runs").fill("3")
    desk.get_by_role("button", name="Start the bulk cancel").click()
    desk.wait_for_url(re.compile(r"/operations/[0-9a-f-]{36}/$"))
    expect(desk.locator("#op-status")).to_have_text("running")
    expect(desk.locator("#op-percent")).to_have_text("0 %")

    desk.get_by_role("button", name="Pause the operation").click()
    expect(desk.locator("#op-status")).to_have_text("paused")
    expect(desk.get_by_role("button", name="Resume the operation")).to_be_visible()
    expect(desk.get_by_role("button", name="Pause the operation")).to_have_count(0)
    desk.get_by_role("button", name="Resume the operation").click()
    expect(desk.locator("#op-status")).to_have_text("running")

    cluster.start_worker()
    expect(desk.locator("#op-percent")).to_have_text("100 %", timeout=30_000)
    expect(desk.locator("#op-status")).to_have_text("finished")
    expect(desk.locator("#op-moves")).to_contain_text("nothing left to pause")
    assert {r.state for r in Run.objects.filter(pk__in=[r.pk for r in runs])} == {"CANCELLED"}


def test_a_run_no_worker_takes_says_so_on_its_page_until_one_does(
    deployment: WebProcess, cluster: Any, new_page: Any, watch: Watch, operator: Any
) -> None:
    """With every worker down the run page said "live: updates while the run is active"
    beside CREATED for as long as anyone looked: the start looked taken and nothing said
    that no worker would ever move it (only the Recovery page listed it). The page now
    says, by itself, that the run is not moving and why, with Recovery linked, and drops
    the notice when a worker takes the run."""
    base = deployment.url
    cluster.stop_all()
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    expect(desk.locator("#live-state")).to_have_text("CREATED")
    notice = desk.locator("#run-stalled")
    expect(notice).to_contain_text("not moving", timeout=15_000)
    expect(notice).to_contain_text("no worker has claimed it")
    expect(notice.get_by_role("link", name="Recovery")).to_have_attribute("href", "/recovery/")
    desk.goto(f"{base}/recovery/")
    expect(desk.locator("#stalled")).to_contain_text(run.short_id)
    desk.go_back()
    expect(notice).to_be_visible()

    cluster.start_worker()
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    expect(notice).to_have_count(0)


def test_an_approval_of_a_run_cancelled_meanwhile_is_refused_in_words_with_the_focus_on_it(
    deployment: WebProcess, new_page: Any, watch: Watch, operator: Any, approver: Any
) -> None:
    base = deployment.url
    desk = watch.page(new_page())
    login(desk, base, "operator")
    run = _start_from_runs_page(desk, base)
    expect(desk.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=20_000)
    reviewer = watch.page(new_page())
    login(reviewer, base, "approver")
    reviewer.goto(f"{base}/approvals/")
    reviewer.locator("a[id^=queue-open-]").click()
    reviewer.get_by_label("Reason (required, recorded with your decision)").fill("looks right")

    desk.get_by_label("Cancellation reason (required)").fill("the site closed")
    desk.get_by_role("button", name="Cancel run").click()
    expect(desk.locator("#head-state")).to_have_text("CANCELLED")

    reviewer.get_by_role("button", name="Approve exactly this proposal").focus()
    reviewer.keyboard.press("Enter")
    # The refusal is the console's 409 page (Chromium logs its status: expected here).
    watch.expected("status of 409")
    refusal = reviewer.get_by_role("alert")
    expect(refusal).to_contain_text("The run was cancelled by user:operator")
    expect(refusal).to_contain_text("no decision is recorded")
    # The keyboard starts at the refusal, as after every refused post, not at the menu;
    # the next Tab is the way back to the proposal as it is now.
    expect(refusal).to_be_focused()
    reviewer.keyboard.press("Tab")
    expect(
        reviewer.get_by_role("link", name="Reload to review the current revision")
    ).to_be_focused()
    run.refresh_from_db()
    assert run.state == "CANCELLED"
