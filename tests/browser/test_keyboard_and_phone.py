"""The console driven as outside testers drive it: with the keyboard only (Tab, Shift+Tab,
Enter, Space, Escape, arrow keys) and at a phone's width (375 x 740). Each test names one
thing such a person met and that was fixed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from operations import saved_views
from runs.models import Run
from tests.browser_support import login
from tests.conftest import make_user
from tests.helpers import bulk_cancel_in_progress, make_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 375, "height": 740}


def tab_to(page: Any, control: Any, most: int = 80) -> None:
    """Press Tab until ``control`` has the focus, as a keyboard user reaches it."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if has_focus(control):
            return
    pytest.fail(f"Tab never reached {control}")


def has_focus(control: Any) -> bool:
    return bool(control.evaluate("el => el === document.activeElement"))


@pytest.fixture
def waiting(operator: Any) -> Run:
    return make_run(principal="user:operator", requested_by=operator, namespace="live")


def test_escape_closes_the_saved_views_menu_and_gives_the_focus_back_to_its_summary(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The saved-views menu in the top bar opened with Enter stayed open on Escape, and the
    keyboard user inside it had no way back but Tab through every view."""
    saved_views.saved_view_create(
        tenant="north", by_ref="user:operator", page="runs", name="waiting", query={}
    )
    page = new_page()
    login(page, live_server.url, "operator")
    menu = page.locator("details.saved-views")
    summary = menu.locator("summary")
    tab_to(page, summary)
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("open", "")
    page.keyboard.press("Tab")
    assert has_focus(menu.get_by_role("link", name="Runs: waiting"))
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")
    assert has_focus(summary)
    assert page.url == f"{live_server.url}/"  # nothing was opened
    # Escape on the summary of an open menu closes it too.
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("open", "")
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")
    assert has_focus(summary)


def test_escape_closes_the_disclosure_the_focus_is_in_and_leaves_what_was_typed(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    """Every <details> of the console closes on Escape from inside it, the focus on its
    summary: "Start a run" on the runs list (what was chosen stays for when it is opened
    again) and a run's component set on the run page."""
    page = new_page()
    login(page, live_server.url, "operator")
    start = page.locator("#start-run")
    tab_to(page, start.locator(":scope > summary"))
    page.keyboard.press("Enter")
    location = start.get_by_label("Location")
    tab_to(page, location)
    page.keyboard.press("ArrowDown")
    chosen = location.input_value()
    assert chosen != location.locator("option").first.get_attribute("value")
    page.keyboard.press("Escape")
    expect(start).not_to_have_attribute("open", "")
    assert has_focus(start.locator(":scope > summary"))
    page.keyboard.press("Space")
    expect(location).to_have_value(chosen)

    page.goto(f"{live_server.url}/runs/{waiting.pk}/")
    components = page.locator("#run-components")
    tab_to(page, components.locator("summary"))
    page.keyboard.press("Enter")
    expect(components).to_have_attribute("open", "")
    page.keyboard.press("Escape")
    expect(components).not_to_have_attribute("open", "")
    assert has_focus(components.locator("summary"))


def page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def phone_page(new_page: Any, live_server: Any, username: str) -> Any:
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, username)
    return page


