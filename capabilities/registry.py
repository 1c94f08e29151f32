"""The reviewed catalog: every admitted contract, its adapter, and the one dispatch path.

The runner never calls an adapter directly; it calls ``dispatch`` with an Invocation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from capabilities import (
    check_inventory,
    propose_reservation,
    read_equipment,
    reserve_part,
    search_manual,
)
from capabilities.base import CallOutcome, Handler, Invocation, invoke
from capabilities.contracts import Contract, ErrorCode, Provenance
from capabilities.controls import CONTROL_CONTRACTS
from capabilities.ports import WorldPort
from fieldops import telemetry
from kernel import clock

_MODULES = (read_equipment, search_manual, check_inventory, propose_reservation, reserve_part)

CAPABILITIES: Mapping[str, Contract] = {m.CONTRACT.id: m.CONTRACT for m in _MODULES}
CONTROLS: Mapping[str, Contract] = {c.id: c for c in CONTROL_CONTRACTS}
ALL_CONTRACTS: Mapping[str, Contract] = {**CAPABILITIES, **CONTROLS}
HANDLERS: Mapping[str, Handler] = {m.CONTRACT.id: m.handle for m in _MODULES}


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
    """Invoke one admitted capability through its contract; unknown ids are DENIED."""
    contract = CAPABILITIES.get(inv.capability)
    if contract is None:
        return CallOutcome.fail(ErrorCode.DENIED, "pre_dispatch", "not an admitted capability")
    return invoke(contract, HANDLERS[contract.id], inv, world, trusted_fields(contract, inv))


def default_deadline() -> dt.datetime:
    return clock.now() + dt.timedelta(seconds=5)
