"""How the console looks, measured in Chromium: a link styled as a dangerous button looks
like the dangerous buttons."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser_support import login
from tests.conftest import make_user
from tests.helpers import make_run

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
