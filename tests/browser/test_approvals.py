"""Approvals through a real browser (issue 19): a quorum met by two approvers, an email
link to the exact proposal, the requester's disabled button, a cancelled checkpoint."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from approvals import notify
from approvals.models import ApprovalPolicy, Decision
from runs import services as runs
from runs.models import Run
from tests.browser_support import login, screenshot
from tests.conftest import make_user
from tests.helpers import make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REASON = "Reason (required, recorded with your decision)"


@pytest.fixture
def waiting(operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def _approve(page: Any, reason: str) -> None:
    page.get_by_label(REASON).fill(reason)
    page.get_by_role("button", name="Approve exactly this proposal").click()


def test_two_approvers_meet_a_quorum(live_server: Any, new_page: Any, operator: Any) -> None:
    make_user("ana", "north", "approver")
    make_user("bo", "north", "approver")
    ApprovalPolicy.objects.create(
        tenant="north", name="two-of", capability="reserve_part", quorum=2
    )
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    checkpoint = checkpoint_of(run)
    base = live_server.url
    first = new_page()
    login(first, base, "ana")
    first.goto(f"{base}/approvals/{checkpoint.pk}/")
    expect(first.locator("#quorum")).to_contain_text("Approvals: 0 of 2")
    _approve(first, "Checked by ana.")
    expect(first.locator("main .messages")).to_contain_text("Approval counted: 1 of 2")
    expect(first.locator("#quorum")).to_contain_text("user:ana")
    expect(first.locator("#disabled-reason")).to_contain_text("You already approved")
    expect(first.get_by_role("button", name="Approve exactly this proposal")).to_be_disabled()
    second = new_page()
    login(second, base, "bo")
    second.goto(f"{base}/approvals/?assigned=me")
    second.get_by_role("link", name=checkpoint.pk).click()
    expect(second.locator("#quorum")).to_contain_text("Who still may approve: user:bo")
    screenshot(second, "approval-quorum")
    _approve(second, "Checked by bo.")
    second.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    expect(second.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)
    assert Decision.objects.get(checkpoint=checkpoint).approvers == ["user:ana", "user:bo"]


def test_an_open_page_shows_a_colleagues_counted_approval_without_a_reload(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Quorum 2, two approvers in two browsers: bo has the proposal open (typing a reason)
    when ana approves in hers. Within seconds bo's page shows 1 of 2 and who approved, his
    buttons stay on and his typed reason stays; his approval then meets the quorum. Before,
    the count only showed on reload."""
    make_user("ana", "north", "approver")
    make_user("bo", "north", "approver")
    ApprovalPolicy.objects.create(
        tenant="north", name="two-of", capability="reserve_part", quorum=2
    )
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    checkpoint = checkpoint_of(run)
    base = live_server.url
    second = new_page()
    login(second, base, "bo")
    second.goto(f"{base}/approvals/{checkpoint.pk}/")
    expect(second.locator("#quorum")).to_contain_text("Approvals: 0 of 2")
    second.get_by_label(REASON).fill("Checked by bo.")
    first = new_page()
    login(first, base, "ana")
    first.goto(f"{base}/approvals/{checkpoint.pk}/")
    _approve(first, "Checked by ana.")
    expect(first.locator("main .messages")).to_contain_text("Approval counted: 1 of 2")
    quorum = second.locator("#quorum")
    expect(quorum).to_contain_text("Approvals: 1 of 2", timeout=12_000)
    expect(quorum).to_contain_text("user:ana")
    expect(quorum).to_contain_text("Checked by ana.")
    expect(second.locator("#checkpoint-progress")).to_contain_text("approved by user:ana")
    expect(second.get_by_label(REASON)).to_have_value("Checked by bo.")
    approve = second.get_by_role("button", name="Approve exactly this proposal")
    expect(approve).to_be_enabled()
    approve.click()
    second.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    assert Decision.objects.get(checkpoint=checkpoint).approvers == ["user:ana", "user:bo"]


