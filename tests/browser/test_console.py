"""The console through a real browser: log in, click, read what a person reads."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from approvals.models import Decision, DecisionRefusal
from runs.models import Event, Run
from sim import faultlab
from tests.browser_support import login, screenshot
from tests.helpers import make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def waiting(operator: Any) -> Run:
    """A run of the live world (what the runs list and the queue show by default)."""
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_an_approver_approves_the_pending_proposal_and_watches_the_run_complete(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    base = live_server.url
    # One tab watches the run page: it polls while the run is active.
    watcher = new_page()
    login(watcher, base, "approver")
    watcher.goto(f"{base}/runs/{waiting.pk}/")
    expect(watcher.locator("#live-state")).to_have_text("WAITING_HUMAN")
    assert watcher.evaluate("typeof htmx") == "object"

    page = new_page()
    login(page, base, "approver")
    page.get_by_role("link", name="Approvals").click()
    screenshot(page, "approvals-queue")
    checkpoint = checkpoint_of(waiting)
    page.get_by_role("link", name=checkpoint.pk).click()
    expect(page.locator("#proposal-hash")).to_have_text(checkpoint.proposal_hash)
    expect(page.get_by_text("Exactly what will be sent")).to_be_visible()
    screenshot(page, "approval-proposal")
    page.get_by_label("Reason (required, recorded with your decision)").fill(
        "Part and slot match the manual and the depot stock."
    )
    page.get_by_role("button", name="Approve exactly this proposal").click()
    page.wait_for_url(re.compile(rf"/runs/{waiting.pk}/"))
    expect(page.locator("#live-state")).to_have_text("COMPLETED")
    expect(page.locator("#run-timeline")).to_contain_text("completion.verified")

    # The watching tab saw it happen without a reload.
    expect(watcher.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    expect(watcher.locator("#run-timeline")).to_contain_text("approval.granted")
    expect(watcher.locator("#run-timeline")).to_contain_text("completion.verified")
    expect(watcher.locator("#run-live")).not_to_have_attribute("hx-trigger", "every 2s")
    # The header, the identity and the actions moved with it (swapped out of band).
    expect(watcher.locator("#head-state")).to_have_text("COMPLETED")
    final = Run.objects.get(pk=waiting.pk)
    expect(watcher.locator("#run-position dd").nth(2)).to_have_text(str(final.revision))
    expect(watcher.locator("#run-actions")).to_contain_text("The run has ended")
    screenshot(watcher, "run-completed")
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.verdict == "APPROVE" and decision.decided_by == approver


def test_the_approval_queue_filters_and_shows_new_checkpoints_without_a_reload(
    live_server: Any, new_page: Any, approver: Any, operator: Any, waiting: Run
) -> None:
    base = live_server.url
    page = new_page()
    login(page, base, "approver")
    page.goto(f"{base}/approvals/")
    expect(page.locator("#queue")).to_contain_text(checkpoint_of(waiting).pk)
    page.get_by_label("Kind").select_option("clarification")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#queue")).to_contain_text("No pending checkpoint matches these filters")
    expect(page).to_have_url(re.compile(r"kind=clarification"))
    page.get_by_label("Kind").select_option("approval")
    page.get_by_label("Run id").fill(waiting.pk.hex[:8])
    page.get_by_label("Run id").press("Enter")  # the keyboard submits the filter form
    expect(page.locator("#queue tbody tr")).to_have_count(1)
    page.goto(f"{base}/approvals/")
    # Another run asks for approval while the queue is open: it appears by itself.
    second = make_run(principal="user:operator", requested_by=operator, namespace="live")
    expect(page.locator("#queue")).to_contain_text(checkpoint_of(second).pk, timeout=15_000)
    expect(page.locator("#queue tbody tr")).to_have_count(2)


def _start_from_the_list(page: Any, scenario: str, *, double_click: bool = False) -> None:
    """Open the runs list's start form, choose ``scenario`` and start it; wait for the run page."""
    page.get_by_text("Start a run", exact=True).click()
    start = page.locator("#start-run form")
    start.get_by_label("Scenario").select_option(scenario)
    button = start.get_by_role("button", name="Start run")
    button.dblclick() if double_click else button.click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))


