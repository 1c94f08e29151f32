from __future__ import annotations

from typing import Any

import pytest

from tests.browser_support import login
from tests.browser.test_layout import STICKING_OUT
from tests.helpers import approve, bulk_cancel_in_progress, make_run
from tests.runs.console.conftest import checkpoint_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_probe(live_server: Any, new_page: Any, approver: Any, operator: Any, catalog_admin: Any) -> None:
    waiting = make_run(principal="user:operator", requested_by=operator, namespace="live")
    done = make_run(principal="user:operator", requested_by=operator, namespace="live")
    approve(done, approver)
    op = bulk_cancel_in_progress(reason="x", total=1)
    pages = {
        "operator": ["/", f"/runs/{waiting.pk}/", f"/runs/{done.pk}/", f"/runs/{done.pk}/audit/",
                     f"/runs/{done.pk}/replay/decision/", f"/runs/{done.pk}/replay/simulation/", "/recovery/", "/runbooks/",
                     "/runbooks/ledger-outage/", "/runbooks/ambiguous-effect/", "/faultlab/", "/packet/", "/operations/", f"/operations/{op.pk}/",
                     "/operations/cancel/?world=live", "/api/tokens/"],
        "approver": ["/approvals/", f"/approvals/{checkpoint_of(waiting).pk}/", "/approvals/history/", "/approvals/deliveries/"],
        "catalog-admin": ["/catalog/", "/catalog/reserve_part/1.0.0/", "/catalog/reserve_part/1.0.0/retire/", "/catalog/import/",
                          "/catalog/servers/", "/catalog/diff/", "/catalog/rejections/", "/catalog/routing/", "/catalog/discovery/"],
    }
    for width in (320, 640):
        for user, paths in pages.items():
            page = new_page()
            page.set_viewport_size({"width": width, "height": 700})
            login(page, live_server.url, user)
            for path in paths:
                r = page.goto(live_server.url + path)
                w = page.evaluate("document.documentElement.scrollWidth")
                if w > width or r.status != 200:
                    print(width, user, path, r.status, w, page.evaluate(STICKING_OUT)[:5])
