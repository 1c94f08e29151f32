"""Catalog services: lifecycle steps and refusals, import, retirement, the effect gate.

Each refusal must leave the version exactly as it was and write no audit row.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from capabilities import search_manual
from capabilities.reviewed import REVIEWED_VERSIONS
from catalog import services
from catalog.domain.discovery import MAX_TOOLS, ImportRefused
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion, Lifecycle, LifecycleDecision, Source
from runs import services as run_services
from runs.engine import effects as effect_steps
from runs.models import EffectAttempt, Event
from sim.world.models import LedgerEntry
from tests.catalog.conftest import tool, tool_list
from tests.helpers import approve, make_run, manage_refused

ANSWERS = {
    "task_transition": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
    "alternatives": ["keep search_manual 1.0.0", "human lookup"],
    "decision": "ADMIT_BOUNDED",
    "expiry": "expires on contract change (digest) or owner change",
    "reason": "ten passages help long procedures; context budget reviewed",
}


def version(ref: str) -> CapabilityVersion:
    capability_id, _, v = ref.rpartition("@")
    return CapabilityVersion.objects.get(capability_id=capability_id, version=v)


def admit(row: CapabilityVersion, user: Any, **kw: Any) -> CapabilityVersion:
    return services.capability_admit(version_id=row.pk, user=user, **{**ANSWERS, **kw})


def decide(row: CapabilityVersion, user: Any, action: str, reason: str = "reviewed") -> Any:
    return services.capability_decide(version_id=row.pk, user=user, action=action, reason=reason)


def retire_by_two(row: CapabilityVersion, first: Any, second: Any, reason: str) -> Any:
    """A risky retirement (issue 16): one admin requests it, another confirms it."""
    for user in (first, second):
        row = services.capability_decide(
            version_id=row.pk, user=user, action="retire", reason=reason, acknowledge=True
        )
    return row


def snapshot(row: CapabilityVersion) -> tuple[Any, ...]:
    row.refresh_from_db()
    return (row.lifecycle, row.effect_gate_open, row.local_contract_ref, row.decisions.count())


def refused(code: str, fn: Any, *args: Any, **kw: Any) -> Refusal:
    with pytest.raises(Refusal) as info:
        fn(*args, **kw)
    assert info.value.code == code, info.value
    return info.value


def imported(user: Any, *tools: dict[str, Any], server: str = "mcp://remote.example") -> Any:
    return services.candidate_import(text=tool_list(*tools), server=server, user=user)


# -- sync --------------------------------------------------------------------------------
def test_sync_admits_dispatchable_contracts_and_stores_reviewed_candidates_as_discovered(world):
    assert version("reserve_part@1.0.0").lifecycle == Lifecycle.ADMITTED
    for contract in REVIEWED_VERSIONS:
        row = version(contract.ref)
        assert row.lifecycle == Lifecycle.DISCOVERED
        assert row.digest == contract.digest
        assert row.decisions.get().action == "record"
    assert services.catalog_sync() == []  # idempotent


# -- each lifecycle step -----------------------------------------------------------------
def test_admit_records_an_admission_record_from_the_local_contract(catalog_admin):
    row = admit(version("search_manual@1.1.0"), catalog_admin)
    assert row.lifecycle == Lifecycle.ADMITTED
    decision = row.decisions.get(action="admit")
    assert decision.reviewer == catalog_admin
    assert decision.reviewer_ref == "user:catalog-admin"
    assert decision.from_state == Lifecycle.DISCOVERED
    record = decision.admission
    assert record["task_transition"] == ANSWERS["task_transition"]
    assert record["effect_class"] == "read_only_observation"
    assert record["intent"] == search_manual.CONTRACT.intent
    assert record["non_intents"] == list(search_manual.CONTRACT.non_intents)
    assert record["operational_effects"] == ["access_audit"]
    assert record["alternatives"] == ANSWERS["alternatives"]
    assert record["expiry"] == ANSWERS["expiry"]
    assert decision.details["compared_with"] == "search_manual@1.0.0"
    assert decision.details["change_classes"] == ["optional_read_field"]
    assert decision.details["dispatchable"] is True
    # 1.1.0 has its own adapter: new runs now pin it (the newest admitted version).
    assert run_services.pinned_components()["search_manual"].startswith("1.1.0#")


def test_defer_then_admit_then_deprecate_then_retire(catalog_admin):
    row = version("read_equipment@1.0.1")
    assert decide(row, catalog_admin, "defer", "owner must confirm wording").lifecycle == "DEFERRED"
    assert admit(row, catalog_admin, task_transition="NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE")
    assert decide(row, catalog_admin, "deprecate", "superseded").lifecycle == "DEPRECATED"
    assert decide(row, catalog_admin, "retire", "drained").lifecycle == "RETIRED"
    steps = list(row.decisions.order_by("id").values_list("action", "from_state", "to_state"))
    assert steps == [
        ("record", "", "DISCOVERED"),
        ("defer", "DISCOVERED", "DEFERRED"),
        ("admit", "DEFERRED", "ADMITTED"),
        ("deprecate", "ADMITTED", "DEPRECATED"),
        ("retire", "DEPRECATED", "RETIRED"),
    ]
    assert all(
        d.reviewer == catalog_admin and d.reason for d in row.decisions.exclude(action="record")
    )


def test_reject_is_final(catalog_admin):
    row = version("reserve_part@2.0.0")
    decide(row, catalog_admin, "reject", "automatic slot substitution cannot be approved exactly")
    before = snapshot(row)
    refused("lifecycle_final", admit, row, catalog_admin, task_transition="A_B -> C_D")
    assert snapshot(row) == before


def test_deprecated_versions_leave_new_runs_but_not_runs_already_pinned(catalog_admin):
    pinned = make_run(advance=False)
    decide(version("check_inventory@1.0.0"), catalog_admin, "deprecate", "replacement coming")
    assert "check_inventory" not in run_services.pinned_components()
    assert "check_inventory" in pinned.components


# -- refusals ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ref", "action", "code"),
    [
        ("search_manual@1.1.0", "deprecate", "illegal_lifecycle_step"),
        ("search_manual@1.1.0", "retire", "illegal_lifecycle_step"),
        ("search_manual@1.0.0", "reject", "illegal_lifecycle_step"),
        ("search_manual@1.0.0", "defer", "illegal_lifecycle_step"),
        ("search_manual@1.0.0", "explode", "unknown_action"),
    ],
)
def test_illegal_lifecycle_steps_are_refused(catalog_admin, ref, action, code):
    row = version(ref)
    before = snapshot(row)
    refused(code, decide, row, catalog_admin, action)
    assert snapshot(row) == before


def test_admitting_an_admitted_version_is_illegal(catalog_admin):
    row = version("search_manual@1.0.0")
    refused("illegal_lifecycle_step", admit, row, catalog_admin)


def test_every_decision_needs_a_reason(catalog_admin):
    row = version("search_manual@1.1.0")
    before = snapshot(row)
    refused("reason_required", decide, row, catalog_admin, "defer", reason="   ")
    refused("reason_required", admit, row, catalog_admin, reason="")
    assert snapshot(row) == before


def test_an_incomplete_admission_record_is_refused(catalog_admin):
    row = version("search_manual@1.1.0")
    before = snapshot(row)
    refused("admission_incomplete", admit, row, catalog_admin, alternatives=[])
    refused("admission_incomplete", admit, row, catalog_admin, task_transition="make it work")
    assert snapshot(row) == before


def test_admitting_a_discovered_tool_without_a_local_contract_is_refused(
    catalog_admin, catalog_reviewer
):
    (row,) = imported(catalog_admin, tool("lookup_stock")).created
    before = snapshot(row)
    error = refused("no_local_contract", admit, row, catalog_reviewer)
    assert "discovery never activates a contract" in error.message
    refused("no_local_contract", admit, row, catalog_reviewer, local_ref="lookup_stock@1.0.0")
    assert snapshot(row) == before


def test_read_only_hint_contradicting_the_local_effect_classification_is_refused(
    catalog_admin, catalog_reviewer
):
    lying = tool("reserve_part", annotations={"readOnlyHint": True, "destructiveHint": False})
    (row,) = imported(catalog_admin, lying).created
    before = snapshot(row)
    error = refused(
        "hint_contradicts_local_classification",
        admit,
        row,
        catalog_reviewer,
        local_ref="reserve_part@1.0.0",
        task_transition="APPROVED_PROPOSAL -> RESERVED",
    )
    assert "readOnlyHint=true" in error.message
    assert "consequential_external_mutation" in error.message
    assert snapshot(row) == before
    # The hint never set anything: the candidate has no effect class of its own.
    assert row.contract == {} and row.effect_class == ""


def test_an_admin_cannot_admit_a_candidate_they_imported(catalog_admin, catalog_reviewer):
    (row,) = imported(catalog_admin, tool("search_manual")).created
    before = snapshot(row)
    error = refused("two_person_rule", admit, row, catalog_admin, local_ref="search_manual@1.1.0")
    assert "another catalog admin" in error.message
    assert snapshot(row) == before
    admitted = admit(row, catalog_reviewer, local_ref="search_manual@1.1.0")
    assert admitted.lifecycle == Lifecycle.ADMITTED
    assert admitted.local_contract_ref == "search_manual@1.1.0"
    # The mapped local contract was admitted by the same decision, with the same record.
    local = version("search_manual@1.1.0")
    assert local.lifecycle == Lifecycle.ADMITTED
    via = local.decisions.get(action="admit")
    assert via.details["via_candidate"] == row.ref
    assert via.admission["discovered_from"].startswith(row.ref)


def test_a_discovered_tool_cannot_become_a_trusted_control(catalog_admin, catalog_reviewer):
    (row,) = imported(catalog_admin, tool("ask_user")).created
    refused("trusted_control", admit, row, catalog_reviewer, local_ref="ask_user@1.0.0")


def test_trusted_controls_are_not_retired_in_the_catalog(catalog_admin):
    row = version("no_applicable_tool@1.0.0")
    before = snapshot(row)
    refused("trusted_control", decide, row, catalog_admin, "retire")
    refused("trusted_control", decide, row, catalog_admin, "deprecate")
    assert snapshot(row) == before


def test_a_stored_contract_that_disagrees_with_the_reviewed_source_is_not_admitted(
    catalog_admin,
):
    row = version("check_inventory@1.1.0")
    CapabilityVersion.objects.filter(pk=row.pk).update(digest="0" * 64)
    refused("contract_drift", admit, row, catalog_admin, task_transition="A_B -> C_D")


def test_a_retired_version_cannot_be_regained(catalog_admin, catalog_reviewer):
    row = version("read_equipment@1.0.0")
    # No admitted successor: retiring it needs two catalog admins (issue 16).
    retire_by_two(row, catalog_admin, catalog_reviewer, "replaced")
    for action in ("deprecate", "retire", "reject"):
        refused("lifecycle_final", decide, row, catalog_admin, action)
    refused("lifecycle_final", admit, row, catalog_admin, task_transition="A_B -> C_D")
    assert "read_equipment" not in run_services.pinned_components()


# -- import ------------------------------------------------------------------------------
def test_import_stores_candidates_only_with_source_digest_and_importer(catalog_admin):
    result = imported(
        catalog_admin,
        tool("search_manual", annotations={"readOnlyHint": True}),
        tool("inventory_admin", annotations={"destructiveHint": True}),
    )
    assert len(result.created) == 2
    for row in result.created:
        assert row.source == Source.DISCOVERED
        assert row.lifecycle == Lifecycle.DISCOVERED
        assert row.server == "mcp://remote.example"
        assert row.imported_by == catalog_admin
        assert row.contract == {}
        assert row.version == f"d-{row.digest[:16]}"
        assert row.definition["name"] == row.capability_id
        assert row.decisions.get().action == "import"
    manual, admin_tool = result.created
    assert manual.hints == {"readOnlyHint": True}
    assert manual.discovery["local_contract_exists"] is True
    assert "Mixes read, reservation" in admin_tool.discovery["previously_rejected"]
    # Nothing discovered enters a run.
    assert not any(v.startswith("d-") for v in run_services.pinned_components().values())


def test_the_same_definition_twice_is_unchanged(catalog_admin):
    imported(catalog_admin, tool("lookup_stock"))
    again = imported(catalog_admin, tool("lookup_stock"))
    assert again.created == [] and len(again.unchanged) == 1
    assert CapabilityVersion.objects.filter(capability_id="lookup_stock").count() == 1


def test_a_changed_definition_under_the_same_name_is_a_new_candidate(
    catalog_admin, catalog_reviewer
):
    (first,) = imported(catalog_admin, tool("search_manual")).created
    admit(first, catalog_reviewer, local_ref="search_manual@1.1.0")
    changed = tool("search_manual", description="Search manuals, now with web results.")
    result = imported(catalog_admin, changed)
    (second,) = result.created
    assert second.pk != first.pk
    assert second.lifecycle == Lifecycle.DISCOVERED  # never an upgrade
    assert second.local_contract_ref == ""
    assert second.discovery["earlier_definitions"] == [first.ref]
    # The changed remote schema pauses the old mapping; the old definition is untouched.
    first.refresh_from_db()
    assert result.paused == [first]
    assert first.lifecycle == Lifecycle.DEPRECATED
    assert first.decisions.get(action="deprecate").details == {"superseded_by": second.ref}
    assert first.definition["description"] == "search_manual (remote)"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"tools": "all of them"}',
        json.dumps({"tools": [{"name": "'; DROP TABLE catalog_capabilityversion; --"}]}),
        json.dumps({"tools": [{"name": "x", "inputSchema": {"type": "object"}, "z": 1}] * 2}),
        '{"tools": [' + "[" * 50_000 + "]" * 50_000 + "]}",
        json.dumps({"tools": [tool(f"t{i}") for i in range(MAX_TOOLS + 1)]}),
        json.dumps({"tools": [tool("x", description="\x00")]}),
    ],
)
def test_hostile_imports_change_nothing(catalog_admin, text):
    rows = CapabilityVersion.objects.count()
    decisions = LifecycleDecision.objects.count()
    with pytest.raises(ImportRefused) as info:
        services.candidate_import(text=text, server="mcp://x", user=catalog_admin)
    assert info.value.errors
    assert CapabilityVersion.objects.count() == rows
    assert LifecycleDecision.objects.count() == decisions


def test_import_needs_a_named_server(catalog_admin):
    with pytest.raises(ImportRefused, match="name the server"):
        services.candidate_import(text=tool_list(tool("x")), server="<b>", user=catalog_admin)


# -- retirement ---------------------------------------------------------------------------
OUTAGE = [
    {"point": "after_commit_before_response", "capability": "reserve_part", "on_call": 1},
    {"point": "ledger_unavailable", "capability": "reserve_part", "on_call": 1},
]


def _escalated_with_unknown_effect(approver: Any) -> Any:
    run = make_run(fault_plan=OUTAGE)
    approve(run, approver)
    run.refresh_from_db()
    attempt = EffectAttempt.objects.get(run=run)
    assert run.state == "ESCALATED" and attempt.status == EffectAttempt.Status.UNRESOLVED
    return run, attempt


def test_retiring_a_version_with_unknown_effects_keeps_them_owned_and_reconcilable(
    catalog_admin, catalog_reviewer, approver
):
    run, attempt = _escalated_with_unknown_effect(approver)
    row = retire_by_two(
        version("reserve_part@1.0.0"), catalog_admin, catalog_reviewer, "incident: retire"
    )
    assert row.lifecycle == Lifecycle.RETIRED
    details = row.decisions.get(action="retire").details
    assert details["unknown_effect_count"] == 1
    assert details["unknown_effects"][0] == {
        "attempt": attempt.pk,
        "run": str(run.pk),
        "status": "UNRESOLVED",
    }
    # Retirement leaves new runs at once ...
    assert "reserve_part" not in run_services.pinned_components()
    # ... while the unknown effect stays visible and is reconciled from the ledger.
    assert EffectAttempt.objects.get(pk=attempt.pk).unresolved
    reconciled = effect_steps.obligation_reconcile(attempt_id=attempt.pk, by_ref="user:op")
    assert reconciled.status == EffectAttempt.Status.CONFIRMED
    assert Event.objects.filter(run=run, type="effect.reconciled").exists()
    assert LedgerEntry.objects.filter(run_id=str(run.pk)).count() == 1


def test_a_run_pinned_to_a_retired_version_is_denied_when_it_tries_to_use_it(
    catalog_admin, catalog_reviewer, approver
):
    run = make_run()
    assert run.state == "WAITING_HUMAN"
    retire_by_two(
        version("reserve_part@1.0.0"), catalog_admin, catalog_reviewer, "withdrawn mid-run"
    )
    approve(run, approver)
    denials = list(
        Event.objects.filter(run=run, type="proposal.denied").values_list("reason_code", flat=True)
    )
    assert "capability_retired" in denials
    assert not LedgerEntry.objects.filter(run_id=str(run.pk)).exists()
    assert not EffectAttempt.objects.filter(run=run).exists()
    # Later decisions of that run no longer see the retired capability.
    last = Event.objects.filter(run=run, type="proposal.emitted").order_by("-sequence").first()
    assert "reserve_part" not in last.payload["visible"]
    assert last.payload["exposure"]["excluded"]["reserve_part@1.0.0"].startswith("RETIRED")


# -- the effect gate ---------------------------------------------------------------------
def test_the_effect_gate_closes_without_retiring(catalog_admin, approver):
    run = make_run()
    assert run.state == "WAITING_HUMAN"
    row = services.capability_gate(
        version_id=version("reserve_part@1.0.0").pk,
        user=catalog_admin,
        open_gate=False,
        reason="incident: repeated reservation attempts",
    )
    assert not row.effect_gate_open and row.lifecycle == Lifecycle.ADMITTED
    assert row.decisions.filter(action="close_gate", reviewer=catalog_admin).exists()
    approve(run, approver)
    denials = Event.objects.filter(run=run, type="proposal.denied")
    assert "effect_gate_closed" in set(denials.values_list("reason_code", flat=True))
    assert not LedgerEntry.objects.filter(run_id=str(run.pk)).exists()


def test_a_read_has_no_effect_gate(catalog_admin):
    row = version("search_manual@1.0.0")
    before = snapshot(row)
    refused(
        "no_effect_gate",
        services.capability_gate,
        version_id=row.pk,
        user=catalog_admin,
        open_gate=False,
        reason="x",
    )
    assert snapshot(row) == before


def test_a_pasted_tool_whose_schema_is_no_json_schema_is_refused_alone(catalog_admin):
    """A pasted list with one tool whose schema breaks the JSON Schema meta-schema (a
    type that does not exist; ``required`` not a list): that tool is refused with where
    and why, the others are imported. Draft-07 schemas are checked as draft-07."""
    result = imported(
        catalog_admin,
        tool("good_lookup"),
        tool("typo", inputSchema={"type": "object", "properties": {"a": {"type": "strnig"}}}),
        tool("req", outputSchema={"type": "object", "required": "a"}),
        tool(
            "draft7",
            inputSchema={
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "definitions": {"a": {"type": "string"}},
                "properties": {"a": {"$ref": "#/definitions/a"}},
            },
        ),
    )
    reasons = {r.name: r.reasons for r in result.refused}
    assert set(reasons) == {"typo", "req"}
    assert reasons["typo"][0].startswith("inputSchema is not a valid JSON Schema: at properties/a")
    assert reasons["req"][0].startswith("outputSchema is not a valid JSON Schema: at required")
    assert not CapabilityVersion.objects.filter(capability_id__in=["typo", "req"]).exists()
    assert CapabilityVersion.objects.filter(capability_id="draft7").exists()


def test_catalog_discover_refuses_a_timeout_not_in_digits_with_one_line_in_a_real_process():
    # float() reads these as 3 and 1000 seconds; before, they started a discovery.
    for timeout in ("\u0663", "1e3"):
        line = manage_refused("catalog_discover", "--all", "--timeout", timeout)
        assert line.endswith(
            f"error: argument --timeout: {timeout!r} is not a decimal number "
            "(the digits 0-9 and one '.')"
        ), line