def test_a_double_click_on_start_run_starts_one_run(
    live_server: Any, new_page: Any, operator: Any, settings: Any
) -> None:
    settings.FIELDOPS_EXECUTION = "inprocess"
    page = new_page()
    login(page, live_server.url, "operator")
    _start_from_the_list(page, "abstain", double_click=True)
    run = Run.objects.get()
    assert page.url.endswith(f"/runs/{run.pk}/")
    expect(
        page.get_by_role("button", name="Cancel run").or_(page.locator("#live-state"))
    ).to_be_visible()
    assert Run.objects.count() == 1
    # Back to the list (loaded again, no-store): the form works again, for a new run.
    page.go_back()
    expect(page.locator("#start-run form button[type=submit]")).to_be_enabled()


def test_back_to_the_list_after_a_start_shows_the_run_and_starts_another(
    live_server: Any, new_page: Any, operator: Any, settings: Any
) -> None:
    """Back after starting a run showed the browser's copy of the list: without the new run,
    and with the form's used key, so the next Start run was refused (start_key_reused)
    again and again. The list is loaded again: the new run is in it, and the form starts
    another run."""
    settings.FIELDOPS_EXECUTION = "inprocess"
    page = new_page()
    login(page, live_server.url, "operator")
    _start_from_the_list(page, "abstain")
    first = Run.objects.get()
    page.go_back()
    expect(page.locator("#run-table")).to_contain_text(first.short_id)
    _start_from_the_list(page, "early_success")
    second = Run.objects.exclude(pk=first.pk).get()
    assert second.scenario == "early_success" and page.url.endswith(f"/runs/{second.pk}/")


def test_a_used_copy_of_the_start_form_comes_back_ready_to_start_a_new_run(
    live_server: Any, new_page: Any, operator: Any, settings: Any
) -> None:
    """A copy of the start form whose key already started a run (a page a browser kept from
    before that start) is refused once, in words, with the choices kept and a new key: the
    next Start run starts the run it asks for (it answered the same refusal every time)."""
    settings.FIELDOPS_EXECUTION = "inprocess"
    page = new_page()
    login(page, live_server.url, "operator")
    page.get_by_text("Start a run", exact=True).click()
    start = page.locator("#start-run form")
    used = start.locator("input[name=start_key]").input_value()
    start.get_by_label("Scenario").select_option("abstain")
    start.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    first = Run.objects.get()
    page.go_back()
    page.get_by_text("Start a run", exact=True).click()
    # The copy the browser kept: the key that started the first run.
    start.locator("input[name=start_key]").evaluate("(el, key) => el.value = key", used)
    start.get_by_label("Scenario").select_option("early_success")
    start.get_by_role("button", name="Start run").click()
    alert = start.get_by_role("alert")
    expect(alert).to_contain_text("already started a run, so nothing was started")
    expect(alert).not_to_contain_text("start_key")
    expect(start.get_by_label("Scenario")).to_have_value("early_success")
    assert Run.objects.count() == 1
    start.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    second = Run.objects.exclude(pk=first.pk).get()
    assert second.scenario == "early_success"


def test_an_operator_cancels_a_waiting_run(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    screenshot(page, "runs-list")
    page.get_by_role("link", name=waiting.short_id).click()
    expect(page.locator("#live-state")).to_have_text("WAITING_HUMAN")
    screenshot(page, "run-waiting")
    page.get_by_label("Cancellation reason (required)").fill("The customer withdrew the job.")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("main .messages")).to_contain_text("Run cancelled: cancelled_no_dispatch.")
    expect(page.locator("#live-state")).to_have_text("CANCELLED")
    expect(page.locator("#run-actions")).to_contain_text("Start a follow-up run")
    waiting.refresh_from_db()
    assert waiting.state == "CANCELLED" and waiting.terminal_reason == "cancelled_no_dispatch"
    event = Event.objects.get(run=waiting, type="run.cancelled")
    assert event.payload == {"reason": "The customer withdrew the job.", "by": "user:operator"}


def _as_approver_on_the_approval_of(live_server: Any, new_page: Any, run: Run) -> tuple[Any, Any]:
    """A page signed in as the approver, on the approval ``run`` waits for."""
    checkpoint = checkpoint_of(run)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    return page, checkpoint


