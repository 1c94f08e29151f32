"""The diff classifier: each change class of the seed's change table, and its requirements."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capabilities import check_inventory, read_equipment, reserve_part, search_manual
from capabilities.reviewed import REVIEWED_VERSIONS
from catalog.domain.diff import (
    CHANGE_TABLE,
    ChangeClass,
    diff_contracts,
    diff_definitions,
    side_by_side,
    structural_changes,
)

REVIEWED = {c.ref: c for c in REVIEWED_VERSIONS}


def d(contract: Any) -> dict[str, Any]:
    return copy.deepcopy(contract.as_dict())


def classes(left: dict[str, Any], right: dict[str, Any]) -> set[ChangeClass]:
    return {c.change_class for c in diff_contracts(left, right).changes}


def test_identical_versions_need_nothing():
    result = diff_contracts(d(search_manual.CONTRACT), d(search_manual.CONTRACT))
    assert result.identical and not result.changes
    assert result.summary() == ["The two versions are identical: nothing to replay or migrate."]


def test_a_description_clarification_needs_selection_replay_and_smoke_tests_only():
    result = diff_contracts(d(read_equipment.CONTRACT), d(REVIEWED["read_equipment@1.0.1"]))
    assert result.classes == (ChangeClass.DESCRIPTION_ONLY,)
    req = result.requires()
    assert req["selection_replay"] == ["yes"]
    assert req["adapter_tests"] == ["smoke"]
    assert not result.needs_new_approval
    assert not result.quarantine_waiting_runs


def test_ten_passages_and_a_relevance_field_are_optional_read_fields():
    result = diff_contracts(d(search_manual.CONTRACT), d(REVIEWED["search_manual@1.1.0"]))
    assert result.classes == (ChangeClass.OPTIONAL_READ_FIELD,)
    paths = {c.path: c.why for c in result.changes}
    assert (
        "new optional field 'relevance'"
        in paths["output_schema.properties.passages.items.properties.relevance"]
    )
    assert "maxItems 3 -> 10" in paths["output_schema.properties.passages.maxItems"]
    assert result.requires()["state_handling"] == ["reader compatibility"]
    assert not result.needs_new_approval


def test_a_new_error_code_is_an_error_code_split():
    result = diff_contracts(d(check_inventory.CONTRACT), d(REVIEWED["check_inventory@1.1.0"]))
    by_path = {c.path: c.change_class for c in result.changes}
    assert by_path["errors.CONFLICT"] is ChangeClass.ERROR_CODE_SPLIT
    # A reworded meaning is description only; matching by code keeps the rest unchanged.
    assert by_path["errors.STALE.meaning"] is ChangeClass.DESCRIPTION_ONLY
    assert len(result.changes) == 2
    assert "map waiting runs" in result.requires()["state_handling"]


def test_changed_retry_budget_is_an_error_code_split():
    left = d(check_inventory.CONTRACT)
    right = copy.deepcopy(left)
    right["errors"][0]["retry_budget"] = 3
    assert classes(left, right) == {ChangeClass.ERROR_CODE_SPLIT}


def test_the_tabletop_v2_reservation_changes_effect_idempotency_and_authority():
    result = diff_contracts(d(reserve_part.CONTRACT), d(REVIEWED["reserve_part@2.0.0"]))
    by_path = {c.path: c.change_class for c in result.changes}
    assert by_path["input_schema.properties.allow_alternate_slot"] is ChangeClass.ADDED_EFFECT_FIELD
    assert by_path["intent"] is ChangeClass.ADDED_EFFECT_FIELD
    assert by_path["idempotency.retention_s"] is ChangeClass.CHANGED_IDEMPOTENCY
    assert by_path["timeout_stages.acknowledgement.inference"] is ChangeClass.CHANGED_IDEMPOTENCY
    assert by_path["reconciliation.read"] is ChangeClass.CHANGED_AUTHORITY
    assert by_path["scope.audience"] is ChangeClass.CHANGED_AUTHORITY
    assert result.needs_new_approval
    assert result.quarantine_waiting_runs
    text = " ".join(result.summary())
    assert "new approvals required" in text
    assert "Quarantine waiting runs" in text


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("effect_class", "read_only_observation", ChangeClass.CHANGED_AUTHORITY),
        ("requires_approval", False, ChangeClass.CHANGED_AUTHORITY),
        ("owner", "someone else", ChangeClass.CHANGED_AUTHORITY),
        ("compensation", {"available": True}, ChangeClass.CHANGED_IDEMPOTENCY),
        ("family", "inventory", ChangeClass.UNCLASSIFIED),
        ("audit", {}, ChangeClass.UNCLASSIFIED),
    ],
)
def test_top_level_fields_of_an_effect(field, value, expected):
    left = d(reserve_part.CONTRACT)
    right = copy.deepcopy(left)
    right[field] = value
    assert classes(left, right) == {expected}


def test_an_added_operational_effect_is_an_added_effect_field():
    left = d(search_manual.CONTRACT)
    right = copy.deepcopy(left)
    right["operational_effects"] = [*left["operational_effects"], "billing"]
    assert classes(left, right) == {ChangeClass.ADDED_EFFECT_FIELD}
    right["operational_effects"] = []
    assert classes(left, right) == {ChangeClass.UNCLASSIFIED}


def test_breaking_read_schema_changes_are_never_lightly_classified():
    left = d(search_manual.CONTRACT)
    required = copy.deepcopy(left)
    required["input_schema"]["properties"]["edition"] = {"type": "string"}
    required["input_schema"]["required"].append("edition")
    found = diff_contracts(left, required).changes
    assert {c.change_class for c in found} == {ChangeClass.UNCLASSIFIED}
    removed = copy.deepcopy(left)
    del removed["output_schema"]["properties"]["retrieved_at"]
    assert classes(left, removed) == {ChangeClass.UNCLASSIFIED}
    retyped = copy.deepcopy(left)
    retyped["input_schema"]["properties"]["query"]["type"] = "integer"
    assert classes(left, retyped) == {ChangeClass.UNCLASSIFIED}


def test_different_capabilities_are_never_an_upgrade():
    result = diff_contracts(d(search_manual.CONTRACT), d(check_inventory.CONTRACT))
    assert not result.same_capability
    assert "never an upgrade" in result.summary()[0]


def test_unclassified_is_at_least_as_strict_as_every_table_row():
    strict = CHANGE_TABLE[ChangeClass.UNCLASSIFIED]
    assert strict.new_approval and strict.quarantine_waiting_runs
    assert strict.selection_replay == "full review"


def test_structural_changes_group_whole_subtrees():
    changes = structural_changes({"a": {"x": 1}}, {"a": {"x": 1}, "b": {"y": {"z": 2}}})
    assert changes == [("b", "added", None, {"y": {"z": 2}})]


def test_discovered_definitions_only_classify_their_description_lightly():
    left = {"name": "t", "description": "one", "inputSchema": {"type": "object"}}
    right = {
        "name": "t",
        "description": "two",
        "inputSchema": {"type": "object", "properties": {"q": {}}},
        "annotations": {"readOnlyHint": True},
    }
    result = diff_definitions(left, right)
    by_path = {c.path: c.change_class for c in result.changes}
    assert by_path["description"] is ChangeClass.DESCRIPTION_ONLY
    assert by_path["inputSchema.properties"] is ChangeClass.UNCLASSIFIED
    assert by_path["annotations"] is ChangeClass.UNCLASSIFIED


def test_side_by_side_aligns_lines_by_path():
    rows = side_by_side(d(check_inventory.CONTRACT), d(REVIEWED["check_inventory@1.1.0"]))
    status = {r.path: r.status for r in rows}
    assert status["errors.CONFLICT.code"] == "added"
    assert status["errors.STALE.meaning"] == "changed"
    assert status["errors.DENIED.code"] == "same"
    assert status["version"] == "changed"


def test_execution_and_unknown_fields_of_definitions_are_never_lightly_classified():
    left = {
        "name": "t",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "optional"},
    }
    right = {
        **left,
        "execution": {"taskSupport": "required"},
        "x-vendor": 1,
        "icons": [{"src": "a"}],
    }
    by_path = {c.path: c for c in diff_definitions(left, right).changes}
    assert by_path["execution.taskSupport"].change_class is ChangeClass.UNCLASSIFIED
    assert "task support" in by_path["execution.taskSupport"].why
    assert by_path["x-vendor"].change_class is ChangeClass.UNCLASSIFIED
    assert "does not know" in by_path["x-vendor"].why
    assert by_path["icons"].change_class is ChangeClass.DESCRIPTION_ONLY
