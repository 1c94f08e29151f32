"""Each version's adapter and double behave as its own contract says (not a shared stub)."""

from __future__ import annotations

from capabilities import registry
from capabilities.base import schema_errors
from tests.capabilities.test_enforcement import inv, svc

QUERY = {"query": "seal weep impeller part", "family": "pump-fixture"}


def test_search_manual_1_1_returns_scored_passages_up_to_ten(world):
    new = registry.dispatch(
        inv("search_manual", {**QUERY, "max_passages": 10}, version="1.1.0"), svc()
    )
    assert new.ok and new.data["passages"]
    assert all(0 <= p["relevance"] <= 1 for p in new.data["passages"])
    contract = registry.contract_for("search_manual", "1.1.0")
    assert contract is not None and not schema_errors(contract.output_schema, dict(new.data))


def test_search_manual_1_0_keeps_its_own_schema_and_refuses_ten(world):
    old = registry.dispatch(inv("search_manual", dict(QUERY), version="1.0.0"), svc())
    assert old.ok and not any("relevance" in p for p in old.data["passages"])
    ten = registry.dispatch(
        inv("search_manual", {**QUERY, "max_passages": 10}, version="1.0.0"), svc()
    )
    assert not ten.ok and ten.error == "INVALID_ARGUMENT" and ten.stage == "pre_dispatch"


def test_check_inventory_revision_change_is_stale_in_1_0_and_conflict_in_1_1(world):
    args = {"part_id": "A17", "location_id": "LOC-N1"}
    always = [{"point": "revision_changed", "capability": "check_inventory", "on_call": 0}]
    old = registry.dispatch(inv("check_inventory", args, version="1.0.0"), svc(always))
    assert (old.ok, old.error, old.attempts) == (False, "STALE", 2)
    new = registry.dispatch(inv("check_inventory", args, version="1.1.0"), svc(always))
    assert (new.ok, new.error, new.attempts) == (False, "CONFLICT", 2)
    assert registry.contract_for("check_inventory", "1.0.0").error("CONFLICT") is None


def test_read_equipment_1_0_1_reads_the_same_record_under_its_own_contract(world):
    a = registry.dispatch(inv("read_equipment", {"equipment_id": "EQ-17"}, version="1.0.0"), svc())
    b = registry.dispatch(inv("read_equipment", {"equipment_id": "EQ-17"}, version="1.0.1"), svc())
    assert a.ok and b.ok and a.data["family"] == b.data["family"]
    assert (
        registry.contract_for("read_equipment", "1.0.1").digest
        != registry.contract_for("read_equipment", "1.0.0").digest
    )


def test_an_unnamed_or_unimplemented_version_is_denied_before_dispatch(world):
    for version in ("", "9.9.9"):
        outcome = registry.dispatch(inv("search_manual", dict(QUERY), version=version), svc())
        assert (outcome.ok, outcome.error, outcome.stage) == (False, "DENIED", "pre_dispatch")
    assert not registry.dispatchable("reserve_part", "2.0.0")