def test_an_email_link_leads_to_the_exact_proposal_and_its_approval(
    live_server: Any, new_page: Any, operator: Any, settings: Any, tmp_path: Path
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    settings.FIELDOPS_BASE_URL = live_server.url
    ana = make_user("ana", "north", "approver")
    ana.email = "ana@example.test"
    ana.save(update_fields=["email"])
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    checkpoint = checkpoint_of(run)
    assert notify.deliveries_send_due() == 1
    [mail_file] = list(tmp_path.iterdir())
    text = mail_file.read_text()
    assert "To: ana@example.test" in text
    link = re.search(r"(http://\S+/approvals/\S+/)", text)
    assert link is not None and checkpoint.pk in link.group(1)
    page = new_page()
    page.goto(link.group(1))
    # Nothing is decided from a link: it asks to sign in, then shows the proposal.
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill("pw-ana")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(rf"/approvals/{checkpoint.pk}/"))
    expect(page.locator("#proposal-hash")).to_have_text(checkpoint.proposal_hash)
    _approve(page, "Followed the email; the proposal is right.")
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    expect(page.locator("#live-state")).to_have_text("COMPLETED", timeout=15_000)


def test_the_requester_sees_a_disabled_approve_button_with_the_reason(
    live_server: Any, new_page: Any, world: None
) -> None:
    make_user("lead", "north", "operator", "approver")
    run = make_run(principal="user:lead", namespace="live")
    checkpoint = checkpoint_of(run)
    page = new_page()
    login(page, live_server.url, "lead")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    button = page.get_by_role("button", name="Approve exactly this proposal")
    expect(button).to_be_disabled()
    expect(page.locator("#disabled-reason")).to_contain_text(
        "You requested this run; someone else must approve it."
    )
    screenshot(page, "approval-requester-disabled")


def test_a_cancelled_checkpoint_page_says_who_cancelled_and_when(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    checkpoint = checkpoint_of(waiting)
    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="part found locally")
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    expect(page.locator("#closed-note")).to_contain_text("cancelled by user:operator at")
    expect(page.locator("#closed-note")).to_contain_text("part found locally")
    expect(page.get_by_text("Exactly what will be sent")).to_have_count(0)
    expect(page.locator("#decide")).to_have_count(0)
    screenshot(page, "approval-cancelled")


