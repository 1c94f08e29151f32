"""The capability boundary shared by every adapter.

An adapter joins model-proposed arguments with trusted harness and adapter fields,
validates the whole request against the contract's input schema, enforces scope, calls
the double, validates the answer against the output schema as untrusted input, and
returns a typed ``CallOutcome``. It never chooses the next state: the runner does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from capabilities.contracts import Contract, ErrorCode, Provenance
from capabilities.ports import ServiceFault, WorldPort
from kernel.canonical import digest


@dataclass(frozen=True)
class Invocation:
    """One call: model-owned ``args`` plus the trusted run binding."""

    capability: str
    args: Mapping[str, Any]
    run_id: str
    task_id: str
    tenant: str
    principal_ref: str
    scope: tuple[str, ...]
    request_id: str
    deadline: dt.datetime
    proposal_hash: str = ""
    # Resolved, admitted observations of the run (ref -> observation) and the canonical
    # proposal the harness holds for ``proposal_hash``; both read from the evidence store.
    observations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    canonical_proposal: Mapping[str, Any] | None = None
    # The fencing token of an effect dispatch: the run sequence of the event that recorded
    # its dispatch (0 for reads). The ledger refuses a commit older than one it has seen.
    fencing_token: int = 0
    # The exact contract version the run pinned: dispatch runs this version's adapter.
    version: str = ""


@dataclass(frozen=True)
class CallOutcome:
    """A typed result. ``stage``: pre_dispatch (nothing sent), definite, or ambiguous."""

    ok: bool
    data: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    stage: str = "definite"
    detail: str = ""
    attempts: int = 1
    quarantined: Mapping[str, Any] | None = None

    @classmethod
    def fail(cls, code: ErrorCode | str, stage: str, detail: str = "", **kw: Any) -> CallOutcome:
        return cls(ok=False, error=str(code), stage=stage, detail=detail, **kw)


@cache
def _validator(schema_digest: str, schema_json: str) -> Draft202012Validator:
    import json

    return Draft202012Validator(json.loads(schema_json))


# Validators by the identity of the schema object they were made for (contracts' schemas
# are built once and never change); the object is kept with its validator so its id is
# never reused for another schema while the entry lives.
_BY_IDENTITY: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}


def _validator_for(schema: Mapping[str, Any]) -> Draft202012Validator:
    held = _BY_IDENTITY.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    import json

    validator = _validator(digest(schema), json.dumps(schema, sort_keys=True))
    if len(_BY_IDENTITY) < 1024:
        _BY_IDENTITY[id(schema)] = (schema, validator)
    return validator


def schema_errors(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Return readable JSON Schema errors of ``value`` (empty when valid)."""
    validator = _validator_for(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    out = []
    for err in errors[:5]:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        message = (
            err.message
            if len(err.message) <= 160
            else (f"fails {err.validator} {err.validator_value!r}"[:160])
        )
        out.append(f"{where}: {message}")
    return out


def trusted_fields_supplied(contract: Contract, args: Mapping[str, Any]) -> list[str]:
    """Return the trusted fields a model tried to assert (denied even if values match)."""
    return sorted(
        k for k in args if contract.provenance.get(k) in (Provenance.HARNESS, Provenance.ADAPTER)
    )


Handler = Callable[[Invocation, Mapping[str, Any], WorldPort, int], CallOutcome]


def invoke(
    contract: Contract,
    handler: Handler,
    inv: Invocation,
    world: WorldPort,
    trusted: Mapping[str, Any],
) -> CallOutcome:
    """Validate and dispatch one call through ``handler``, retrying only within budget.

    ``trusted`` holds the harness- and adapter-derived fields for this invocation.
    """
    forged = trusted_fields_supplied(contract, inv.args)
    if forged:
        return CallOutcome.fail(
            ErrorCode.INVALID_ARGUMENT,
            "pre_dispatch",
            f"trusted fields supplied by the model: {', '.join(forged)}",
        )
    request = {**dict(inv.args), **dict(trusted)}
    problems = schema_errors(contract.input_schema, request)
    if problems:
        return CallOutcome.fail(ErrorCode.INVALID_ARGUMENT, "pre_dispatch", "; ".join(problems))
    attempts = 0
    while True:
        attempts += 1
        call_index = world.next_call_index(contract.id)
        if world.fires("after_validation_before_dispatch", contract.id, call_index):
            world.log(
                capability=contract.id,
                call_index=call_index,
                args=request,
                outcome="UNAVAILABLE",
                fault="after_validation_before_dispatch",
            )
            outcome = CallOutcome.fail(
                ErrorCode.UNAVAILABLE,
                "pre_dispatch",
                "transport failed before the request was sent",
            )
        else:
            try:
                outcome = handler(inv, request, world, call_index)
            except ServiceFault as fault:
                outcome = CallOutcome.fail(fault.code, fault.stage, fault.detail)
        outcome = _with_attempts(outcome, attempts)
        if outcome.ok or not _may_retry(contract, outcome, attempts):
            return outcome


def _with_attempts(outcome: CallOutcome, attempts: int) -> CallOutcome:
    return CallOutcome(
        ok=outcome.ok,
        data=outcome.data,
        error=outcome.error,
        stage=outcome.stage,
        detail=outcome.detail,
        attempts=attempts,
        quarantined=outcome.quarantined,
    )


def _may_retry(contract: Contract, outcome: CallOutcome, attempts: int) -> bool:
    """Retry only what the contract declares retryable, and never after possible dispatch."""
    if outcome.stage == "ambiguous":
        return False
    rule = contract.error(outcome.error)
    return rule is not None and rule.retry_owner == "adapter" and attempts <= rule.retry_budget


def check_output(contract: Contract, body: Any, *, tenant: str) -> CallOutcome | None:
    """Validate a service answer as untrusted input; return a failure CallOutcome or None."""
    problems = schema_errors(contract.output_schema, body)
    if problems:
        return CallOutcome.fail(
            ErrorCode.MALFORMED_RESULT,
            "definite",
            "; ".join(problems),
            quarantined={"digest": digest(body), "problems": problems},
        )
    if isinstance(body, Mapping) and "tenant" in body and body["tenant"] != tenant:
        return CallOutcome.fail(
            ErrorCode.MALFORMED_RESULT,
            "definite",
            "result belongs to another tenant (scope); quarantined",
            quarantined={"digest": digest(body), "problems": ["cross-tenant"]},
        )
    return None
