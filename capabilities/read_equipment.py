"""read_equipment: read one synthetic equipment record by id (effect class: read)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capabilities import common
from capabilities.base import CallOutcome, Invocation, check_output
from capabilities.contracts import Contract, EffectClass, Precondition, ProposalKind, Provenance
from capabilities.ports import WorldPort

CONTRACT = Contract(
    id="read_equipment",
    version="1.0.0",
    family="equipment",
    kind=ProposalKind.OBSERVE,
    intent="Read one synthetic equipment record (family, revision, observed_at) by id.",
    non_intents=("owner contact details", "records of other tenants", "any mutation"),
    effect_class=EffectClass.READ,
    operational_effects=("access_audit",),
    use_when=("the family or revision of a named equipment id is not yet observed",),
    avoid_when=(
        "a fresh equipment observation already exists",
        "the question is about repair procedure (use search_manual)",
    ),
    input_schema={
        "type": "object",
        "properties": {
            "equipment_id": {"type": "string", "pattern": common.ID_PATTERN},
            **common.TRUSTED_READ_FIELDS,
        },
        "required": ["equipment_id", "tenant", "principal_ref", "run_id", "request_id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "equipment_id": {"type": "string"},
            "tenant": {"type": "string"},
            "family": {"type": "string"},
            "revision": {"type": "string"},
            "site": {"type": "string"},
            "observed_at": {"type": "string", "format": "date-time"},
            "record_hash": {"type": "string"},
        },
        "required": ["equipment_id", "tenant", "family", "revision", "observed_at", "record_hash"],
        "additionalProperties": False,
    },
    provenance={"equipment_id": Provenance.MODEL, **common.TRUSTED_READ_PROVENANCE},
    preconditions=(
        Precondition(
            "tenant_delegation",
            "the run's principal is delegated for the tenant that owns the equipment",
        ),
    ),
    scope={
        "principal": "run principal",
        "audience": "synthetic-equipment-service",
        "resource": "equipment of the run's tenant",
        "tenant_bound": True,
    },
    freshness={"field": "observed_at", "max_age_s": 3600},
    timeout_stages=common.READ_TIMEOUTS,
    errors=common.READ_ERRORS,
    idempotency={
        "supported": True,
        "key_fields": [],
        "note": "reads are naturally repeatable",
        "retention_s": 0,
        "duplicate_response": "a fresh read",
    },
    reconciliation={},
    compensation=common.NO_COMPENSATION,
    audit=common.READ_AUDIT,
    redaction={"never_in_context": ["owner_contact"], "logged": ["equipment_id"]},
    double={"name": "WorldService.read_equipment", "faults": common.DOUBLE_READ_FAULTS},
    deprecation=common.DEPRECATION,
    owner=common.OWNER,
)


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    body = world.read_equipment(
        call_index=call_index, equipment_id=request["equipment_id"], tenant=inv.tenant
    )
    # The adapter projects a minimal view: owner contact never enters the run.
    view = {k: v for k, v in body.items() if k != "owner_contact"}
    failure = check_output(CONTRACT, view, tenant=inv.tenant)
    return failure or CallOutcome(ok=True, data=view)
