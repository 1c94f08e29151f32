"""Capability versions that really run (issue 16): several versions of one capability live
at once, a run pins the newest ADMITTED one at creation and dispatches exactly it until it
ends, a DEPRECATED version serves only runs pinned to it, and a RETIRED one dispatches
nothing (two catalog admins retire it when it is risky).

The walkthrough reads like the issue: admit search_manual@1.1.0, run on it, drain 1.0.0,
retire it with two people, and watch what happens to the runs still pinned to it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from catalog import services
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion, Lifecycle
from runs import services as run_services
from runs.engine import effects as effect_steps
from runs.engine import runner
from runs.models import EffectAttempt, Event, Evidence, Run
from sim.world.models import ServiceRequest
from tests.helpers import approve, make_run

ANSWERS = {
    "task_transition": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
    "alternatives": ["keep search_manual 1.0.0", "human lookup"],
    "decision": "ADMIT_BOUNDED",
    "expiry": "expires on contract change (digest) or owner change",
    "reason": "ten scored passages help long procedures",
}
OUTAGE = [
    {"point": "after_commit_before_response", "capability": "reserve_part", "on_call": 1},
    {"point": "ledger_unavailable", "capability": "reserve_part", "on_call": 1},
]


def version(ref: str) -> CapabilityVersion:
    capability_id, _, v = ref.rpartition("@")
    return CapabilityVersion.objects.get(capability_id=capability_id, version=v)


def started_components(run: Run) -> dict[str, str]:
    return dict(Event.objects.get(run=run, type="run.started").payload["components"])


def manual_observations(run: Run) -> list[dict[str, Any]]:
    return [
        e.content
        for e in Evidence.objects.filter(run=run, kind="observation").order_by("created_at")
        if e.content.get("capability") == "search_manual"
    ]


def denial_reasons(run: Run) -> list[str]:
    return list(
        Event.objects.filter(run=run, type="proposal.denied")
        .order_by("sequence")
        .values_list("reason_code", flat=True)
    )


def retire(row: CapabilityVersion, user: Any, *, acknowledge: bool = True) -> CapabilityVersion:
    return services.capability_decide(
        version_id=row.pk,
        user=user,
        action="retire",
        reason="1.1.0 serves new runs",
        acknowledge=acknowledge,
    )


def test_walkthrough_admit_run_drain_and_retire_with_two_people(
    catalog_admin: Any, catalog_reviewer: Any, approver: Any, operator: Any
) -> None:
    # A run created before the admission pins 1.0.0 (the only admitted version then).
    before = make_run(advance=False)
    assert before.components["search_manual"].startswith("1.0.0#")

    services.capability_admit(
        version_id=version("search_manual@1.1.0").pk, user=catalog_admin, **ANSWERS
    )

    # A new run pins the newest admitted version, records it on run.started, completes on it.
    new = make_run()
    assert new.components["search_manual"].startswith("1.1.0#")
    assert started_components(new)["search_manual"] == new.components["search_manual"]
    approve(new, approver)
    new.refresh_from_db()
    assert new.state == "COMPLETED"
    [scored] = manual_observations(new)
    assert scored["ok"] and all("relevance" in p for p in scored["data"]["passages"])

    # The run created before still dispatches 1.0.0 (its own adapter: no relevance).
    runner.advance(str(before.pk), worker="test")
    approve(before, approver)
    before.refresh_from_db()
    assert before.state == "COMPLETED"
    assert started_components(before)["search_manual"].startswith("1.0.0#")
    [plain] = manual_observations(before)
    assert plain["ok"] and not any("relevance" in p for p in plain["data"]["passages"])

    # Two more runs pinned to 1.0.0 before it is deprecated: one waits to start, one holds
    # an unknown effect (committed, response lost, ledger down).
    waiting = _pinned_run_at_1_0_0(advance=False)
    unknown = _pinned_run_at_1_0_0(fault_plan=OUTAGE)
    approve(unknown, approver)
    unknown.refresh_from_db()
    attempt = EffectAttempt.objects.get(run=unknown)
    assert unknown.state == "ESCALATED" and attempt.unresolved

    # Deprecate 1.0.0: new runs get 1.1.0 only; runs pinned to 1.0.0 keep it.
    services.capability_decide(
        version_id=version("search_manual@1.0.0").pk,
        user=catalog_admin,
        action="deprecate",
        reason="drain to 1.1.0",
    )
    assert run_services.pinned_components()["search_manual"].startswith("1.1.0#")
    assert make_run(advance=False).components["search_manual"].startswith("1.1.0#")

    # Retire 1.0.0: a run is pinned and an effect is unknown, so two admins must agree.
    old = version("search_manual@1.0.0")
    page = _client(catalog_admin).get(reverse("catalog-retire", args=[old.pk])).content.decode()
    assert str(waiting.pk) in page and str(unknown.pk) in page
    assert "search_manual@1.1.0" in page and "pinned_runs" in page and "unknown_effects" in page
    with pytest.raises(Refusal) as info:
        retire(old, catalog_admin, acknowledge=False)
    assert info.value.code == "acknowledgement_required"
    requested = retire(old, catalog_admin)
    assert (
        requested.lifecycle == Lifecycle.DEPRECATED
        and requested.retire_requested_by == catalog_admin
    )
    with pytest.raises(Refusal) as info:
        retire(old, catalog_admin)
    assert info.value.code == "two_person_rule"
    retired = retire(old, catalog_reviewer)
    assert retired.lifecycle == Lifecycle.RETIRED
    decision = retired.decisions.get(action="retire")
    assert decision.details["requested_by"] == "user:catalog-admin"
    assert decision.details["confirmed_by"] == "user:catalog-reviewer"
    assert set(decision.details["risks"]) == {"pinned_runs", "unknown_effects"}

    # The run still pinned to 1.0.0 records the refusal; nothing is dispatched for it and it
    # never switches to 1.1.0.
    runner.advance(str(waiting.pk), worker="test")
    waiting.refresh_from_db()
    assert "capability_retired" in denial_reasons(waiting)
    assert not ServiceRequest.objects.filter(
        run_id=str(waiting.pk), capability="search_manual"
    ).exists()
    assert waiting.components["search_manual"].startswith("1.0.0#")

    # The unknown effect stays owned and reconcilable on the recovery page.
    recovery = _client(operator).get(reverse("recovery")).content.decode()
    assert attempt.pk in recovery
    reconciled = effect_steps.obligation_reconcile(attempt_id=attempt.pk, by_ref="user:operator")
    assert reconciled.status == EffectAttempt.Status.CONFIRMED


def _pinned_run_at_1_0_0(**kw: Any) -> Run:
    """A run pinned to search_manual@1.0.0 while 1.1.0 is the newest admitted version."""
    pins = run_services.pinned_components()
    old = version("search_manual@1.0.0")
    pins["search_manual"] = f"{old.version}#{old.digest[:16]}"
    return make_run(components=pins, **kw)


def _client(user: Any) -> Client:
    c = Client()
    c.force_login(user)
    return c
