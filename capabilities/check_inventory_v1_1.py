"""check_inventory@1.1.0: an error-code split. A revision change while reading is CONFLICT
(the adapter makes one fresh read), no longer reported as STALE (age only).

1.0.0 folds the service's revision conflict into STALE, whose retry is the harness's
(the run re-reads on its next decision); 1.1.0 keeps CONFLICT distinct and retries it
itself once, inside the same call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capabilities import check_inventory
from capabilities.base import CallOutcome, Invocation, check_output
from capabilities.contracts import Contract, ErrorCode, ErrorRule
from capabilities.ports import WorldPort
from kernel import clock


def _contract() -> Contract:
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
    return replace(base, version="1.1.0", errors=(*narrowed, conflict))


CONTRACT = _contract()


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    denied = check_inventory.scope_refusal(inv, request["location_id"])
    if denied is not None:
        return denied
    body = world.check_inventory(
        call_index=call_index,
        part_id=request["part_id"],
        location_id=request["location_id"],
        tenant=inv.tenant,
    )
    failure = check_output(CONTRACT, body, tenant=inv.tenant)
    if failure:
        return failure
    age = (clock.now() - clock.parse(body["observed_at"])).total_seconds()
    if age > check_inventory.FRESHNESS_MAX_AGE_S:
        return CallOutcome.fail(
            ErrorCode.STALE,
            "definite",
            f"observation is {int(age)} s old (limit {check_inventory.FRESHNESS_MAX_AGE_S} s)",
        )
    return CallOutcome(ok=True, data=body)
