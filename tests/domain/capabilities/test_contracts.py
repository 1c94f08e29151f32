"""One reviewed source per capability; both projections generated from it and in parity."""

from __future__ import annotations

import pytest

from capabilities import registry, rejected, reserve_part
from capabilities.base import schema_errors
from capabilities.contracts import (
    EffectClass,
    ErrorCode,
    Provenance,
    enforcement_projection,
    model_projection,
    projection_parity,
)

CONTRACTS = list(registry.ALL_CONTRACTS.values())
REQUIRED_FIELDS = (
    "id",
    "version",
    "intent",
    "non_intents",
    "effect_class",
    "operational_effects",
    "input_schema",
    "output_schema",
    "provenance",
    "preconditions",
    "scope",
    "freshness",
    "timeout_stages",
    "errors",
    "idempotency",
    "reconciliation",
    "compensation",
    "audit",
    "redaction",
    "double",
    "deprecation",
    "owner",
    "non_claims",
)


def test_the_five_capabilities_and_three_controls():
    assert set(registry.CAPABILITIES) == {
        "read_equipment",
        "search_manual",
        "check_inventory",
        "propose_reservation",
        "reserve_part",
    }
    assert set(registry.CONTROLS) == {"ask_user", "wait_for_event", "no_applicable_tool"}


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_every_contract_carries_every_field(contract):
    data = contract.as_dict()
    for name in REQUIRED_FIELDS:
        assert name in data
    assert contract.non_claims == {
        "exactlyOnceClaim": False,
        "realWorldEffect": False,
        "compensationErasesOriginal": False,
    }
    assert len(contract.digest) == 64


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_model_and_enforcement_projections_agree(contract):
    assert projection_parity(contract) == []
    enforcement = enforcement_projection(contract)
    every = (
        set(enforcement["model_fields"])
        | set(enforcement["harness_fields"])
        | set(enforcement["adapter_fields"])
    )
    assert every == set(enforcement["input_fields"])
    model = model_projection(contract)
    assert not set(model["input_schema"]["properties"]) & set(enforcement["harness_fields"])
    assert model["input_schema"]["additionalProperties"] is False


def test_parity_catches_a_field_nobody_owns():
    import dataclasses

    provenance = dict(reserve_part.CONTRACT.provenance)
    del provenance["idempotency_key"]
    orphaned = dataclasses.replace(reserve_part.CONTRACT, provenance=provenance)
    assert any("without provenance" in p for p in projection_parity(orphaned))


def test_the_digest_changes_with_any_semantic_field():
    import dataclasses

    changed = dataclasses.replace(reserve_part.CONTRACT, requires_approval=False)
    assert changed.digest != reserve_part.CONTRACT.digest


def test_only_reserve_part_is_consequential_and_requires_approval():
    for c in CONTRACTS:
        consequential = c.effect_class is EffectClass.CONSEQUENTIAL
        assert consequential == (c.id == "reserve_part") == c.requires_approval


def test_the_idempotency_key_fields_are_the_ledgers_semantic_intent():
    assert tuple(reserve_part.CONTRACT.idempotency["key_fields"]) == (
        reserve_part.SEMANTIC_INTENT_FIELDS
    )
    assert reserve_part.CONTRACT.fields_by(Provenance.ADAPTER) == (
        "credential_ref",
        "deadline",
        "fencing_token",
        "idempotency_key",
        "request_id",
    )


def test_every_effect_error_maps_to_a_declared_transition():
    codes = {r.code for r in reserve_part.CONTRACT.errors}
    assert {
        ErrorCode.TIMEOUT_AMBIGUOUS,
        ErrorCode.SAME_KEY_DIFFERENT_INTENT,
        ErrorCode.MALFORMED_RESULT,
        ErrorCode.STALE,
    } <= codes
    ambiguous = reserve_part.CONTRACT.error(ErrorCode.TIMEOUT_AMBIGUOUS)
    assert ambiguous.transition == "effect.ambiguous" and ambiguous.retry_budget == 0


def test_the_rejection_log_is_data_with_a_reason_for_each():
    assert [r.name for r in rejected.REJECTION_LOG] == [
        "run_sql",
        "execute_shell",
        "call_arbitrary_api",
        "browser",
        "inventory_admin",
        "find_and_reserve_part",
        "get_or_create_reservation",
        "send_service_message",
    ]
    assert all(r.reason and r.instead for r in rejected.REJECTION_LOG)
    assert not set(rejected.REJECTED) & set(registry.ALL_CONTRACTS)


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.id)
def test_unknown_input_fields_are_rejected_by_the_schema(contract):
    assert schema_errors(contract.input_schema, {"surprise": 1})


def test_component_set_pins_every_contract_by_digest():
    pins = registry.component_set()
    assert set(pins) == set(registry.ALL_CONTRACTS)
    for cid, pin in pins.items():
        version, digest16 = pin.split("#")
        assert version == registry.ALL_CONTRACTS[cid].version
        assert registry.ALL_CONTRACTS[cid].digest.startswith(digest16)
