"""Fixture sensitivity ("state subtraction"): remove one critical field or check, in the
test only, and the fixture that guards it must visibly break.

Each test runs the guarding check twice: as shipped (it holds) and with the mutation (it
fails). A fixture that still passed under the mutation would prove nothing.
"""

from __future__ import annotations

import pytest

from capabilities import evidence as ev
from capabilities import reserve_part
from runs import authority
from sim import faultlab
from sim.world import service as world_service
from sim.world.models import InventorySlot, LedgerEntry
from sim.world.service import ServiceFault, WorldService


def _intent(quantity):
    return reserve_part.semantic_intent(
        tenant="north",
        principal_ref="user:operator",
        task_id="task-s",
        run_id="run-s",
        proposal_hash="b" * 64,
        part_id="A17",
        slot_id="S-N1-01",
        quantity=quantity,
    )


def changed_intent_is_never_answered_with_the_original_effect() -> None:
    service = WorldService(namespace="faultlab", run_id="run-s")
    for quantity in (1, 2):
        intent = _intent(quantity)
        key = reserve_part.semantic_key(intent)
        try:
            body = service.reserve(
                call_index=quantity, key=key, intent=intent, intent_hash=key, fencing_token=1
            )
        except ServiceFault as fault:
            assert fault.code == "SAME_KEY_DIFFERENT_INTENT"
            continue
        assert body["quantity"] == quantity, "a changed intent was answered as a duplicate"


def test_quantity_dropped_from_the_key_lets_changed_intent_slip_through(world, monkeypatch):
    changed_intent_is_never_answered_with_the_original_effect()
    LedgerEntry.objects.all().delete()
    monkeypatch.setattr(
        reserve_part,
        "SEMANTIC_INTENT_FIELDS",
        tuple(f for f in reserve_part.SEMANTIC_INTENT_FIELDS if f != "quantity"),
    )
    with pytest.raises(AssertionError, match="answered as a duplicate"):
        changed_intent_is_never_answered_with_the_original_effect()


def _run(name):
    return faultlab.run_fixture(faultlab.BY_NAME[name])


def test_timeout_ambiguous_treated_as_retryable_makes_a_second_effect(world, monkeypatch):
    held = _run("ambiguous_effect")
    assert held.passed, held.failed_checks
    import dataclasses

    from capabilities.contracts import ErrorCode

    contract = reserve_part.CONTRACT
    errors = tuple(
        dataclasses.replace(r, transition="effect.rejected", retry_budget=1)
        if r.code is ErrorCode.TIMEOUT_AMBIGUOUS
        else r
        for r in contract.errors
    )
    from capabilities import registry

    # Dispatch serves the pinned version's implementation: break exactly that contract.
    broken_contract = dataclasses.replace(contract, errors=errors)
    real = registry.IMPLEMENTATIONS[contract.ref]
    monkeypatch.setitem(
        registry.IMPLEMENTATIONS,  # type: ignore[arg-type]
        contract.ref,
        registry.Implementation(broken_contract, real.handler),
    )
    broken = _run("ambiguous_effect")
    assert not broken.passed
    assert "exactly one effect" in broken.failed_checks


def test_observed_at_ignored_accepts_stale_stock(world, monkeypatch):
    held = _run("stale_at_dispatch")
    assert held.passed, held.failed_checks
    monkeypatch.setattr(ev, "is_fresh", lambda obs, now, max_age_s: True)
    broken = _run("stale_at_dispatch")
    assert not broken.passed
    assert "no effect" in broken.failed_checks


def oversell_is_refused() -> int:
    """Two reservations race for the last unit of a slot; return how many succeeded."""
    InventorySlot.objects.filter(namespace="faultlab", slot_id="S-N1-02").update(available=1)
    service = WorldService(namespace="faultlab", run_id="run-race")
    real_take = world_service.take_stock
    raced = []

    def interleaved(slot, quantity):
        if not raced:  # the competitor commits between our read and our write
            raced.append(True)
            other = {**_intent(1), "slot_id": "S-N1-02", "proposal_hash": "c" * 64}
            key = reserve_part.semantic_key(other)
            service.reserve(call_index=90, key=key, intent=other, intent_hash=key, fencing_token=1)
        return real_take(slot, quantity)

    world_service.take_stock = interleaved
    try:
        mine = {**_intent(1), "slot_id": "S-N1-02", "proposal_hash": "d" * 64}
        key = reserve_part.semantic_key(mine)
        try:
            service.reserve(call_index=91, key=key, intent=mine, intent_hash=key, fencing_token=1)
        except ServiceFault as fault:
            assert fault.code == "CONFLICT"
    finally:
        world_service.take_stock = real_take
    return LedgerEntry.objects.filter(namespace="faultlab", slot_id="S-N1-02").count()


def test_revision_check_removed_loses_an_update(world, monkeypatch):
    assert oversell_is_refused() == 1
    LedgerEntry.objects.all().delete()

    def without_revision_check(slot, quantity):
        InventorySlot.objects.filter(pk=slot.pk).update(
            available=slot.available - quantity, revision=slot.revision + 1
        )
        return True

    monkeypatch.setattr(world_service, "take_stock", without_revision_check)
    assert oversell_is_refused() == 2  # one unit, two reservations: the lost update


def test_owner_epoch_ignored_lets_a_stale_worker_write(world, monkeypatch):
    held = _run("stale_owner")
    assert held.passed, held.failed_checks
    real_append = authority.append

    def epoch_blind(**kwargs):
        kwargs["expected_epoch"] = None
        return real_append(**kwargs)

    monkeypatch.setattr(authority, "append", epoch_blind)
    broken = _run("stale_owner")
    assert not broken.passed
    assert "the stale owner's write was rejected" in broken.failed_checks
