"""How the console looks, measured in Chromium: a link styled as a dangerous button looks
like the dangerous buttons; on a phone-width screen only the wide tables scroll sideways,
never the page."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from playwright.sync_api import expect

from operations.models import OperationItem
from runs.models import EffectAttempt
from runs.runbooks import BY_SLUG
from sim import faultlab
from tests.browser_support import login, screenshot
from tests.conftest import make_user
from tests.helpers import approve, bulk_cancel_in_progress, make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOOK = """el => {
  const s = getComputedStyle(el);
  return {background: s.backgroundColor, color: s.color, border: s.borderTopColor};
}"""
DANGER = {"background": "rgb(207, 34, 46)", "color": "rgb(255, 255, 255)"}  # --bad, white


def test_a_danger_link_looks_like_a_danger_button(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    make_user("catalog-admin", "north", "catalog-admin")
    page = new_page()
    login(page, live_server.url, "operator")
    button = page.get_by_role("button", name="Cancel selected runs")
    link = page.get_by_role("link", name="Cancel every run matching this filter…")
    expect(link).to_have_class("button danger")
    danger = button.evaluate(LOOK)
    assert {k: danger[k] for k in DANGER} == DANGER
    assert danger["border"] == DANGER["background"]
    assert link.evaluate(LOOK) == danger

    admin = new_page()
    login(admin, live_server.url, "catalog-admin")
    admin.goto(f"{live_server.url}/catalog/reserve_part/1.0.0/")
    assert admin.get_by_role("link", name="Retire…").evaluate(LOOK) == danger


PHONE = {"width": 375, "height": 800}
# The outermost elements that reach past the viewport's right edge, leaving out what lies
# inside a box that scrolls (or clips) on its own.
STICKING_OUT = """() => {
  const width = window.innerWidth;
  const contained = el => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
    }
    return false;
  };
  const out = [...document.body.querySelectorAll('*')].filter(
    el => el.getBoundingClientRect().right > width + 0.5 && !contained(el));
  return out.filter(el => !out.includes(el.parentElement)).map(el =>
    el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className ? '.' + el.className.replace(/ /g, '.') : '')
    + ' right=' + Math.round(el.getBoundingClientRect().right));
}"""


def test_at_phone_width_only_the_tables_scroll_sideways(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(make_run(principal="user:operator", requested_by=operator, namespace="live"), approver)
    faultlab.fixture_run_recorded(name=faultlab.FIXTURES[0].name, by_ref="user:operator")
    make_user("catalog-admin", "north", "catalog-admin")
    bulk_cancel_in_progress(reason="a long-running bulk cancel", total=3)
    pages = {
        "operator": {
            "runs": "/",
            "run": f"/runs/{run.pk}/",
            "operations": "/operations/",
            "faultlab": "/faultlab/",
            "review-packet": "/packet/",
        },
        "approver": {"approvals": "/approvals/", "decisions": "/approvals/history/"},
        "catalog-admin": {
            "catalog": "/catalog/",
            "rejections": "/catalog/rejections/",
            "routing": "/catalog/routing/",
        },
    }
    for username, paths in pages.items():
        page = new_page()
        page.set_viewport_size(PHONE)
        login(page, live_server.url, username)
        for name, path in paths.items():
            page.goto(f"{live_server.url}{path}")
            table = page.locator("main table").first
            expect(table).to_be_visible()
            page_width = page.evaluate("document.documentElement.scrollWidth")
            assert page_width <= PHONE["width"], (name, page_width, page.evaluate(STICKING_OUT))
            # The table is wider than the phone: it scrolls inside its own box.
            assert table.evaluate("t => t.scrollWidth > window.innerWidth"), name
            scroller = table.evaluate("t => getComputedStyle(t.parentElement).overflowX")
            assert scroller == "auto", (name, scroller)
            screenshot(page, f"phone-{name}")


def test_at_phone_width_the_other_wide_tables_scroll_in_their_box(
    live_server: Any, new_page: Any, operator: Any, approver: Any
) -> None:
    """The other pages with wide tables: a runbook's gates, intents, fixtures and events,
    an approval's evidence, a bulk cancel's sample, a ledger lookup's records and effect
    attempts, a run's full list of attempts, an operation's results (and the filter links
    above them) and a catalog diff stay phone-wide."""
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    done = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(done, approver)
    attempt = EffectAttempt.objects.get(run=done)
    make_user("catalog-admin", "north", "catalog-admin")
    operation = bulk_cancel_in_progress(reason="end of shift", total=1)
    OperationItem.objects.create(operation=operation, position=1, run=waiting)
    pages = {
        "operator": [f"/runbooks/{slug}/" for slug in BY_SLUG]
        + [
            "/operations/cancel/",
            f"/recovery/?q={attempt.idempotency_key}",
            f"/runs/{done.pk}/attempts/",
            f"/operations/{operation.pk}/",
        ],
        "approver": [f"/approvals/{checkpoint_of(waiting).pk}/"],
        "catalog-admin": ["/catalog/diff/"],
    }
    too_wide = _wider_than_a_phone(new_page, live_server, pages)
    assert not too_wide, too_wide


def _discovered_server_with_drift(admin: Any, tmp_path: Any) -> tuple[Any, Any]:
    """A stdio server (the SDK test server ``changing.py``) discovered, changed and
    discovered again: candidates, sightings, two discoveries and two drifts (one changed
    definition, one tool gone). Return the server and the changed candidate."""
    from catalog import servers
    from catalog.models import ToolDrift
    from tests.catalog.conftest import ChangingServer

    changing = ChangingServer(tmp_path / "state.json")
    server = servers.tool_server_register(
        user=admin, name="parts", transport="stdio", command=sys.executable, args_text=changing.args
    )
    assert servers.tool_server_discover(server_id=server.pk, user=admin).ok
    changing.set(description="Look up any part, with live supplier prices.", legacy=False)
    assert servers.tool_server_discover(server_id=server.pk, user=admin).ok
    changed = ToolDrift.objects.get(kind="changed").after
    assert ToolDrift.objects.filter(tool_server=server).count() == 2
    return server, changed


def test_at_phone_width_the_pages_first_seen_empty_keep_their_tables_in_their_box(
    live_server: Any,
    new_page: Any,
    operator: Any,
    approver: Any,
    settings: Any,
    tmp_path: Any,
) -> None:
    """With data in them: a tool server (discoveries, drift), the catalog's and the servers
    page's table of registered servers, a discovered candidate (sightings, drift, hints),
    API tokens and the approval notification deliveries (an email delivered, a webhook
    that failed)."""
    from api import tokens
    from approvals import notify
    from approvals.models import Delivery, WebhookEndpoint

    settings.FIELDOPS_MCP_STDIO_COMMANDS = [sys.executable]
    admin = make_user("catalog-admin", "north", "catalog-admin", "operator")
    server, candidate = _discovered_server_with_drift(admin, tmp_path)
    for name in ("parts inventory sync (nightly)", "ticketing bridge"):
        tokens.token_create(user=admin, name=name)
    approver.email = "approver.on.call@maintenance.example.test"
    approver.save(update_fields=["email"])
    # Nothing listens on port 9: the webhook's first attempt fails with a connection error.
    WebhookEndpoint.objects.create(
        tenant="north", name="ops-hook", url="http://127.0.0.1:9/hook", secret="s3cret"
    )
    make_run(principal="user:operator", requested_by=operator, namespace="live")
    assert notify.deliveries_send_due() == 2
    assert {d.status for d in Delivery.objects.all()} == {"DELIVERED", "PENDING"}

    pages = {
        "catalog-admin": [
            "/catalog/",
            "/catalog/servers/",
            f"/catalog/servers/{server.pk}/",
            f"/catalog/candidates/{candidate.pk}/",
            "/api/tokens/",
        ],
        "approver": ["/approvals/deliveries/"],
    }
    too_wide = _wider_than_a_phone(new_page, live_server, pages)
    assert not too_wide, too_wide


def _wider_than_a_phone(
    new_page: Any, live_server: Any, pages: dict[str, list[str]]
) -> list[tuple[str, int, Any]]:
    """(path, page width, what sticks out) of each page, opened by its user (``pages``:
    username -> paths) at phone width with a table showing, that is wider than the phone."""
    too_wide = []
    for username, paths in pages.items():
        page = new_page()
        page.set_viewport_size(PHONE)
        login(page, live_server.url, username)
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            expect(page.locator("main table").first).to_be_visible()
            page_width = page.evaluate("document.documentElement.scrollWidth")
            if page_width > PHONE["width"]:
                too_wide.append((path, page_width, page.evaluate(STICKING_OUT)))
    return too_wide


def test_at_phone_width_the_replay_tables_scroll_in_their_box(
    live_server: Any, new_page: Any, operator: Any
) -> None:
    """A run's decision replay (its per-decision diff) and execution simulation (the
    recorded and simulated rows of a simulation) stay phone-wide: their tables scroll in
    their own box."""
    run = make_run("unavailable_tool", principal="user:operator", requested_by=operator)
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/runs/{run.pk}/replay/simulation/")
    page.get_by_role("button", name="Simulate").click()
    expect(page.locator("main article table").first).to_be_visible()
    simulated = page.url.removeprefix(live_server.url)
    too_wide = _wider_than_a_phone(
        new_page, live_server, {"operator": [f"/runs/{run.pk}/replay/decision/", simulated]}
    )
    assert not too_wide, too_wide


def _answer_with(body: str) -> Any:
    """A Playwright route handler answering with the HTML ``body``."""
    return lambda route: route.fulfill(status=503, content_type="text/html", body=body)


def test_the_standalone_error_pages_fit_a_phone_as_the_console_does(
    live_server: Any, browser: Any
) -> None:
    """The 400, 500 and 503 pages are rendered without base.html (their context processors
    read a database that may be gone) and had no viewport meta: a phone laid them out
    980 px wide and shrank them, the 503's instructions unreadable without zooming."""
    from django.template import loader

    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        for name in ("400.html", "500.html", "503.html"):
            body = loader.render_to_string(name)
            page.route(f"{live_server.url}/{name}", _answer_with(body))
            page.goto(f"{live_server.url}/{name}")
            assert page.evaluate("window.innerWidth") == PHONE["width"], name
        page.goto(f"{live_server.url}/login/")  # the console's own pages, for comparison
        assert page.evaluate("window.innerWidth") == PHONE["width"]
    finally:
        context.close()


def test_at_400_percent_zoom_the_card_pages_do_not_scroll_sideways(
    live_server: Any, new_page: Any, operator: Any, approver: Any, catalog_admin: Any
) -> None:
    """A 1280-pixel screen zoomed to 400 % is 320 CSS pixels wide (the width WCAG's reflow
    criterion names). The run page, the approval page and a catalog version laid their
    cards in columns at least 320 pixels wide, wider than the room beside the page's
    padding: each page scrolled sideways by 20 pixels, on every line."""
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    pages = {
        "operator": [f"/runs/{run.pk}/"],
        "approver": [f"/approvals/{checkpoint_of(run).pk}/"],
        "catalog-admin": ["/catalog/reserve_part/1.0.0/"],
    }
    too_wide = []
    for username, paths in pages.items():
        page = new_page()
        page.set_viewport_size({"width": 320, "height": 700})
        login(page, live_server.url, username)
        for path in paths:
            page.goto(f"{live_server.url}{path}")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 320:
                too_wide.append((path, width, page.evaluate(STICKING_OUT)))
    assert not too_wide, too_wide
