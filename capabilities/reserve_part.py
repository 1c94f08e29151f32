"""reserve_part: reserve exactly one approved part in one approved slot (effect class:
consequential external mutation). The only effect in FieldOps.

No blind retry, no slot substitution. The adapter derives the semantic idempotency key
(the model never supplies it), rechecks every precondition at dispatch, and classifies a
lost or malformed answer as ambiguous so the run reconciles before anything else.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from approvals.domain import ProposalError, canonical_quantity, proposal_hash
from capabilities import common, evidence
from capabilities.base import CallOutcome, Invocation, schema_errors
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
from capabilities.ports import ServiceFault, WorldPort
from kernel import clock
from kernel.canonical import digest
from runs.domain.effects import Found

# The fields whose values make two reservation requests "the same intent": the adapter
# derives the idempotency key from exactly these, and the ledger compares exactly these.
SEMANTIC_INTENT_FIELDS: tuple[str, ...] = (
    "tenant",
    "principal_ref",
    "task_id",
    "run_id",
    "proposal_hash",
    "part_id",
    "slot_id",
    "quantity",
)
# How long the reservation service honours a key (its duplicate window).
LEDGER_RETENTION = dt.timedelta(days=30)

CONTRACT = Contract(
    id="reserve_part",
    version="1.0.0",
    family="reservation",
    kind=ProposalKind.ACTION,
    intent="Reserve exactly the approved quantity of one approved part in one approved slot "
    "for the run's tenant.",
    non_intents=(
        "blind retry",
        "substitute a slot or part",
        "reserve without an exact approval",
        "release or adjust stock",
    ),
    effect_class=EffectClass.CONSEQUENTIAL,
    operational_effects=("ledger_entry", "stock_decrement", "access_audit"),
    use_when=("an exact canonical proposal exists and the reservation is the task's effect",),
    avoid_when=(
        "no canonical proposal exists (use propose_reservation)",
        "an effect was already recorded for this run",
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
            "tenant": common.TRUSTED_READ_FIELDS["tenant"],
            "principal_ref": common.TRUSTED_READ_FIELDS["principal_ref"],
            "task_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "run_id": common.TRUSTED_READ_FIELDS["run_id"],
            "proposal_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "idempotency_key": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "fencing_token": {"type": "integer", "minimum": 1},
            "request_id": common.TRUSTED_READ_FIELDS["request_id"],
            "credential_ref": {"type": "string", "pattern": "^cred:[a-z0-9-]{1,40}$"},
            "deadline": {"type": "string"},
        },
        "required": [
            "part_id",
            "slot_id",
            "quantity",
            "tenant",
            "principal_ref",
            "task_id",
            "run_id",
            "proposal_hash",
            "idempotency_key",
            "fencing_token",
            "request_id",
            "credential_ref",
            "deadline",
        ],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "effect_id": {"type": "string", "pattern": "^EF-[0-9A-F]{12}$"},
            "idempotency_key": {"type": "string"},
            "status": {"const": "RESERVED"},
            "part_id": {"type": "string"},
            "slot_id": {"type": "string"},
            "quantity": {"type": "integer"},
            "tenant": {"type": "string"},
            "committed_at": {"type": "string", "format": "date-time"},
        },
        "required": [
            "effect_id",
            "idempotency_key",
            "status",
            "part_id",
            "slot_id",
            "quantity",
            "tenant",
            "committed_at",
        ],
        "additionalProperties": False,
    },
    provenance={
        "part_id": Provenance.MODEL,
        "slot_id": Provenance.MODEL,
        "quantity": Provenance.MODEL,
        "tenant": Provenance.HARNESS,
        "principal_ref": Provenance.HARNESS,
        "task_id": Provenance.HARNESS,
        "run_id": Provenance.HARNESS,
        "proposal_hash": Provenance.HARNESS,
        "idempotency_key": Provenance.ADAPTER,
        "fencing_token": Provenance.ADAPTER,
        "request_id": Provenance.ADAPTER,
        "credential_ref": Provenance.ADAPTER,
        "deadline": Provenance.ADAPTER,
    },
    preconditions=(
        Precondition("exact_approval", "a live, unused approval bound to this proposal hash"),
        Precondition(
            "proposal_equality",
            "part, slot and quantity equal the canonical proposal; the proposal has not expired",
        ),
        Precondition(
            "fresh_inventory",
            f"the proposal's inventory evidence is no older than "
            f"{evidence.INVENTORY_MAX_AGE_S} s at dispatch",
        ),
        Precondition("effect_budget", "one remaining effect"),
        Precondition("not_cancelled", "cancellation checked immediately before dispatch"),
    ),
    scope={
        "principal": "run principal with reservation delegation",
        "audience": "synthetic-reservation-service",
        "resource": "one approved slot",
        "tenant_bound": True,
        "location_bound": True,
    },
    freshness={
        "field": "inventory observed_at",
        "max_age_s": evidence.INVENTORY_MAX_AGE_S,
        "applies_at": ["effect dispatch"],
    },
    timeout_stages=(
        TimeoutStage("connect", 500, "before send: definitely not dispatched"),
        TimeoutStage("acknowledgement", 2000, "after send: outcome unknown, reconcile by key"),
        TimeoutStage("result", 3000, "a late answer is ambiguous: reconcile by key"),
    ),
    errors=(
        ErrorRule(
            ErrorCode.INVALID_ARGUMENT, "request failed the input schema", 0, "proposal.denied"
        ),
        ErrorRule(ErrorCode.DENIED, "service refused (scope, slot, tenant)", 0, "effect.rejected"),
        ErrorRule(
            ErrorCode.CONFLICT,
            "answered after the request may have reached the ledger, so it may hide a "
            "concurrent commit of the same key: reconcile by the key; after proven absence "
            "the unchanged request is never retried (refresh evidence, re-propose)",
            0,
            "effect.ambiguous",
        ),
        ErrorRule(
            ErrorCode.FENCED,
            "the ledger refused a commit older than its fence for the key: nothing was "
            "committed; a newer attempt or a reconciliation owns the key",
            0,
            "effect.rejected",
        ),
        ErrorRule(
            ErrorCode.STALE,
            "evidence too old at dispatch; approval not consumed",
            0,
            "proposal.denied",
        ),
        ErrorRule(
            ErrorCode.UNAVAILABLE,
            "definitely before dispatch; same key may be sent again after revalidation",
            0,
            "effect.rejected",
        ),
        ErrorRule(
            ErrorCode.TIMEOUT_AMBIGUOUS,
            "dispatch may have committed: reconcile by the same key, never retry blindly",
            0,
            "effect.ambiguous",
        ),
        ErrorRule(
            ErrorCode.RATE_LIMITED,
            "answered after possible dispatch: reconcile before any rescheduling",
            0,
            "effect.ambiguous",
        ),
        ErrorRule(
            ErrorCode.MALFORMED_RESULT,
            "success without effect id / commit time: never completion; reconcile",
            0,
            "effect.ambiguous",
        ),
        ErrorRule(
            ErrorCode.SAME_KEY_DIFFERENT_INTENT,
            "the ledger holds this key with another intent: integrity failure, escalate",
            0,
            "effect.ambiguous",
        ),
    ),
    idempotency={
        "supported": True,
        "key_fields": list(SEMANTIC_INTENT_FIELDS),
        "key_owner": "adapter (never the model)",
        "retention_s": int(LEDGER_RETENTION.total_seconds()),
        "duplicate_response": "the original effect record",
        "same_key_different_intent": "SAME_KEY_DIFFERENT_INTENT (never overwritten)",
        "in_flight": "at most one attempt per semantic intent",
        "fencing": "each dispatch carries a fencing token (the run sequence of the event "
        "that recorded it); every commit and every reconciliation read raises the key's "
        "fence to its token; a commit whose token is lower than the fence is refused "
        "(FENCED, nothing committed), so a reconciliation read that finds nothing proves "
        "absence: no older attempt can commit afterwards",
    },
    reconciliation={
        "read": "ledger lookup by idempotency key (authoritative)",
        "outcomes": {
            "matched": "reconciliation.matched -> VERIFYING (effect recorded once)",
            "absent": "reconciliation.absent -> VALIDATING (full revalidation, same key); "
            "proof only because the read fenced the key",
            "conflict": "reconciliation.conflict -> ESCALATED (integrity failure)",
            "unknown": "reconciliation.unresolved -> ESCALATED (effect budget stays reserved)",
            "busy": "a commit of the key is in progress: no event, the read is repeated",
        },
        "approver_copy": "If the response is lost, the ledger can be checked by request "
        "identity; nothing is sent again until it answers.",
    },
    compensation=common.NO_COMPENSATION,
    audit={
        "before_dispatch": ["dispatch record (attempt, key, approval consumed)"],
        "after_dispatch": ["effect_id", "committed_at", "ledger key", "verification"],
    },
    redaction={
        "never_in_context": ["credential_ref values", "idempotency key material"],
        "logged": ["idempotency_key", "effect_id"],
    },
    double={
        "name": "WorldService.reserve + ledger_lookup",
        "faults": [
            "before_validation",
            "after_validation_before_dispatch",
            "after_receipt_before_commit",
            "after_commit_before_response",
            "malformed_response",
            "late_response",
            "rate_limited_after_dispatch",
            "ledger_unavailable",
            "key_conflict",
        ],
    },
    deprecation=common.DEPRECATION,
    owner=common.OWNER,
    requires_approval=True,
)


def semantic_intent(
    *,
    tenant: str,
    principal_ref: str,
    task_id: str,
    run_id: str,
    proposal_hash: str,
    part_id: str,
    slot_id: str,
    quantity: int,
) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "principal_ref": principal_ref,
        "task_id": task_id,
        "run_id": run_id,
        "proposal_hash": proposal_hash,
        "part_id": part_id,
        "slot_id": slot_id,
        "quantity": quantity,
    }


def semantic_key(intent: Mapping[str, Any]) -> str:
    """The idempotency key: a hash of exactly the semantic intent fields."""
    return digest({f: intent[f] for f in SEMANTIC_INTENT_FIELDS})


def intent_for(inv: Invocation) -> dict[str, Any]:
    proposal = inv.canonical_proposal or {}
    return semantic_intent(
        tenant=inv.tenant,
        principal_ref=inv.principal_ref,
        task_id=inv.task_id,
        run_id=inv.run_id,
        proposal_hash=inv.proposal_hash,
        part_id=str(proposal.get("part_id", "")),
        slot_id=str(proposal.get("slot_id", "")),
        quantity=int(proposal.get("quantity", 0)),
    )


def dispatch_problem(inv: Invocation) -> tuple[ErrorCode, str] | None:
    """Recheck the preconditions that can change between approval and dispatch."""
    proposal = inv.canonical_proposal
    if proposal is None or proposal_hash(proposal) != inv.proposal_hash:
        return ErrorCode.DENIED, "no canonical proposal matches the approved hash"
    try:
        quantity = canonical_quantity(inv.args.get("quantity"))
    except ProposalError as exc:
        return ErrorCode.INVALID_ARGUMENT, exc.detail
    asked = (
        str(inv.args.get("part_id", "")).upper(),
        str(inv.args.get("slot_id", "")).upper(),
        quantity,
    )
    if asked != (proposal["part_id"], proposal["slot_id"], proposal["quantity"]):
        return ErrorCode.DENIED, "request differs from the approved proposal"
    now = clock.now()
    if clock.parse(proposal["expires_at"]) <= now:
        return ErrorCode.STALE, "the proposal expired"
    inventory = [
        inv.observations[r]
        for r in proposal["evidence_refs"]
        if inv.observations.get(r, {}).get("capability") == "check_inventory"
    ]
    if not inventory or not all(
        evidence.is_fresh(o, now, evidence.INVENTORY_MAX_AGE_S) for o in inventory
    ):
        return ErrorCode.STALE, "inventory evidence is older than the freshness rule"
    return None


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    problem = dispatch_problem(inv)
    if problem:
        return CallOutcome.fail(problem[0], "pre_dispatch", problem[1])
    intent = intent_for(inv)
    key = request["idempotency_key"]
    try:
        body = world.reserve(
            call_index=call_index,
            key=key,
            intent=intent,
            intent_hash=semantic_key(intent),
            fencing_token=request["fencing_token"],
        )
    except ServiceFault as fault:
        stage = fault.stage
        if fault.code in ("TIMEOUT_AMBIGUOUS", "RATE_LIMITED"):
            stage = "ambiguous"
        return CallOutcome.fail(fault.code, stage, fault.detail)
    problems = schema_errors(CONTRACT.output_schema, body)
    if not problems and (
        body["idempotency_key"] != key
        or body["part_id"] != intent["part_id"]
        or body["slot_id"] != intent["slot_id"]
        or body["quantity"] != intent["quantity"]
        or body["tenant"] != intent["tenant"]
    ):
        problems = ["answer does not describe the requested intent"]
    if problems:
        # Dispatch happened and the answer cannot be interpreted: the outcome is unknown.
        return CallOutcome.fail(
            ErrorCode.MALFORMED_RESULT,
            "ambiguous",
            "; ".join(problems),
            quarantined={"digest": digest(body), "problems": problems},
        )
    return CallOutcome(ok=True, data=body)


@dataclass(frozen=True)
class Reconciliation:
    outcome: Found
    effect: Mapping[str, Any] | None
    detail: str


def reconcile(
    *, key: str, intent: Mapping[str, Any], world: WorldPort, fence: int
) -> Reconciliation:
    """Query the authoritative ledger by the same key, fencing it at ``fence``; never
    dispatch anything. "absent" is proof: no dispatch with a lower token can commit now."""
    try:
        found = world.ledger_lookup(key=key, fence=fence)
    except ServiceFault as fault:
        if fault.code == "BUSY":
            return Reconciliation(Found.BUSY, None, fault.detail)
        return Reconciliation(Found.UNRESOLVED, None, f"{fault.code}: {fault.detail}")
    if not found.found or found.entry is None:
        return Reconciliation(
            Found.ABSENT, None, f"ledger proves no effect under this key (fenced at {fence})"
        )
    entry = found.entry
    record = {
        "effect_id": entry.effect_id,
        "idempotency_key": entry.idempotency_key,
        "status": entry.status,
        "part_id": entry.part_id,
        "slot_id": entry.slot_id,
        "quantity": entry.quantity,
        "tenant": entry.tenant,
        "committed_at": clock.iso(entry.committed_at),
    }
    if entry.intent_hash != semantic_key(intent):
        return Reconciliation(Found.CONFLICT, record, "same key, different intent")
    return Reconciliation(Found.MATCHED, record, "ledger holds the matching effect")
