"""read_equipment@1.0.1: a description clarification (sharper use-when / avoid-when).

Same schemas, same effect, same service call: what changes is what a model is told (the
model projection), so routing and exposure fixtures re-run. Its adapter is its own and
validates against this version's contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capabilities import read_equipment
from capabilities.base import CallOutcome, Invocation, check_output
from capabilities.contracts import Contract
from capabilities.ports import WorldPort

CONTRACT: Contract = replace(
    read_equipment.CONTRACT,
    version="1.0.1",
    use_when=("the family or revision of a named equipment id is not yet observed in this run",),
    avoid_when=(
        *read_equipment.CONTRACT.avoid_when,
        "the question is stock or availability of a part (use check_inventory)",
    ),
)


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    body = world.read_equipment(
        call_index=call_index, equipment_id=request["equipment_id"], tenant=inv.tenant
    )
    view = {k: v for k, v in body.items() if k != "owner_contact"}
    failure = check_output(CONTRACT, view, tenant=inv.tenant)
    return failure or CallOutcome(ok=True, data=view)