def test_a_tampered_hash_post_is_refused(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    page, checkpoint = _as_approver_on_the_approval_of(live_server, new_page, waiting)
    page.locator("input[name=seen_hash]").evaluate("el => { el.value = '0'.repeat(64); }")
    page.get_by_label("Reason (required, recorded with your decision)").fill("looks fine")
    page.get_by_role("button", name="Approve exactly this proposal").click()
    expect(page.get_by_role("heading", name="409 · Conflict")).to_be_visible()
    expect(page.get_by_text("the hash you reviewed does not match")).to_be_visible()
    screenshot(page, "conflict-tampered-hash")
    page.get_by_role("link", name="Reload to review the current revision").click()
    expect(page.locator("#proposal-hash")).to_have_text(checkpoint.proposal_hash)
    assert not Decision.objects.exists()
    assert DecisionRefusal.objects.get().code == "hash_mismatch"
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"


def test_an_approver_of_another_tenant_cannot_see_the_checkpoint(
    live_server: Any, new_page: Any, outsider: Any, waiting: Run
) -> None:
    base = live_server.url
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, base, "approver-south")
    page.get_by_role("link", name="Approvals").click()
    expect(page.get_by_text("Nothing in the live world waits for a decision")).to_be_visible()
    assert checkpoint.pk not in page.content()
    response = page.goto(f"{base}/approvals/{checkpoint.pk}/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="404 · Not found")).to_be_visible()
    assert checkpoint.proposal_hash not in page.content()
    response = page.goto(f"{base}/runs/{waiting.pk}/")
    assert response.status == 404
    screenshot(page, "not-found-other-tenant")


def test_screenshots_of_the_operator_pages(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    faultlab.run_fixture(faultlab.BY_NAME["ledger_outage"])
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/recovery/")
    expect(
        page.get_by_role("heading", name="Runs with unknown or conflicting effects")
    ).to_be_visible()
    expect(
        page.get_by_role("button", name=re.compile("Reconcile with ledger: attempt"))
    ).to_have_count(1)
    screenshot(page, "recovery")
    page.goto(f"{base}/runbooks/ledger-outage/")
    expect(page.get_by_text("ledger_unavailable").first).to_be_visible()
    screenshot(page, "runbook-ledger-outage")
    page.goto(f"{base}/faultlab/")
    row = page.locator("#fx-abstain")
    row.get_by_role("button", name="Run fixture abstain").click()
    expect(row).to_contain_text("PASS")
    screenshot(page, "faultlab")
    page.goto(f"{base}/packet/")
    expect(page.get_by_role("heading", name="Transition table")).to_be_visible()
    screenshot(page, "review-packet")


def test_a_refused_bulk_cancel_keeps_the_selection_and_reason_and_points_at_the_fault(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    other = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, live_server.url, "operator")
    box = page.get_by_label(f"Select run {waiting.short_id}")
    box.check()
    reason = page.get_by_label("Reason (recorded on every cancelled run)")
    reason.fill("   ")
    page.get_by_role("button", name="Cancel selected runs").click()
    expect(page.locator("#bulk-error")).to_contain_text("needs a reason")
    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_attribute("aria-describedby", "bulk-error")
    expect(reason).to_be_focused()
    expect(page.get_by_label(f"Select run {waiting.short_id}")).to_be_checked()
    expect(page.get_by_label(f"Select run {other.short_id}")).not_to_be_checked()

    page.get_by_label(f"Select run {waiting.short_id}").uncheck()
    reason.fill("customer called off the job")
    page.get_by_role("button", name="Cancel selected runs").click()
    expect(page.locator("#bulk-error")).to_contain_text("select at least one run")
    expect(page.locator("#bulk-error")).to_be_focused()
    expect(reason).to_have_value("customer called off the job")
    waiting.refresh_from_db()
    assert waiting.state == "WAITING_HUMAN"


def _press_enter_twice_on(page: Any, button: Any, path: str) -> list[Any]:
    """Enter on ``button``, and Enter again while the first post is still in flight (held
    until both keys were pressed, as on a slow server); returns the posts the page sent."""
    held: list[Any] = []
    page.route(f"**{path}", lambda route: held.append(route))
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(100)
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    sent = list(held)
    page.unroute(f"**{path}")
    for route in held:
        with contextlib.suppress(PlaywrightError):  # dropped by the browser for the second
            route.continue_()
    return sent


def test_enter_pressed_twice_on_cancel_selected_runs_cancels_once_and_says_applied(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    """A fast second Enter on the bulk cancel button sent the form again: the page the
    operator saw was the second answer, "refused run_terminal" for every run the first had
    just cancelled (each refusal recorded too)."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.get_by_label(f"Select run {waiting.short_id}").check()
    page.get_by_label("Reason (recorded on every cancelled run)").fill("job withdrawn")
    button = page.get_by_role("button", name="Cancel selected runs")
    posts = _press_enter_twice_on(page, button, "/runs/cancel/")
    expect(page.get_by_role("heading", name="Bulk cancel: per-run result")).to_be_visible()
    expect(page.locator("main table")).to_contain_text("applied")
    expect(page.locator("main table")).not_to_contain_text("refused")
    assert len(posts) == 1, posts
    waiting.refresh_from_db()
    assert waiting.state == "CANCELLED"


def test_reloading_a_bulk_cancel_result_sends_nothing_again(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    """The result was the answer to the post: a reload asked to send the form again, and
    the page then said "refused run_terminal" for the runs just cancelled (each refusal
    recorded). Now the post is answered by a redirect to the result, which reloads as is."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.get_by_label(f"Select run {waiting.short_id}").check()
    page.get_by_label("Reason (recorded on every cancelled run)").fill("job withdrawn")
    page.get_by_role("button", name="Cancel selected runs").click()
    expect(page.get_by_role("heading", name="Bulk cancel: per-run result")).to_be_visible()
    events = Event.objects.filter(run=waiting).count()
    posts: list[str] = []
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )
    page.reload()
    page.go_back()
    page.go_forward()
    expect(page.get_by_role("heading", name="Bulk cancel: per-run result")).to_be_visible()
    expect(page.locator("main table")).to_contain_text("applied")
    expect(page.locator("main table")).not_to_contain_text("refused")
    assert posts == []
    assert Event.objects.filter(run=waiting).count() == events
    assert Event.objects.filter(run=waiting, type="run.cancelled").count() == 1


def test_enter_pressed_twice_on_a_decision_or_a_cancel_sends_it_once(
    live_server: Any, new_page: Any, approver: Any, operator: Any, waiting: Run
) -> None:
    base = live_server.url
    page, checkpoint = _as_approver_on_the_approval_of(live_server, new_page, waiting)
    page.get_by_label("Reason (required, recorded with your decision)").fill("fine")
    decline = page.get_by_role("button", name="Decline")
    decisions = _press_enter_twice_on(page, decline, "/decide/")
    page.wait_for_url(re.compile(r"/runs/"))
    assert len(decisions) == 1, decisions
    assert Decision.objects.filter(checkpoint=checkpoint).count() == 1
    assert not DecisionRefusal.objects.exists()

    other = make_run(principal="user:operator", requested_by=operator, namespace="live")
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runs/{other.pk}/")
    page.get_by_label("Cancellation reason (required)").fill("withdrawn")
    cancel = page.get_by_role("button", name="Cancel run")
    cancels = _press_enter_twice_on(page, cancel, f"/runs/{other.pk}/cancel/")
    expect(page.locator("main .messages")).to_contain_text("Run cancelled: cancelled_no_dispatch.")
    assert len(cancels) == 1, cancels


def test_back_to_the_ended_run_after_starting_a_follow_up_names_it_instead_of_the_form(
    live_server: Any, new_page: Any, operator: Any, waiting: Run
) -> None:
    """After 'Start a follow-up run', Back showed the ended run's page from the browser's
    cache: the follow-up form still offered (a state no longer true, its key spent) where
    a reload says which follow-up blocks a new one. Back now reloads the page."""
    from runs import services as runs

    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="wrong slot")
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    page.goto(f"{base}/runs/{waiting.pk}/")
    page.get_by_role("button", name="Start a follow-up run").click()
    expect(page.get_by_text(re.compile(r"Follow-up run \w+ started"))).to_be_visible()
    follow_up = Run.objects.get(follows_run_id=waiting.pk)
    assert follow_up.state not in ("COMPLETED", "FAILED", "CANCELLED", "ESCALATED")
    page.go_back()
    page.wait_for_url(f"{base}/runs/{waiting.pk}/")
    expect(page.locator("#follow-up-taken")).to_contain_text(follow_up.short_id)
    expect(page.get_by_role("button", name="Start a follow-up run")).to_have_count(0)