def test_an_open_proposal_says_by_itself_when_its_run_is_cancelled_meanwhile(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """An approver reviewing a proposal (typing a reason) while an operator cancels the
    run: the page says so within seconds, without a reload, and the buttons turn off; what
    was typed stays. Before, Approve stayed enabled until it was pressed and refused."""
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    page.get_by_label(REASON).fill("Checked the part number.")
    approve = page.get_by_role("button", name="Approve exactly this proposal")
    expect(approve).to_be_enabled()
    runs.run_cancel(run_id=str(waiting.pk), by_ref="user:operator", reason="part found locally")
    notice = page.locator("#checkpoint-closed")
    expect(notice).to_contain_text("cancelled by user:operator at", timeout=10_000)
    expect(notice).to_contain_text("part found locally")
    expect(page.locator("#checkpoint-status")).to_have_text("CANCELLED")
    expect(approve).to_be_disabled()
    expect(page.get_by_role("button", name="Decline")).to_be_disabled()
    expect(page.get_by_label(REASON)).to_have_value("Checked the part number.")
    expect(notice.get_by_role("link", name=re.compile("Reload"))).to_be_visible()


def test_a_refused_decline_keeps_the_requested_change_and_the_reason(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """A decline refused for its input (a blank reason, a change value too long) comes back
    with the requested change as typed, its section open, and the reason as typed."""
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint_of(waiting).pk}/")
    page.get_by_label(REASON).fill("   ")
    page.locator("details.change summary").click()
    page.get_by_label("quantity").fill("2")
    page.get_by_role("button", name="Decline").click()
    expect(page.locator("#decide-refusal")).to_contain_text("needs a reason")
    expect(page.locator("details.change")).to_have_attribute("open", "")
    expect(page.get_by_label("quantity")).to_have_value("2")

    page.get_by_label(REASON).fill("Two are needed for this unit.")
    page.get_by_label("location_id").evaluate("el => el.removeAttribute('maxlength')")
    page.get_by_label("location_id").fill("x" * 200)
    page.get_by_role("button", name="Decline").click()
    expect(page.locator("#decide-refusal")).to_contain_text("at most")
    expect(page.get_by_label(REASON)).to_have_value("Two are needed for this unit.")
    expect(page.get_by_label("quantity")).to_have_value("2")
    assert not Decision.objects.filter(checkpoint=checkpoint_of(waiting)).exists()


def test_enter_in_a_requested_change_field_never_approves(
    live_server: Any, new_page: Any, approver: Any, operator: Any
) -> None:
    """Enter in a text field submits with the form's first button, Approve: an approver who
    typed a requested change and pressed Enter got the unchanged proposal approved and
    reserved. It is refused instead, nothing is decided, and the form comes back as typed
    so that Decline sends the change."""
    # The service van is delegated to this run: a change may name it.
    waiting = make_run(
        principal="user:operator",
        requested_by=operator,
        namespace="live",
        scope=["LOC-N1", "LOC-N2", "effect:reserve_part"],
    )
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    page.get_by_label(REASON).fill("The service van has one on board.")
    page.locator("details.change summary").press("Enter")
    page.get_by_label("location_id").fill("LOC-N2")
    page.get_by_label("location_id").press("Enter")
    expect(page.locator("#decide-form-error")).to_contain_text("Decline")
    expect(page.locator("#decide-form-error")).to_be_focused()
    assert not Decision.objects.filter(checkpoint=checkpoint).exists()
    expect(page.locator("details.change")).to_have_attribute("open", "")
    expect(page.get_by_label("location_id")).to_have_value("LOC-N2")
    expect(page.get_by_label(REASON)).to_have_value("The service van has one on board.")
    page.get_by_role("button", name="Decline").click()
    page.wait_for_url(re.compile(rf"/runs/{waiting.pk}/"))
    declined = "Declined with a requested change (location_id = LOC-N2)"
    expect(page.get_by_text(declined)).to_be_visible()
    decision = Decision.objects.get(checkpoint=checkpoint)
    assert decision.requested_change == {"location_id": "LOC-N2"}


def test_a_requested_location_outside_the_runs_scope_is_refused_with_the_form_as_typed(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """A decline asking for a location the run was never delegated was recorded, and the run
    then ended escalated (repeated_denial): it could never reserve there. The field suggests
    the run's own locations and says which they are; another is refused, naming them,
    nothing is decided, and the form comes back as typed to be corrected."""
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    page.locator("details.change summary").click()
    expect(page.locator("#change-location_id-hint")).to_have_text(
        "This run may use only LOC-N1: it could never reserve anywhere else."
    )
    expect(page.locator("#change-location_id-options option")).to_have_count(1)
    page.get_by_label(REASON).fill("Take it from the van.")
    page.get_by_label("location_id").fill("LOC-N2")
    page.get_by_label("quantity").fill("2")
    page.get_by_role("button", name="Decline").click()
    refusal = page.locator("#decide-refusal")
    expect(refusal).to_contain_text("'LOC-N2' is not a location this run may use")
    expect(refusal).to_contain_text("it may use only LOC-N1")
    # The keyboard starts at the refused field, described by the refusal.
    expect(page.get_by_label("location_id")).to_be_focused()
    expect(page.locator("details.change")).to_have_attribute("open", "")
    expect(page.get_by_label("location_id")).to_have_value("LOC-N2")
    expect(page.get_by_label("location_id")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("quantity")).to_have_value("2")
    expect(page.get_by_label(REASON)).to_have_value("Take it from the van.")
    assert not Decision.objects.filter(checkpoint=checkpoint).exists()
    screenshot(page, "approval-location-out-of-scope")

    page.get_by_label("location_id").fill("")
    page.get_by_role("button", name="Decline").click()
    page.wait_for_url(re.compile(rf"/runs/{waiting.pk}/"))
    expect(page.locator("main .messages")).to_contain_text(
        "Declined with a requested change (quantity = 2)"
    )
    assert Decision.objects.get(checkpoint=checkpoint).requested_change == {"quantity": "2"}


def test_a_decision_sent_after_the_session_ended_says_so_on_the_login_page(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """The session ends while the approver writes a reason (it expired, or they logged out
    in another tab): Approve led to a bare login page, and after signing in to the same
    proposal with an empty reason, with no word that nothing had been approved. The login
    page says so; a failed sign-in there keeps the username typed."""
    checkpoint = checkpoint_of(waiting)
    base = live_server.url
    page = new_page()
    login(page, base, "approver")
    page.goto(f"{base}/approvals/{checkpoint.pk}/")
    page.get_by_label(REASON).fill("Checked against the work order.")
    page.context.clear_cookies(name="sessionid")
    page.get_by_role("button", name="Approve exactly this proposal").click()
    page.wait_for_url(re.compile(r"/login/\?next="))
    expect(page.locator("main .messages")).to_contain_text(
        "Your session had ended, so what you sent was not applied."
    )
    page.get_by_label("Username").fill("approver")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-error")).to_be_visible()
    expect(page.get_by_label("Username")).to_have_value("approver")
    page.get_by_label("Password").fill("pw-approver")
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(re.compile(rf"/approvals/{checkpoint.pk}/$"))
    expect(page.locator("#checkpoint-status")).to_have_text("PENDING")
    expect(page.locator("main .messages")).to_have_count(0)
    assert not Decision.objects.filter(checkpoint=checkpoint).exists()


def test_log_out_says_it_signed_out_and_nothing_of_a_session_that_ended(
    live_server: Any, new_page: Any, approver: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "approver")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"/login/"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    expect(page.locator("main .messages")).to_have_text("You are signed out.")
    page.reload()  # said once
    expect(page.locator("main .messages")).to_have_count(0)


def test_the_decision_history_says_it_shows_the_newest_and_finds_an_older_one_by_run(
    live_server: Any, new_page: Any, approver: Any, operator: Any, monkeypatch: Any
) -> None:
    """The history showed the newest 100 decisions and said nothing of the rest: an older
    decision was nowhere to be found. It says so, and a run id finds it."""
    from approvals import selectors
    from tests.helpers import approve

    monkeypatch.setattr(selectors, "HISTORY_LIMIT", 2)
    oldest, *_ = runs_ = [
        make_run(principal="user:operator", requested_by=operator, namespace="live")
        for _ in range(3)
    ]
    for run in runs_:
        approve(run, approver, reason=f"Checked {run.short_id}.")
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/history/")
    expect(page.locator("#decisions-capped")).to_contain_text("The newest 2 are shown")
    expect(page.get_by_text(f"Checked {oldest.short_id}.")).to_have_count(0)
    search = page.get_by_role("search", name="Find decisions by run").get_by_label("Run id")
    search.fill(oldest.short_id)
    search.press("Enter")
    expect(page.get_by_text(f"Checked {oldest.short_id}.")).to_be_visible()
    expect(page.locator("#decisions-capped")).to_have_count(0)
    search.fill("not-hex")
    search.press("Enter")
    expect(page.locator("#h-q-error")).to_contain_text("A run id is hexadecimal")
    expect(search).to_be_focused()


def test_an_operator_finds_the_question_their_run_asks_from_the_navigation_and_answers_it(
    live_server: Any, new_page: Any, operator: Any, settings: Any
) -> None:
    """A run that asks its requester a question waited on a page nobody was led to: the
    requester had no list of their questions. The navigation counts them and leads there."""
    settings.FIELDOPS_EXECUTION = "inprocess"
    base = live_server.url
    page = new_page()
    login(page, base, "operator")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Questions for you", exact=True)).to_be_visible()
    page.get_by_text("Start a run", exact=True).click()
    start = page.locator("#start-run form")
    start.get_by_label("Scenario").select_option("clarify")
    start.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    run = Run.objects.get()
    expect(page.locator("#live-state")).to_have_text("WAITING_HUMAN", timeout=15_000)

    page.goto(f"{base}/")
    nav.get_by_role("link", name="Questions for you 1 waiting").click()
    expect(page.get_by_role("heading", name="Questions for you")).to_be_visible()
    screenshot(page, "questions-for-you")
    page.get_by_role("link", name="Which depot should supply the part?").click()
    page.get_by_label("Your answer").fill("LOC-N1")
    page.get_by_role("button", name="Answer").click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
    expect(page.locator(".messages")).to_contain_text("Answer recorded; the run continues from it.")
    assert Decision.objects.get(checkpoint__run=run, verdict="ANSWER").answer == "LOC-N1"

    nav.get_by_role("link", name="Questions for you", exact=True).click()
    expect(page.locator(".empty")).to_contain_text("No question is waiting for your answer.")
    expect(nav.locator(".nav-count")).to_have_count(0)


def test_an_approval_whose_run_ended_at_a_closed_gate_never_says_the_run_was_cancelled(
    live_server: Any, new_page: Any, approver: Any, catalog_admin: Any, waiting: Run
) -> None:
    """The deployment gate is closed; one approver approves in one tab (the page warned
    that nothing will be sent), the run's dispatch is denied and the run ends ESCALATED.
    The approval page and a decision sent from a second tab opened before said "The run
    was cancelled; nothing will be dispatched": nobody cancelled it. They say it ended."""
    from catalog import services as catalog
    from runs.engine import runner

    catalog.capability_gate_set(
        capability_id="reserve_part",
        version="1.0.0",
        open_gate=False,
        reviewer=catalog_admin,
        reason="supplier incident",
    )
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    url = f"{live_server.url}/approvals/{checkpoint.pk}/"
    page.goto(url)
    other = page.context.new_page()
    other.goto(url)
    expect(page.locator("#gate-closed")).to_be_visible()
    _approve(page, "the spare is needed")
    page.wait_for_url(re.compile(r"/runs/"))
    runner.advance(str(waiting.pk), worker="test")
    waiting.refresh_from_db()
    assert waiting.state not in ("CANCELLED", "WAITING_HUMAN"), waiting.state
    other.get_by_label(REASON).fill("declining from the other tab")
    other.get_by_role("button", name="Decline").click()
    refusal = other.locator("main")
    expect(refusal).to_contain_text(f"The run ended ({waiting.state}")
    expect(refusal).not_to_contain_text("cancelled")
    page.goto(url)
    expect(page.locator("#closed-note")).to_contain_text(f"The run ended ({waiting.state}")
    expect(page.locator("main")).not_to_contain_text("cancelled")


def test_back_to_an_approval_just_approved_shows_it_decided(
    live_server: Any, new_page: Any, approver: Any, waiting: Run
) -> None:
    """Back from the run page an approval leads to showed the approval page from the
    browser's cache: PENDING, the run WAITING_HUMAN, the Approve button offered again.
    Back now reloads it: the approval as it now is, no decision form."""
    checkpoint = checkpoint_of(waiting)
    page = new_page()
    login(page, live_server.url, "approver")
    page.goto(f"{live_server.url}/approvals/{checkpoint.pk}/")
    _approve(page, "the part is needed")
    page.wait_for_url(re.compile(r"/runs/"))
    page.go_back()
    page.wait_for_url(f"{live_server.url}/approvals/{checkpoint.pk}/")
    checkpoint.refresh_from_db()
    assert checkpoint.status != "PENDING"
    expect(page.locator("main")).to_contain_text(checkpoint.status)
    expect(page.get_by_role("button", name="Approve exactly this proposal")).to_have_count(0)
