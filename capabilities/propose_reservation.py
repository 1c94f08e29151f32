"""propose_reservation: canonical proposal + hash + expiry (effect class: local
transformation). It never holds, consumes or reserves stock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from approvals.domain import ProposalError, canonical_quantity, canonicalize
from capabilities import common, evidence, ports
from capabilities.base import CallOutcome, Invocation
from capabilities.contracts import (
    Contract,
    EffectClass,
    ErrorCode,
    ErrorRule,
    Precondition,
    ProposalKind,
    Provenance,
    TimeoutStage,
)
from capabilities.ports import WorldPort
from kernel import clock

PROPOSAL_TTL = dt.timedelta(minutes=30)

CONTRACT = Contract(
    id="propose_reservation",
    version="1.0.0",
    family="reservation",
    kind=ProposalKind.ACTION,
    intent="Form one immutable, canonical reservation proposal (part, slot, quantity, tenant, "
    "evidence refs, expiry) from fresh evidence and return its proposal hash.",
    non_intents=("hold or consume stock", "reserve", "notify anyone"),
    effect_class=EffectClass.LOCAL_TRANSFORMATION,
    operational_effects=("evidence_record",),
    use_when=(
        "compatible part and fresh availability are observed and an exact review "
        "artifact is needed before reserving",
    ),
    avoid_when=(
        "evidence is missing or stale (observe first)",
        "the user only asked to list options",
    ),
    input_schema={
        "type": "object",
        "properties": {
            "part_id": {"type": "string", "pattern": common.ID_PATTERN},
            "slot_id": {"type": "string", "pattern": common.ID_PATTERN},
            "quantity": {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 50},
                    {"type": "string", "pattern": "^[1-9][0-9]{0,1}$"},
                ]
            },
            "unit": {"type": "string", "maxLength": 16},
            "evidence_refs": {
                "type": "array",
                "minItems": 1,
                "maxItems": 12,
                "items": {"type": "string", "maxLength": 64},
            },
            "tenant": common.TRUSTED_READ_FIELDS["tenant"],
            "principal_ref": common.TRUSTED_READ_FIELDS["principal_ref"],
            "task_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "run_id": common.TRUSTED_READ_FIELDS["run_id"],
            "request_id": common.TRUSTED_READ_FIELDS["request_id"],
        },
        "required": [
            "part_id",
            "slot_id",
            "quantity",
            "evidence_refs",
            "tenant",
            "principal_ref",
            "task_id",
            "run_id",
            "request_id",
        ],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "proposal": {"type": "object"},
            "proposal_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "expires_at": {"type": "string", "format": "date-time"},
            "effect_summary": {"type": "string"},
            "evidence_view": {"type": "array"},
        },
        "required": ["proposal", "proposal_hash", "expires_at", "effect_summary", "evidence_view"],
        "additionalProperties": False,
    },
    provenance={
        "part_id": Provenance.MODEL,
        "slot_id": Provenance.MODEL,
        "quantity": Provenance.MODEL,
        "unit": Provenance.MODEL,
        "evidence_refs": Provenance.MODEL,
        "tenant": Provenance.HARNESS,
        "principal_ref": Provenance.HARNESS,
        "task_id": Provenance.HARNESS,
        "run_id": Provenance.HARNESS,
        "request_id": Provenance.ADAPTER,
    },
    preconditions=(
        Precondition(
            "compatibility_evidence",
            "equipment observation the part fits and an approved manual passage naming the part",
        ),
        Precondition(
            "fresh_inventory",
            f"inventory observation of the slot no older than "
            f"{evidence.INVENTORY_MAX_AGE_S} s with enough stock",
        ),
    ),
    scope={
        "principal": "run principal",
        "audience": "local harness",
        "resource": "the run's own evidence",
        "tenant_bound": True,
    },
    freshness={"field": "inventory observed_at", "max_age_s": evidence.INVENTORY_MAX_AGE_S},
    timeout_stages=(TimeoutStage("local", 1000, "local computation: no external effect"),),
    errors=(
        ErrorRule(
            ErrorCode.INVALID_ARGUMENT,
            "quantity, unit or ids not canonicalizable",
            0,
            "observation.received",
        ),
        ErrorRule(
            ErrorCode.PRECONDITION_EVIDENCE_INCOMPLETE,
            "evidence missing",
            0,
            "observation.received",
        ),
        ErrorRule(
            ErrorCode.STALE, "inventory evidence too old: read again", 0, "observation.received"
        ),
    ),
    idempotency={
        "supported": True,
        "key_fields": [],
        "note": "same inputs and expiry give the same hash",
        "retention_s": 0,
        "duplicate_response": "same hash",
    },
    reconciliation={},
    compensation=common.NO_COMPENSATION,
    audit={"before_dispatch": ["evidence_refs"], "after_dispatch": ["proposal_hash"]},
    redaction={"never_in_context": ["credentials"], "logged": ["proposal_hash"]},
    double={"name": "local canonicalizer", "faults": []},
    deprecation=common.DEPRECATION,
    owner=common.OWNER,
)


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    now = clock.now()
    part_id = str(request["part_id"]).upper()
    part = ports.world().reference.parts.get(part_id)
    try:
        quantity = canonical_quantity(request["quantity"])
    except ProposalError as exc:
        return CallOutcome.fail(ErrorCode.INVALID_ARGUMENT, "pre_dispatch", exc.detail)
    found = evidence.reservation_evidence(
        refs=request["evidence_refs"],
        observations=inv.observations,
        part_id=part_id,
        slot_id=str(request["slot_id"]).upper(),
        quantity=quantity,
        part_info=part,
        now=now,
    )
    if found.missing:
        return CallOutcome.fail(
            ErrorCode.PRECONDITION_EVIDENCE_INCOMPLETE, "pre_dispatch", "; ".join(found.missing)
        )
    if found.stale:
        return CallOutcome.fail(ErrorCode.STALE, "pre_dispatch", "; ".join(found.stale))
    assert part is not None and found.location_id is not None
    try:
        proposal = canonicalize(
            tenant=inv.tenant,
            principal_ref=inv.principal_ref,
            task_id=inv.task_id,
            run_id=inv.run_id,
            part_id=part_id,
            slot_id=request["slot_id"],
            location_id=found.location_id,
            quantity=quantity,
            unit=request.get("unit"),
            part_unit=part["unit"],
            evidence_refs=request["evidence_refs"],
            proposed_at=clock.iso(now),
            expires_at=clock.iso(now + PROPOSAL_TTL),
        )
    except ProposalError as exc:
        return CallOutcome.fail(ErrorCode.INVALID_ARGUMENT, "pre_dispatch", exc.detail)
    content = proposal.content
    summary = (
        f"Reserve {content['quantity']} {content['unit']} of {part_id} "
        f"({part['name']}) in slot {content['slot_id']} at {content['location_id']} "
        f"for tenant {inv.tenant}."
    )
    evidence_view = [
        {
            "ref": ref,
            "capability": inv.observations[ref].get("capability"),
            "observed_at": (inv.observations[ref].get("data") or {}).get("observed_at")
            or (inv.observations[ref].get("data") or {}).get("retrieved_at"),
            "age_s": evidence.age_seconds(inv.observations[ref], now),
        }
        for ref in content["evidence_refs"]
    ]
    return CallOutcome(
        ok=True,
        data={
            "proposal": dict(content),
            "proposal_hash": proposal.hash,
            "expires_at": content["expires_at"],
            "effect_summary": summary,
            "evidence_view": evidence_view,
        },
    )
