"""Reviewed local contract versions that are *not* admitted: candidates awaiting a decision.

``catalog_sync`` stores them as DISCOVERED. An admin can diff them against the admitted
version and admit, defer or reject them in the console. The dispatch registry
(``registry.py``) still dispatches exactly one code version per capability id, so
admitting one of these records the decision without silently changing what runs execute:
runs pin ``version#digest`` and a version the code does not dispatch is never pinned.

Each version demonstrates one row of the change table in "Evolve and retire capability
versions"; the diff page classifies them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capabilities import check_inventory, read_equipment, reserve_part, search_manual
from capabilities.contracts import Contract, ErrorCode, ErrorRule, Provenance, TimeoutStage
from capabilities.registry import ALL_CONTRACTS


def _search_manual_1_1() -> Contract:
    """Observation-only change: ten passages instead of three, plus a relevance field.

    No domain effect changed, but context volume, injection surface and selection did:
    output validation, redaction, context admission and injection fixtures re-run.
    """
    base = search_manual.CONTRACT
    inputs: dict[str, Any] = copy.deepcopy(dict(base.input_schema))
    inputs["properties"]["max_passages"]["maximum"] = 10
    outputs: dict[str, Any] = copy.deepcopy(dict(base.output_schema))
    passages = outputs["properties"]["passages"]
    passages["maxItems"] = 10
    passages["items"]["properties"]["relevance"] = {"type": "number", "minimum": 0, "maximum": 1}
    return replace(base, version="1.1.0", input_schema=inputs, output_schema=outputs)


def _read_equipment_1_0_1() -> Contract:
    """Description clarification: sharper use-when / avoid-when; same schema and effect."""
    base = read_equipment.CONTRACT
    return replace(
        base,
        version="1.0.1",
        use_when=(
            "the family or revision of a named equipment id is not yet observed in this run",
        ),
        avoid_when=(
            *base.avoid_when,
            "the question is stock or availability of a part (use check_inventory)",
        ),
    )


def _check_inventory_1_1() -> Contract:
    """Error-code split: a revision change during the read becomes CONFLICT, not STALE."""
    base = check_inventory.CONTRACT
    narrowed = tuple(
        replace(r, meaning="observation older than the freshness rule (age only)")
        if r.code is ErrorCode.STALE
        else r
        for r in base.errors
    )
    conflict = ErrorRule(
        ErrorCode.CONFLICT,
        "the inventory revision changed while reading; one fresh read",
        1,
        "observation.received",
        retry_owner="adapter",
    )
    errors = (*narrowed, conflict)
    return replace(base, version="1.1.0", errors=errors)


def _reserve_part_2() -> Contract:
    """The change tabletop's proposed v2, "backward compatible because all old JSON fields
    remain": it may substitute an alternate slot, acknowledges before commit, keeps keys
    for a shorter time and reconciles against a new ledger endpoint. Every one of those
    changes consequence; none of them is visible in JSON compatibility."""
    base = reserve_part.CONTRACT
    inputs: dict[str, Any] = copy.deepcopy(dict(base.input_schema))
    inputs["properties"]["allow_alternate_slot"] = {"type": "boolean"}
    provenance: dict[str, Provenance] = {
        **dict(base.provenance),
        "allow_alternate_slot": Provenance.MODEL,
    }
    idempotency = {**dict(base.idempotency), "retention_s": 300}
    reconciliation = {
        **dict(base.reconciliation),
        "read": "ledger-v2 lookup by idempotency key (new endpoint, new owner)",
    }
    timeouts = (
        TimeoutStage("connect", 500, "before send: definitely not dispatched"),
        TimeoutStage("acknowledgement", 2000, "accepted before commit: outcome unknown"),
        TimeoutStage("result", 3000, "a late answer is ambiguous: reconcile by key"),
    )
    return replace(
        base,
        version="2.0.0",
        intent="Reserve the approved quantity of one approved part in the approved slot or, "
        "when it is short, an alternate slot chosen by the service.",
        input_schema=inputs,
        provenance=provenance,
        idempotency=idempotency,
        reconciliation=reconciliation,
        timeout_stages=timeouts,
        scope={**dict(base.scope), "audience": "synthetic-reservation-service-v2"},
    )


REVIEWED_VERSIONS: tuple[Contract, ...] = (
    _search_manual_1_1(),
    _read_equipment_1_0_1(),
    _check_inventory_1_1(),
    _reserve_part_2(),
)

# Every local reviewed contract, dispatchable or not, by ref ("id@version").
LOCAL_CONTRACTS: Mapping[str, Contract] = {
    c.ref: c for c in (*ALL_CONTRACTS.values(), *REVIEWED_VERSIONS)
}


def local_contract(capability_id: str, version: str) -> Contract | None:
    return LOCAL_CONTRACTS.get(f"{capability_id}@{version}")


def dispatchable(capability_id: str, version: str) -> bool:
    """True when the dispatch registry runs exactly this version for the id."""
    contract = ALL_CONTRACTS.get(capability_id)
    return contract is not None and contract.version == version
