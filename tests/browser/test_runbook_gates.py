"""A runbook's effect-gate rows in Chromium: each row's buttons are named by the words they
show and then by their version (WCAG 2.5.3), a gate form is sent once however often it is
clicked, and a refused change comes back with the reason as it was typed."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from catalog.models import CapabilityVersion, LifecycleDecision
from catalog.services import tenant_gate_open
from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUNBOOK = "/runbooks/ledger-outage/"


def _versions() -> list[CapabilityVersion]:
    rows = list(CapabilityVersion.objects.filter(capability_id="reserve_part"))
    assert len(rows) > 1  # several rows: the ones a screen reader must tell apart
    return rows


def test_each_close_gate_button_is_named_by_its_words_and_its_version(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}{RUNBOOK}")
    rows = _versions()
    buttons = page.get_by_role("button", name="Close gate")  # substring: every row's
    expect(buttons).to_have_count(len(rows))
    for row in rows:
        name = f"Close gate for reserve_part v{row.version}"
        button = page.get_by_role("button", name=name, exact=True)
        expect(button).to_have_count(1)
        expect(button).to_have_text("Close gate")  # the visible words start the name
        link = page.get_by_role(
            "link", name=f"Close gate and cancel its waiting runs… for reserve_part v{row.version}"
        )
        expect(link).to_have_count(1)
        expect(link).to_have_text("Close gate and cancel its waiting runs…")


def test_each_gate_reason_field_is_named_by_its_version(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Every row's reason field was named just "Reason": a screen reader listing the form
    fields heard the same name once per version, with nothing to tell the rows apart."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}{RUNBOOK}")
    for row in _versions():
        name = f"Reason to close the gate for reserve_part v{row.version}"
        field = page.get_by_role("textbox", name=name, exact=True)
        expect(field).to_have_count(1)
        expect(field).to_have_attribute("name", "reason")


def test_a_gate_form_is_sent_once_however_often_it_is_clicked(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    row = next(r for r in _versions() if r.lifecycle == "ADMITTED")
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}{RUNBOOK}")
    # The first post is answered 204 No Content, so the browser stays on this page (as it
    # does while a slow answer is on its way) and the test can look at the button.
    posts: list[str] = []

    def answer(route: Any) -> None:
        posts.append(route.request.post_data or "")
        route.fulfill(status=204)

    page.route("**/runbooks/ledger-outage/gate/", answer)
    form = page.locator("form").filter(has=page.locator(f'input[value="{row.version}"]'))
    form.get_by_label("Reason").fill("ledger outage: stop new reservations")
    button = page.get_by_role("button", name=f"Close gate for reserve_part v{row.version}")
    button.click()
    expect(button).to_be_disabled()
    expect(button).to_have_attribute("aria-busy", "true")
    button.click(force=True)  # impatient: a click on the busy button sends nothing
    form.get_by_label("Reason").press("Enter")  # nor does Enter in its reason
    page.wait_for_timeout(300)
    assert len(posts) == 1 and "reason=ledger+outage" in posts[0]
    assert tenant_gate_open(row, "north")  # the 204 was the test's, not the server's

    # Sent for real: the server closes the gate once and the next page's buttons work.
    page.unroute("**/runbooks/ledger-outage/gate/")
    page.goto(f"{live_server.url}{RUNBOOK}")
    form.get_by_label("Reason").fill("ledger outage: stop new reservations")
    button.click()
    expect(page.locator("main .messages")).to_contain_text("is closed: new dispatch stopped")
    assert not tenant_gate_open(row, "north")
    assert LifecycleDecision.objects.filter(version=row, action="close_tenant_gate").count() == 1
    reopen = page.get_by_role("button", name=f"Open gate for reserve_part v{row.version}")
    expect(reopen).to_be_enabled()


def test_a_refused_gate_change_shows_the_reason_as_typed_and_says_why(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The server refuses a reason holding U+202E (it would reverse the rest of the line
    wherever the reason is shown): the runbook comes back with the reason as typed in its
    row's field, marked invalid and focused, the refusal beside it naming the character."""
    row = next(r for r in _versions() if r.lifecycle == "ADMITTED")
    typed = "ledger outage \u202eseod ti"
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}{RUNBOOK}")
    form = page.locator("form").filter(has=page.locator(f'input[value="{row.version}"]'))
    form.get_by_label("Reason").fill(typed)
    page.get_by_role("button", name=f"Close gate for reserve_part v{row.version}").click()
    page.wait_for_load_state()
    field = form.get_by_label("Reason")
    expect(field).to_have_value(typed)
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    expect(form.get_by_role("alert")).to_contain_text(
        "U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in a reason"
    )
    assert tenant_gate_open(row, "north")
    assert not LifecycleDecision.objects.filter(version=row, action="close_tenant_gate").exists()
