"""Reviewed local contract versions that are *not* admitted at first: candidates awaiting a
decision.

``catalog_sync`` stores them as DISCOVERED. An admin can diff them against the admitted
version and admit, defer or reject them in the console. Each one that has an adapter in
code (``registry.IMPLEMENTATIONS``: search_manual@1.1.0, read_equipment@1.0.1,
check_inventory@1.1.0) really runs once admitted: new runs pin the newest ADMITTED
version and dispatch goes to exactly that version. ``reserve_part@2.0.0`` is reviewed
but has no adapter: it can be diffed and decided (it is meant to be rejected), and
``dispatchable`` says so on every page.

Each version demonstrates one row of the change table in "Evolve and retire capability
versions"; the diff page classifies them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capabilities import (
    check_inventory_v1_1,
    read_equipment_v1_0_1,
    registry,
    reserve_part,
    search_manual_v1_1,
)
from capabilities.contracts import Contract, Provenance, TimeoutStage
from capabilities.registry import ALL_CONTRACTS


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
    search_manual_v1_1.CONTRACT,
    read_equipment_v1_0_1.CONTRACT,
    check_inventory_v1_1.CONTRACT,
    _reserve_part_2(),
)

# Every local reviewed contract, dispatchable or not, by ref ("id@version").
LOCAL_CONTRACTS: Mapping[str, Contract] = {
    c.ref: c for c in (*ALL_CONTRACTS.values(), *REVIEWED_VERSIONS)
}


def local_contract(capability_id: str, version: str) -> Contract | None:
    return LOCAL_CONTRACTS.get(f"{capability_id}@{version}")


def dispatchable(capability_id: str, version: str) -> bool:
    """True when the code has an adapter for exactly this version (see ``registry``)."""
    return registry.dispatchable(capability_id, version)