def test_a_long_saved_view_name_keeps_the_open_menu_inside_a_phone_screen(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """A view named with underscores and no space (as filters are often named) widened the
    open saved-views menu, and with it the whole page, past the phone's right edge."""
    name = "north_site_waiting_human_reserve_part_older_than_one_hour"
    saved_views.saved_view_create(
        tenant="north", by_ref="user:operator", page="runs", name=name, query={}
    )
    page = phone_page(new_page, live_server, "operator")
    summary = page.locator("details.saved-views summary")
    tab_to(page, summary)
    page.keyboard.press("Enter")
    link = page.get_by_role("link", name=f"Runs: {name}")
    expect(link).to_be_visible()
    assert page_width(page) <= PHONE["width"]
    assert link.evaluate("el => el.getBoundingClientRect().right") <= PHONE["width"]


def test_the_bulk_cancel_result_fits_a_phone_its_table_scrolling_in_its_box(
    live_server: Any, new_page: Any, waiting: Run
) -> None:
    """The per-run result of "Cancel selected runs" was a bare table: on a phone the page
    itself scrolled sideways, the top bar and the text a half-empty strip beside it."""
    page = phone_page(new_page, live_server, "operator")
    tab_to(page, page.get_by_label(f"Select run {waiting.short_id}"))
    page.keyboard.press("Space")
    tab_to(page, page.get_by_label("Reason (recorded on every cancelled run)"))
    page.keyboard.type("duplicate of an older request")
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs/cancel/result/**")
    table = page.locator("main table")
    expect(table).to_contain_text("applied")
    assert page_width(page) <= PHONE["width"]
    assert table.evaluate("t => getComputedStyle(t.parentElement).overflowX") == "auto"
    # The box that scrolls is reached by the keyboard (fieldops.js marks it a tab stop).
    expect(table.locator("..")).to_have_attribute("tabindex", "0")


def press_and_load(page: Any, key: str) -> None:
    """Press ``key`` on what has the focus and wait for the page it sends the browser to."""
    with page.expect_navigation():
        page.keyboard.press(key)
    page.wait_for_load_state()


def test_after_creating_a_token_the_keyboard_starts_at_the_token_shown_once(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The page with the new secret ("copy it now; it is not shown again") put the focus
    back at the top of the page: nothing said a token was made, and a keyboard user had
    to Tab through the top bar to find it. It starts at the new token's heading now."""
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/api/tokens/")
    tab_to(page, page.get_by_label("Name (what integration uses it)"))
    page.keyboard.type("nightly export")
    press_and_load(page, "Enter")
    heading = page.get_by_role("heading", name="New token “nightly export”")
    expect(heading).to_be_visible()
    assert has_focus(heading)


def _revoke_confirmation_by_keyboard(live_server: Any, new_page: Any, operator: Any) -> Any:
    """The operator's token "old importer", its Revoke… reached with Tab and pressed."""
    from api.tokens import token_create

    token_create(user=operator, name="old importer")
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/api/tokens/")
    tab_to(page, page.get_by_role("link", name="Revoke old importer…"))
    press_and_load(page, "Enter")
    return page


def test_a_revoked_token_is_said_by_name_after_the_page_reloads(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """Revoke sent the user back to the same list without a word: a screen-reader or
    keyboard user at the top of the page again did not know whether anything happened.
    Revoke… leads to a confirmation, focus on its question; Confirm is reached with Tab."""
    from api.models import ApiToken

    page = _revoke_confirmation_by_keyboard(live_server, new_page, operator)
    question = page.get_by_role("heading", name="Revoke the token “old importer”?")
    assert has_focus(question)
    assert ApiToken.objects.get(name="old importer").revoked_at is None
    tab_to(page, page.get_by_role("button", name="Confirm: revoke “old importer”"))
    press_and_load(page, "Enter")
    said = re.compile(r"Token “old importer” \(fo_\w+_…\) revoked: the API refuses it")
    expect(page.locator("main .messages")).to_have_text(said)
    expect(page.locator("#live-announcer")).to_have_text(said)
    assert ApiToken.objects.get(name="old importer").revoked_at is not None


def test_cancel_on_the_revoke_confirmation_from_the_keyboard_revokes_nothing(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    from api.models import ApiToken

    page = _revoke_confirmation_by_keyboard(live_server, new_page, operator)
    tab_to(page, page.get_by_role("link", name="Cancel"))
    press_and_load(page, "Enter")
    assert page.url == f"{live_server.url}/api/tokens/"
    expect(page.locator("tr[data-token]")).to_have_attribute("data-status", "active")
    assert ApiToken.objects.get(name="old importer").revoked_at is None


def test_pausing_an_operation_from_the_keyboard_says_it_was_paused(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """The "Pause the operation" button (and Resume, Cancel) came back to the same page without a
    word: only a badge changed, which someone at the top of the page did not hear."""
    operation = bulk_cancel_in_progress(reason="wrong filter", total=3)
    page = new_page()
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/operations/{operation.pk}/")
    tab_to(page, page.get_by_role("button", name="Pause the operation"))
    press_and_load(page, "Enter")
    said = f"Operation {operation.short_id} paused"
    expect(page.locator("main .messages")).to_contain_text(said)
    expect(page.locator("#live-announcer")).to_contain_text(said)
    tab_to(page, page.get_by_role("button", name="Resume the operation"))
    press_and_load(page, "Enter")
    expect(page.locator("#live-announcer")).to_contain_text(
        f"Operation {operation.short_id} resumed"
    )


def test_the_top_bar_keeps_api_tokens_and_log_out_apart_on_a_phone(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """With a longer user name, "API tokens" broke over two lines on a phone and its second
    half sat a space away from "Log out", both underlined: it read as one link "tokens Log
    out", two targets a finger could not tell apart. Each stays whole, and the two are
    kept apart (WCAG 2.5.8: 24 px between the centres of small targets)."""
    make_user("catalog-reviewer", "north", "catalog-admin")
    page = phone_page(new_page, live_server, "catalog-reviewer")
    tokens = page.locator(".whoami").get_by_role("link", name="API tokens")
    log_out = page.locator(".whoami").get_by_role("button", name="Log out")
    for control in (tokens, log_out):
        assert control.evaluate("el => el.getClientRects().length") == 1
    a, b = tokens.bounding_box(), log_out.bounding_box()
    assert a is not None and b is not None
    same_line = abs(a["y"] - b["y"]) < a["height"]
    if same_line:
        assert b["x"] - (a["x"] + a["width"]) >= 8
    assert page_width(page) <= PHONE["width"]


def test_who_saved_a_view_deletes_it_from_the_saved_views_menu(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    """A saved view could be deleted by who saved it (POST saved-views-delete), but no page
    offered it: a view saved by mistake stayed in every colleague's menu for good. The
    menu offers Delete beside one's own views only."""
    for by, name in (("user:operator", "mine"), ("user:approver", "theirs")):
        saved_views.saved_view_create(
            tenant="north", by_ref=by, page="runs", name=name, query={"state": "FAILED"}
        )
    page = new_page()
    login(page, live_server.url, "operator")
    menu = page.locator("details.saved-views")
    tab_to(page, menu.locator("summary"))
    page.keyboard.press("Enter")
    expect(menu.get_by_role("button", name="Delete view Runs: theirs")).to_have_count(0)
    delete = menu.get_by_role("button", name="Delete view Runs: mine")
    tab_to(page, delete)
    press_and_load(page, "Enter")
    expect(page.locator("main .messages")).to_have_text("View “mine” deleted.")
    expect(page.locator("#live-announcer")).to_have_text("View “mine” deleted.")
    page.locator("details.saved-views summary").click()
    expect(page.locator("details.saved-views li")).to_have_text(["Runs: theirs"])


def test_arrowing_through_a_catalog_filter_applies_only_the_choice_it_stops_on(
    live_server: Any, new_page: Any, catalog_admin: Any
) -> None:
    """The catalog filter applies itself when a choice changes, and a closed <select>
    changes with every arrow key: a keyboard user going down three options sent a request,
    an announcement and a history entry for each option passed over, so Back went through
    filters they never chose. Choices made in a row apply once, the one they stop on."""
    page = new_page()
    login(page, live_server.url, "catalog-admin")
    page.goto(f"{live_server.url}/catalog/")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if "/catalog/?" in r.url else None)
    before = page.evaluate("history.length")
    lifecycle = page.get_by_label("Lifecycle", exact=True)
    tab_to(page, lifecycle)
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    stopped_on = lifecycle.input_value()
    page.wait_for_url(f"**lifecycle={stopped_on}**")
    expect(page.locator("#catalog-table")).not_to_have_attribute("aria-busy", "true")
    assert len(sent) == 1, sent
    assert page.evaluate("history.length") == before + 1
    assert has_focus(lifecycle)
    page.go_back()
    page.wait_for_url(f"{live_server.url}/catalog/")


def test_a_tokens_utc_expiry_and_a_full_digest_are_readable_on_a_phone_and_by_keyboard(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """A token's exact UTC expiry and a catalog version's full digest were only in hover
    titles, which a phone or keyboard user never sees."""
    from api.tokens import token_create
    from catalog.models import CapabilityVersion

    token, _ = token_create(user=operator, name="old importer", lifetime_days=30)
    exact = token.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/api/tokens/")
    expect(page.locator(f'tr[data-token="{token.prefix}"]')).to_contain_text(f"({exact})")
    expect(page.get_by_text(f"({exact})")).to_be_visible()

    row = CapabilityVersion.objects.order_by("capability_id", "version").first()
    assert row is not None
    page.goto(f"{live_server.url}/catalog/")
    full = page.locator("code.hash", has_text=row.digest)
    expect(full).to_be_hidden()
    summary = page.locator("details.full-value > summary", has_text=row.digest[:16]).first
    tab_to(page, summary, most=400)
    page.keyboard.press("Enter")
    expect(full).to_be_visible()
    expect(full).to_have_text(row.digest)
