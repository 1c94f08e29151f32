"""The enforcement suite: adapters called directly with hostile requests, no model at all.

Every denial must hold without any model-facing description.
"""

from __future__ import annotations

import datetime as dt

import pytest

from capabilities import registry, reserve_part
from capabilities.base import Invocation
from kernel import clock
from sim.world.faults import parse_plan
from sim.world.models import LedgerEntry, ServiceRequest
from sim.world.service import WorldService


def inv(capability, args, **kw):
    base = dict(
        capability=capability,
        args=args,
        run_id="run-x",
        task_id="task-x",
        tenant="north",
        principal_ref="user:operator",
        scope=("LOC-N1",),
        request_id="rq-1",
        deadline=clock.now() + dt.timedelta(seconds=5),
        # Dispatch runs exactly the named version; these hostile requests target 1.0.0.
        version="1.0.0",
    )
    base.update(kw)
    return Invocation(**base)


def svc(plan=()):
    return WorldService(namespace="faultlab", run_id="run-x", fault_plan=parse_plan(plan))


@pytest.mark.parametrize(
    ("capability", "args", "detail"),
    [
        (
            "check_inventory",
            {"part_id": "A17", "location_id": "LOC-N1", "tenant": "north"},
            "trusted fields",
        ),
        (
            "read_equipment",
            {"equipment_id": "EQ-17", "principal_ref": "user:admin"},
            "trusted fields",
        ),
        ("check_inventory", {"part_id": "A17"}, "location_id"),
        ("read_equipment", {"equipment_id": "'; DROP TABLE runs;--"}, "does not match"),
        ("search_manual", {"query": "x" * 500, "family": "pump-fixture"}, "maxLength"),
        (
            "reserve_part",
            {"part_id": "A17", "slot_id": "S-N1-01", "quantity": 1, "idempotency_key": "f" * 64},
            "trusted fields",
        ),
    ],
)
def test_malformed_or_forged_requests_never_reach_the_service(world, capability, args, detail):
    outcome = registry.dispatch(
        inv(capability, args), WorldService(namespace="faultlab", run_id="run-x")
    )
    assert not outcome.ok and outcome.error == "INVALID_ARGUMENT"
    assert outcome.stage == "pre_dispatch" and detail in outcome.detail
    assert not ServiceRequest.objects.exists()


def test_scope_is_enforced_before_any_data_is_returned(world):
    other = registry.dispatch(
        inv("check_inventory", {"part_id": "A17", "location_id": "LOC-S1"}), svc()
    )
    assert other.error == "DENIED" and "another tenant" in other.detail
    undelegated = registry.dispatch(
        inv("check_inventory", {"part_id": "A17", "location_id": "LOC-N2"}), svc()
    )
    assert undelegated.error == "DENIED" and "not delegated" in undelegated.detail
    assert not ServiceRequest.objects.filter(capability="check_inventory").exists()


def test_another_tenants_equipment_is_denied(world):
    outcome = registry.dispatch(inv("read_equipment", {"equipment_id": "EQ-31"}), svc())
    assert outcome.error == "DENIED"


def test_a_cross_tenant_result_is_quarantined(world):
    outcome = registry.dispatch(
        inv("read_equipment", {"equipment_id": "EQ-17"}),
        svc([{"point": "cross_tenant_result", "capability": "read_equipment"}]),
    )
    assert outcome.error == "MALFORMED_RESULT" and outcome.quarantined
    assert outcome.data == {}


def test_owner_contact_never_leaves_the_adapter(world):
    outcome = registry.dispatch(inv("read_equipment", {"equipment_id": "EQ-17"}), svc())
    assert outcome.ok and "owner_contact" not in outcome.data


def test_manual_text_is_returned_as_data_with_trust_state(world):
    outcome = registry.dispatch(
        inv("search_manual", {"query": "agents inventory_admin", "family": "pump-fixture"}), svc()
    )
    assert outcome.ok
    texts = [p["text"] for p in outcome.data["passages"]]
    assert any("inventory_admin" in t for t in texts)
    assert {p["trust_state"] for p in outcome.data["passages"]} <= {"approved", "untrusted"}


def test_a_stale_read_gets_one_fresh_retry_then_stale(world):
    once = registry.dispatch(
        inv("check_inventory", {"part_id": "A17", "location_id": "LOC-N1"}),
        svc([{"point": "stale_read", "capability": "check_inventory"}]),
    )
    assert once.ok and once.attempts == 2
    always = registry.dispatch(
        inv("check_inventory", {"part_id": "A17", "location_id": "LOC-N1"}, run_id="run-y"),
        WorldService(
            namespace="faultlab",
            run_id="run-y",
            fault_plan=parse_plan(
                [{"point": "stale_read", "capability": "check_inventory", "on_call": 0}]
            ),
        ),
    )
    assert always.error == "STALE" and always.attempts == 2


def test_an_unknown_capability_is_denied(world):
    outcome = registry.dispatch(inv("run_sql", {"sql": "select 1"}), svc())
    assert outcome.error == "DENIED"


