"""check_inventory: availability of one part at one delegated location (effect: read)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capabilities import common, evidence, ports
from capabilities.base import CallOutcome, Invocation, check_output
from capabilities.contracts import (
    Contract,
    EffectClass,
    ErrorCode,
    ErrorRule,
    Precondition,
    ProposalKind,
    Provenance,
)
from capabilities.ports import ServiceFault, WorldPort
from kernel import clock

FRESHNESS_MAX_AGE_S = evidence.INVENTORY_MAX_AGE_S

CONTRACT = Contract(
    id="check_inventory",
    version="1.0.0",
    family="inventory",
    kind=ProposalKind.OBSERVE,
    intent="Read current synthetic availability of one part at one delegated location "
    "(slots, revision, observed_at). Never reserves or mutates stock.",
    non_intents=("reserve", "adjust", "transfer", "enumerate other locations"),
    effect_class=EffectClass.READ,
    operational_effects=("access_audit", "rate_limit_usage"),
    use_when=("a compatible part is known and its availability at a delegated location is needed",),
    avoid_when=(
        "the question is which part fits (use search_manual)",
        "the location is not delegated to this run",
    ),
    input_schema={
        "type": "object",
        "properties": {
            "part_id": {"type": "string", "pattern": common.ID_PATTERN},
            "location_id": {"type": "string", "pattern": common.ID_PATTERN},
            **common.TRUSTED_READ_FIELDS,
        },
        "required": ["part_id", "location_id", "tenant", "principal_ref", "run_id", "request_id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "part_id": {"type": "string"},
            "location_id": {"type": "string"},
            "tenant": {"type": "string"},
            "slots": {
                "type": "array",
                "maxItems": 20,
                "items": {
                    "type": "object",
                    "properties": {
                        "slot_id": {"type": "string"},
                        "available": {"type": "integer", "minimum": 0},
                    },
                    "required": ["slot_id", "available"],
                    "additionalProperties": False,
                },
            },
            "revision": {"type": "string"},
            "observed_at": {"type": "string", "format": "date-time"},
        },
        "required": ["part_id", "location_id", "tenant", "slots", "revision", "observed_at"],
        "additionalProperties": False,
    },
    provenance={
        "part_id": Provenance.MODEL,
        "location_id": Provenance.MODEL,
        **common.TRUSTED_READ_PROVENANCE,
    },
    preconditions=(
        Precondition("location_delegated", "the location is in the run's delegated scope"),
    ),
    scope={
        "principal": "run principal",
        "audience": "synthetic-inventory-service",
        "resource": "one delegated location",
        "tenant_bound": True,
        "location_bound": True,
    },
    freshness={
        "field": "observed_at",
        "max_age_s": FRESHNESS_MAX_AGE_S,
        "applies_at": ["proposal", "effect dispatch"],
    },
    timeout_stages=common.READ_TIMEOUTS,
    errors=(
        *common.READ_ERRORS,
        ErrorRule(
            ErrorCode.STALE,
            "observation older than the freshness rule; one fresh read",
            1,
            "observation.received",
            retry_owner="adapter",
        ),
    ),
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
    redaction={"never_in_context": ["stock of other locations"]},
    double={
        "name": "WorldService.check_inventory",
        "faults": [*common.DOUBLE_READ_FAULTS, "stale_read"],
    },
    deprecation=common.DEPRECATION,
    owner=common.OWNER,
)


def scope_refusal(inv: Invocation, location_id: str) -> CallOutcome | None:
    """Scope is enforced before any service data is returned (every version)."""
    if location_id in inv.scope:
        return None
    location = ports.world().reference.locations.get(location_id)
    reason = (
        "location belongs to another tenant"
        if location and location["tenant"] != inv.tenant
        else "location is not delegated to this run"
    )
    return CallOutcome.fail(ErrorCode.DENIED, "pre_dispatch", reason)


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    location_id = request["location_id"]
    denied = scope_refusal(inv, location_id)
    if denied is not None:
        return denied
    try:
        body = world.check_inventory(
            call_index=call_index,
            part_id=request["part_id"],
            location_id=location_id,
            tenant=inv.tenant,
        )
    except ServiceFault as fault:
        if fault.code != ErrorCode.CONFLICT:
            raise
        # 1.0.0 has no CONFLICT: a revision change while reading is reported as STALE
        # (its retry is the harness's). 1.1.0 splits it out (check_inventory_v1_1).
        return CallOutcome.fail(ErrorCode.STALE, "definite", f"revision changed: {fault.detail}")
    failure = check_output(CONTRACT, body, tenant=inv.tenant)
    if failure:
        return failure
    age = (clock.now() - clock.parse(body["observed_at"])).total_seconds()
    if age > FRESHNESS_MAX_AGE_S:
        return CallOutcome.fail(
            ErrorCode.STALE,
            "definite",
            f"observation is {int(age)} s old (limit {FRESHNESS_MAX_AGE_S} s)",
        )
    return CallOutcome(ok=True, data=body)
