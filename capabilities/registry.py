"""The reviewed catalog in code: every implemented contract version, its adapter, and the
one dispatch path.

Several versions of one capability live here at once (``IMPLEMENTATIONS``, by
``id@version``); each is a module of its own with its own contract, digest, schemas and
adapter. The runner never calls an adapter directly: it calls ``dispatch`` with an
Invocation naming the exact version the run pinned, and an unknown or unnamed version is
DENIED before anything is sent. ``CAPABILITIES`` holds the first version of each id (the
vocabulary: ids, kinds, approval rules, which every version of an id shares).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from capabilities import (
    check_inventory,
    check_inventory_v1_1,
    propose_reservation,
    read_equipment,
    read_equipment_v1_0_1,
    reserve_part,
    search_manual,
    search_manual_v1_1,
)
from capabilities.base import CallOutcome, Handler, Invocation, invoke
from capabilities.contracts import Contract, ErrorCode, Provenance, version_key
from capabilities.controls import CONTROL_CONTRACTS
from capabilities.ports import WorldPort
from fieldops import telemetry
from kernel import clock

_MODULES = (read_equipment, search_manual, check_inventory, propose_reservation, reserve_part)

CAPABILITIES: Mapping[str, Contract] = {m.CONTRACT.id: m.CONTRACT for m in _MODULES}
CONTROLS: Mapping[str, Contract] = {c.id: c for c in CONTROL_CONTRACTS}
ALL_CONTRACTS: Mapping[str, Contract] = {**CAPABILITIES, **CONTROLS}
HANDLERS: Mapping[str, Handler] = {m.CONTRACT.id: m.handle for m in _MODULES}
# Later reviewed versions with their own adapters (each module names one version).
_LATER_VERSIONS = (search_manual_v1_1, read_equipment_v1_0_1, check_inventory_v1_1)


@dataclass(frozen=True)
class Implementation:
    """One dispatchable contract version and the adapter that serves exactly it."""

    contract: Contract
    handler: Handler


IMPLEMENTATIONS: Mapping[str, Implementation] = {
    m.CONTRACT.ref: Implementation(m.CONTRACT, m.handle) for m in (*_MODULES, *_LATER_VERSIONS)
}


def implementation(capability_id: str, version: str) -> Implementation | None:
    return IMPLEMENTATIONS.get(f"{capability_id}@{version}")


def contract_for(capability_id: str, version: str) -> Contract | None:
    """The code contract of exactly ``capability_id@version`` (controls have one version)."""
    found = implementation(capability_id, version)
    if found is not None:
        return found.contract
    control = CONTROLS.get(capability_id)
    return control if control is not None and control.version == version else None


def dispatchable(capability_id: str, version: str) -> bool:
    """True when the code has an adapter for exactly this version (dispatch can run it)."""
    return implementation(capability_id, version) is not None


def versions_of(capability_id: str) -> list[str]:
    """The implemented versions of an id, oldest first."""
    return sorted(
        (i.contract.version for i in IMPLEMENTATIONS.values() if i.contract.id == capability_id),
        key=version_key,
    )


# The component set a run pins: every contract version it may use, with its digest.
def component_set() -> dict[str, str]:
    return {c.id: f"{c.version}#{c.digest[:16]}" for c in ALL_CONTRACTS.values()}


def trusted_fields(contract: Contract, inv: Invocation) -> dict[str, object]:
    """Return the harness- and adapter-derived fields for ``inv`` (the model supplies none)."""
    available: dict[str, object] = {
        "tenant": inv.tenant,
        "principal_ref": inv.principal_ref,
        "task_id": inv.task_id,
        "run_id": inv.run_id,
        "proposal_hash": inv.proposal_hash,
        "request_id": inv.request_id,
        "credential_ref": f"cred:{inv.tenant}-reservations",
        "deadline": clock.iso(inv.deadline),
    }
    if contract.id == "reserve_part":
        available["idempotency_key"] = reserve_part.semantic_key(reserve_part.intent_for(inv))
        available["fencing_token"] = inv.fencing_token
    wanted = contract.fields_by(Provenance.HARNESS) + contract.fields_by(Provenance.ADAPTER)
    return {k: available[k] for k in wanted}


@telemetry.traced_tool_call
def dispatch(inv: Invocation, world: WorldPort) -> CallOutcome:
    """Invoke exactly ``inv.capability@inv.version`` through that version's contract and
    adapter; an unknown id, an unnamed version or a version without an adapter is DENIED
    before dispatch (nothing is sent, no other version stands in)."""
    if inv.capability not in CAPABILITIES:
        return CallOutcome.fail(ErrorCode.DENIED, "pre_dispatch", "not an admitted capability")
    found = implementation(inv.capability, inv.version)
    if found is None:
        return CallOutcome.fail(
            ErrorCode.DENIED,
            "pre_dispatch",
            f"no adapter for {inv.capability}@{inv.version or '(no version pinned)'}",
        )
    contract = found.contract
    return invoke(contract, found.handler, inv, world, trusted_fields(contract, inv))


def default_deadline() -> dt.datetime:
    return clock.now() + dt.timedelta(seconds=5)