def _intent(quantity=1):
    return reserve_part.semantic_intent(
        tenant="north",
        principal_ref="user:operator",
        task_id="task-x",
        run_id="run-x",
        proposal_hash="a" * 64,
        part_id="A17",
        slot_id="S-N1-02",
        quantity=quantity,
    )


def test_the_ledger_returns_the_original_effect_for_the_same_key(world):
    service = svc()
    intent = _intent()
    key = reserve_part.semantic_key(intent)
    first = service.reserve(call_index=1, key=key, intent=intent, intent_hash=key, fencing_token=1)
    again = service.reserve(call_index=2, key=key, intent=intent, intent_hash=key, fencing_token=1)
    assert first["effect_id"] == again["effect_id"]
    assert LedgerEntry.objects.filter(namespace="faultlab").count() == 1


def test_same_key_different_intent_is_refused_and_never_overwrites(world):
    from sim.world.service import ServiceFault

    service = svc()
    intent = _intent()
    key = reserve_part.semantic_key(intent)
    service.reserve(call_index=1, key=key, intent=intent, intent_hash=key, fencing_token=1)
    changed = {**intent, "quantity": 2}
    with pytest.raises(ServiceFault) as info:
        service.reserve(
            call_index=2,
            key=key,
            intent=changed,
            intent_hash=reserve_part.semantic_key(changed),
            fencing_token=1,
        )
    assert info.value.code == "SAME_KEY_DIFFERENT_INTENT"
    assert LedgerEntry.objects.get(idempotency_key=key).quantity == 1


def test_the_key_is_canonical_quantity_text_and_number_are_the_same():
    assert reserve_part.semantic_key(_intent(1)) == reserve_part.semantic_key(
        {**_intent(1), "quantity": int("1")}
    )
    assert reserve_part.semantic_key(_intent(1)) != reserve_part.semantic_key(_intent(2))


def test_reconciliation_reports_matched_absent_conflict_unresolved(world):
    service = svc()
    intent = _intent()
    key = reserve_part.semantic_key(intent)
    assert (
        reserve_part.reconcile(key=key, intent=intent, world=service, fence=1).outcome == "absent"
    )
    service.reserve(call_index=1, key=key, intent=intent, intent_hash=key, fencing_token=1)
    assert (
        reserve_part.reconcile(key=key, intent=intent, world=service, fence=1).outcome == "matched"
    )
    changed = {**intent, "quantity": 3}
    assert (
        reserve_part.reconcile(key=key, intent=changed, world=service, fence=1).outcome
        == "conflict"
    )
    down = WorldService(
        namespace="faultlab",
        run_id="run-x",
        fault_plan=parse_plan(
            [{"point": "ledger_unavailable", "capability": "reserve_part", "on_call": 0}]
        ),
    )
    assert (
        reserve_part.reconcile(key=key, intent=intent, world=down, fence=1).outcome == "unresolved"
    )


def test_the_slot_cannot_be_oversold(world):
    from sim.world.models import InventorySlot
    from sim.world.service import ServiceFault

    slot = InventorySlot.objects.get(namespace="faultlab", slot_id="S-N1-02")
    service = svc()
    taken = 0
    for i in range(slot.available + 1):
        intent = {**_intent(), "proposal_hash": f"{i:064x}"}
        key = reserve_part.semantic_key(intent)
        try:
            service.reserve(
                call_index=i + 1, key=key, intent=intent, intent_hash=key, fencing_token=1
            )
            taken += 1
        except ServiceFault as fault:
            assert fault.code == "CONFLICT"
    assert taken == slot.available


def test_a_fenced_key_refuses_an_older_commit_so_absence_is_proof(world):
    """A reconciliation read at fence 5 proves absence: a dispatch carrying token 4 (an
    older attempt that was paused) can no longer commit; a newer one can."""
    from sim.world.service import ServiceFault

    service = svc()
    intent = _intent()
    key = reserve_part.semantic_key(intent)
    found = reserve_part.reconcile(key=key, intent=intent, world=service, fence=5)
    assert found.outcome == "absent"
    with pytest.raises(ServiceFault) as info:
        service.reserve(call_index=1, key=key, intent=intent, intent_hash=key, fencing_token=4)
    assert info.value.code == "FENCED"
    assert not LedgerEntry.objects.filter(idempotency_key=key).exists()
    newer = service.reserve(call_index=2, key=key, intent=intent, intent_hash=key, fencing_token=6)
    assert LedgerEntry.objects.get(idempotency_key=key).effect_id == newer["effect_id"]


def test_the_same_key_and_intent_returns_the_original_even_past_the_fence(world):
    """An old duplicate delivery after a newer commit gets the original effect, never an
    error: idempotency is honoured before fencing."""
    service = svc()
    intent = _intent()
    key = reserve_part.semantic_key(intent)
    first = service.reserve(call_index=1, key=key, intent=intent, intent_hash=key, fencing_token=7)
    late = service.reserve(call_index=2, key=key, intent=intent, intent_hash=key, fencing_token=3)
    assert late["effect_id"] == first["effect_id"]
    assert LedgerEntry.objects.filter(idempotency_key=key).count() == 1
