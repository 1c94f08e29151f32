"""search_manual@1.1.0: up to ten passages instead of three, each with a relevance score.

An observation-only change (the diff page classifies it ``optional_read_field``): no
domain effect changed, but context volume, injection surface and selection did. The
adapter asks the manual index for scored passages and validates the answer against this
version's own output schema; 1.0.0 keeps its own adapter and schema.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from capabilities import search_manual
from capabilities.base import CallOutcome, Invocation, check_output
from capabilities.contracts import Contract
from capabilities.ports import WorldPort

MAX_PASSAGES = 10


def _contract() -> Contract:
    base = search_manual.CONTRACT
    inputs: dict[str, Any] = copy.deepcopy(dict(base.input_schema))
    inputs["properties"]["max_passages"]["maximum"] = MAX_PASSAGES
    outputs: dict[str, Any] = copy.deepcopy(dict(base.output_schema))
    passages = outputs["properties"]["passages"]
    passages["maxItems"] = MAX_PASSAGES
    passages["items"]["properties"]["relevance"] = {"type": "number", "minimum": 0, "maximum": 1}
    # ``relevance`` is an optional output field in the schema (older readers ignore it);
    # this version's adapter asks the index for it on every passage.
    return replace(base, version="1.1.0", input_schema=inputs, output_schema=outputs)


CONTRACT = _contract()


def handle(
    inv: Invocation, request: Mapping[str, Any], world: WorldPort, call_index: int
) -> CallOutcome:
    body = world.search_manual(
        call_index=call_index,
        query=request["query"],
        family=request["family"],
        max_passages=int(request.get("max_passages", MAX_PASSAGES)),
        tenant=inv.tenant,
        scored=True,
    )
    failure = check_output(CONTRACT, body, tenant=inv.tenant)
    return failure or CallOutcome(ok=True, data=body)
