"""Catalog admins follow the runbook step that is theirs. The tool-definition drift runbook's
review step is a catalog admin's (SPEC: they admit and review catalog entries), yet
/runbooks/ was a 403 for them and the catalog page linked it. They now read every runbook,
see the drift data and mark a drift reviewed from its step; the operator's steps show no
operator data and no operator form, and an operator action they post is refused (403,
nothing changed). Approvers stay out (SPEC: operators "follow incident runbooks")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from catalog.models import DriftKind, TenantEffectGate, ToolDrift
from runs.runbooks import RUNBOOKS
from tests.catalog.conftest import client_for
from tests.catalog.conftest import version_row as version

pytestmark = pytest.mark.django_db

DRIFT = reverse("runbooks-detail", args=["tool-definition-drift"])


def _drift() -> ToolDrift:
    return ToolDrift.objects.create(
        server_label="mcp://manuals.example.invalid",
        capability_id="search_manual",
        kind=DriftKind.GONE,
        before=version("search_manual@1.0.0"),
    )


def _nav(html: str) -> list[str]:
    menu = re.search(r'<nav aria-label="Main">.*?</nav>', html, re.S)
    assert menu
    return re.findall(r'<a href="[^"]*"[^>]*>([^<]+)', menu.group(0))


def test_a_catalog_admin_reads_every_runbook_and_sees_runbooks_in_the_menu(
    catalog_admin: Any,
) -> None:
    client = client_for(catalog_admin)
    listing = client.get(reverse("runbooks"))
    assert listing.status_code == 200
    assert "Runbooks" in _nav(listing.content.decode())
    for book in RUNBOOKS:
        page = client.get(reverse("runbooks-detail", args=[book.slug]))
        assert page.status_code == 200, book.slug
        html = page.content.decode()
        # No operator form, no operator data: the step says whose it is.
        assert 'action="/runbooks/' not in html and 'action="/runs/cancel/' not in html
        assert "Close gate and cancel its waiting runs" not in html
        assert "Ledger lookup by key" not in html and "Open the fault lab" not in html
        if any(set(step.data) - {"tool_drift"} for step in book.steps):
            assert "An operator does this step" in html, book.slug


def test_a_catalog_admin_marks_a_drift_reviewed_from_its_runbook_step(catalog_admin: Any) -> None:
    drift = _drift()
    client = client_for(catalog_admin)
    html = client.get(DRIFT).content.decode()
    assert f'data-drift="{drift.pk}"' in html
    assert f'action="{reverse("catalog-drift-resolve", args=[drift.pk])}"' in html
    assert html.count(f'name="next" value="{DRIFT}"') == 1  # at the review step only
    assert "Open the tool servers" in html
    done = client.post(
        reverse("catalog-drift-resolve", args=[drift.pk]),
        {"reason": "compared: the tool is gone, mapping stays paused", "next": DRIFT},
    )
    assert done.status_code == 302 and done["Location"] == DRIFT
    drift.refresh_from_db()
    assert drift.resolved_at is not None


def test_the_operator_gate_action_is_refused_to_a_catalog_admin_and_changes_nothing(
    catalog_admin: Any,
) -> None:
    row = version("search_manual@1.0.0")
    refused = client_for(catalog_admin).post(
        reverse("runbooks-gate", args=["ledger-outage"]),
        {"capability_id": row.capability_id, "version": row.version, "open": "0", "reason": "x"},
    )
    assert refused.status_code == 403
    html = refused.content.decode()
    assert "requires the operator role" in html and "Nothing was changed" in html
    assert not TenantEffectGate.objects.exists()


def test_an_operator_still_sees_every_step_and_an_approver_stays_out(
    operator: Any, approver: Any
) -> None:
    html = client_for(operator).get(reverse("runbooks-detail", args=["ledger-outage"]))
    text = html.content.decode()
    assert html.status_code == 200 and "An operator does this step" not in text
    assert 'action="/runbooks/ledger-outage/gate/"' in text or "No effect capability" in text
    assert "Runbooks" in _nav(text)
    denied = client_for(approver)
    assert denied.get(reverse("runbooks")).status_code == 403
    assert denied.get(DRIFT).status_code == 403
    assert "Runbooks" not in _nav(denied.get(reverse("runs-list")).content.decode())


def test_a_drift_review_refused_on_the_runbook_comes_back_there_as_typed(
    catalog_admin: Any,
) -> None:
    from catalog.services import MAX_REASON

    drift = _drift()
    over = "x" * (MAX_REASON + 1)
    refused = client_for(catalog_admin).post(
        reverse("catalog-drift-resolve", args=[drift.pk]), {"reason": over, "next": DRIFT}
    )
    assert refused.status_code == 400
    html = refused.content.decode()
    assert "<h1>Tool definition changed under an admitted mapping</h1>" in html
    assert "Refused (reason_too_long)" in html and f'value="{over}"' in html
    assert html.count(f'name="next" value="{DRIFT}"') == 1
    drift.refresh_from_db()
    assert drift.resolved_at is None
