"""A catalog reason or admission answer over its limit is refused (``reason_too_long``,
``answer_too_long``) with the limit and its length, never cut: no decision row, no state
change, and the form comes back as typed with the refusal beside the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from catalog import services
from catalog.domain import lifecycle
from catalog.domain.lifecycle import Refusal
from catalog.models import DriftKind, LifecycleDecision, TenantEffectGate, ToolDrift, ToolServer
from tests.catalog.conftest import ADMISSION, as_shown, client_for
from tests.catalog.conftest import version_row as version
from tests.catalog.test_field_errors import Page, assert_beside

pytestmark = pytest.mark.django_db

LIMIT = services.MAX_REASON
OVER = "x" * (LIMIT + 1)
AT_LIMIT = "y" * LIMIT
TOLD = f"at most {LIMIT} characters and this one has {LIMIT + 1}"


def _drift(**extra: Any) -> ToolDrift:
    return ToolDrift.objects.create(
        server_label="mcp://manuals.example.invalid",
        capability_id="search_manual",
        kind=DriftKind.GONE,
        before=version("search_manual@1.0.0"),
        **extra,
    )


# -- services ----------------------------------------------------------------------------
@pytest.mark.parametrize("action", ["deprecate", "retire"])
def test_a_decision_over_the_limit_is_refused_and_one_at_it_is_recorded_whole(
    catalog_admin, action
):
    target = version("search_manual@1.0.0")
    before = LifecycleDecision.objects.count()
    with pytest.raises(Refusal) as refused:
        services.capability_decide(
            version_id=target.pk, user=catalog_admin, action=action, reason=OVER, acknowledge=True
        )
    assert refused.value.code == "reason_too_long" and TOLD in refused.value.message
    target.refresh_from_db()
    assert target.lifecycle == "ADMITTED" and target.retire_requested_by is None
    assert LifecycleDecision.objects.count() == before
    services.capability_decide(
        version_id=target.pk, user=catalog_admin, action=action, reason=AT_LIMIT, acknowledge=True
    )
    assert LifecycleDecision.objects.latest("id").reason == AT_LIMIT


def test_gate_changes_over_the_limit_are_refused_and_change_no_gate(catalog_admin, operator):
    target = version("reserve_part@1.0.0")
    before = LifecycleDecision.objects.count()
    with pytest.raises(Refusal) as refused:
        services.capability_gate(
            version_id=target.pk, user=catalog_admin, open_gate=False, reason=OVER
        )
    assert refused.value.code == "reason_too_long"
    with pytest.raises(Refusal):
        services.tenant_gate_set(
            capability_id=target.capability_id,
            version=target.version,
            tenant="north",
            open_gate=False,
            reviewer=operator,
            reason=OVER,
        )
    target.refresh_from_db()
    assert target.effect_gate_open and not TenantEffectGate.objects.exists()
    assert LifecycleDecision.objects.count() == before
    gate = services.tenant_gate_set(
        capability_id=target.capability_id,
        version=target.version,
        tenant="north",
        open_gate=False,
        reviewer=operator,
        reason=AT_LIMIT,
    )
    assert gate.reason == AT_LIMIT and LifecycleDecision.objects.latest("id").reason == AT_LIMIT


def test_a_drift_review_over_the_limit_is_refused_and_one_at_it_is_kept_whole(catalog_admin):
    drift = _drift()
    with pytest.raises(Refusal) as refused:
        services.drift_resolve(drift_id=drift.pk, user=catalog_admin, reason=OVER)
    assert refused.value.code == "reason_too_long"
    drift.refresh_from_db()
    assert drift.resolved_at is None and drift.resolution == ""
    services.drift_resolve(drift_id=drift.pk, user=catalog_admin, reason=AT_LIMIT)
    drift.refresh_from_db()
    assert drift.resolution == AT_LIMIT


def test_admission_answers_over_their_limits_are_refused_not_cut() -> None:
    answers = {
        "contract": {},
        "local_ref": "search_manual@1.1.0",
        "reviewer": "user:a",
        "task_transition": ADMISSION["task_transition"],
        "alternatives": ["keep 1.0.0"],
        "decision": "ADMIT_BOUNDED",
        "expiry": ADMISSION["expiry"],
    }
    for bad, field in (
        ({"alternatives": ["a" * (lifecycle.MAX_ALTERNATIVE_CHARS + 1)]}, "alternatives"),
        ({"alternatives": ["alt"] * (lifecycle.MAX_ALTERNATIVES + 1)}, "alternatives"),
        ({"expiry": "e" * (lifecycle.MAX_EXPIRY_CHARS + 1)}, "expiry"),
    ):
        with pytest.raises(Refusal) as refused:
            lifecycle.admission_record(**{**answers, **bad})
        assert (refused.value.code, refused.value.field) == ("answer_too_long", field)
    whole = lifecycle.admission_record(
        **{
            **answers,
            "alternatives": ["a" * lifecycle.MAX_ALTERNATIVE_CHARS] * lifecycle.MAX_ALTERNATIVES,
            "expiry": "e" * lifecycle.MAX_EXPIRY_CHARS,
        }
    )
    assert whole.expiry == "e" * lifecycle.MAX_EXPIRY_CHARS
    assert whole.alternatives == ("a" * lifecycle.MAX_ALTERNATIVE_CHARS,) * 10


# -- console forms ---------------------------------------------------------------------------
def test_a_lifecycle_decision_over_the_limit_comes_back_as_typed(catalog_admin):
    target = version("search_manual@1.0.0")
    before = LifecycleDecision.objects.count()
    response = client_for(catalog_admin).post(
        reverse("catalog-decide", args=[target.pk]),
        as_shown(target, {"action": "deprecate", "reason": OVER}),
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "reason-deprecate", "Refused (reason_too_long)", TOLD)
    assert page.by_id["reason-deprecate"]["value"] == OVER
    target.refresh_from_db()
    assert target.lifecycle == "ADMITTED" and LifecycleDecision.objects.count() == before


@pytest.mark.parametrize(
    ("change", "field_id", "told"),
    [
        ({"reason": OVER}, "admit-reason", TOLD),
        ({"expiry": "e" * 301}, "expiry", "at most 300 characters and this one has 301"),
        ({"alternatives": "a" * 201}, "alternatives", "the longest 201"),
    ],
)
def test_an_admission_answer_over_its_limit_comes_back_as_typed(
    catalog_admin, change, field_id, told
):
    target = version("search_manual@1.1.0")
    before = LifecycleDecision.objects.count()
    typed = as_shown(target, {**ADMISSION, **change})
    response = client_for(catalog_admin).post(reverse("catalog-admit", args=[target.pk]), typed)
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, field_id, told, "Nothing was changed.")
    assert page.by_id["admit-reason"]["value"] == typed["reason"]
    assert page.by_id["expiry"]["value"] == typed["expiry"]
    assert typed["alternatives"] in response.content.decode()
    target.refresh_from_db()
    assert target.lifecycle == "DISCOVERED" and LifecycleDecision.objects.count() == before


def test_a_retirement_over_the_limit_comes_back_as_typed(catalog_admin):
    target = version("read_equipment@1.0.0")
    response = client_for(catalog_admin).post(
        reverse("catalog-retire", args=[target.pk]),
        as_shown(target, {"reason": OVER, "acknowledge": "1"}),
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "retire-reason", "Refused (reason_too_long)")
    assert page.by_id["retire-reason"]["value"] == OVER
    target.refresh_from_db()
    assert target.retire_requested_by is None


def test_a_gate_change_over_the_limit_comes_back_as_typed(catalog_admin, operator):
    target = version("reserve_part@1.0.0")
    response = client_for(catalog_admin).post(
        reverse("catalog-gate", args=[target.pk]), {"open": "0", "reason": OVER}
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "gate-reason", "Refused (reason_too_long)", TOLD)
    assert page.by_id["gate-reason"]["value"] == OVER
    response = client_for(operator).post(
        reverse("catalog-tenant-gate", args=[target.pk]), {"open": "0", "reason": OVER}
    )
    assert response.status_code == 400
    page = Page(response.content.decode())
    assert_beside(page, "tenant-gate-reason", "Refused (reason_too_long)", TOLD)
    assert page.by_id["tenant-gate-reason"]["value"] == OVER
    target.refresh_from_db()
    assert target.effect_gate_open and not TenantEffectGate.objects.exists()


@pytest.mark.parametrize("on_server_page", [False, True])
def test_a_drift_review_over_the_limit_comes_back_as_typed_on_its_page(
    catalog_admin, on_server_page
):
    server = ToolServer.objects.create(
        name="manuals", transport="http", url="https://manuals.example.invalid/mcp"
    )
    drift = _drift(tool_server=server)
    back = reverse("catalog-server", args=[server.pk]) if on_server_page else "/catalog/"
    response = client_for(catalog_admin).post(
        reverse("catalog-drift-resolve", args=[drift.pk]), {"reason": OVER, "next": back}
    )
    assert response.status_code == 400
    html = response.content.decode()
    page = Page(html)
    field_id = f"drift-reason-{drift.pk}"
    assert_beside(page, field_id, "Refused (reason_too_long)", TOLD)
    assert page.by_id[field_id]["value"] == OVER
    # Sent again from this page, the review returns to the page it came from.
    assert f'name="next" value="{back}"' in html
    heading = "Tool server <code>manuals</code>" if on_server_page else "Capability catalog"
    assert f"<h1>{heading}</h1>" in html
    drift.refresh_from_db()
    assert drift.resolved_at is None and drift.resolution == ""


def test_the_runbook_gate_refuses_a_reason_over_the_limit_and_says_so(operator):
    target = version("reserve_part@1.0.0")
    response = client_for(operator).post(
        reverse("runbooks-gate", args=["tool-definition-drift"]),
        {"capability_id": target.capability_id, "version": target.version, "reason": OVER},
        follow=True,
    )
    assert "Refused (reason_too_long)" in response.content.decode()
    assert TOLD in response.content.decode()
    assert not TenantEffectGate.objects.exists()
