"""Contract fragments several capabilities share (written once, reviewed once)."""

from __future__ import annotations

from capabilities.contracts import ErrorCode, ErrorRule, Provenance, TimeoutStage

ID_PATTERN = "^[A-Z][A-Z0-9-]{1,31}$"

TRUSTED_READ_FIELDS = {
    "tenant": {"type": "string", "minLength": 1, "maxLength": 32},
    "principal_ref": {"type": "string", "minLength": 1, "maxLength": 64},
    "run_id": {"type": "string", "minLength": 1, "maxLength": 64},
    "request_id": {"type": "string", "minLength": 1, "maxLength": 64},
}
TRUSTED_READ_PROVENANCE = {
    "tenant": Provenance.HARNESS,
    "principal_ref": Provenance.HARNESS,
    "run_id": Provenance.HARNESS,
    "request_id": Provenance.ADAPTER,
}

READ_TIMEOUTS = (
    TimeoutStage("connect", 500, "no request sent: safe to retry once"),
    TimeoutStage("result", 2000, "a read has no effect: one bounded retry"),
)

READ_ERRORS = (
    ErrorRule(ErrorCode.INVALID_ARGUMENT, "request failed the input schema", 0, "proposal.denied"),
    ErrorRule(ErrorCode.DENIED, "scope or authority refused the read", 0, "observation.received"),
    ErrorRule(
        ErrorCode.NOT_FOUND, "no such record: a valid observation", 0, "observation.received"
    ),
    ErrorRule(
        ErrorCode.TIMEOUT,
        "no answer before the result deadline (reads have no effect)",
        1,
        "observation.received",
        retry_owner="adapter",
    ),
    ErrorRule(
        ErrorCode.UNAVAILABLE,
        "service unavailable before dispatch",
        1,
        "observation.received",
        retry_owner="adapter",
    ),
    ErrorRule(
        ErrorCode.MALFORMED_RESULT,
        "the answer failed output validation; quarantined",
        0,
        "observation.received",
    ),
    ErrorRule(
        ErrorCode.RATE_LIMITED, "quota exhausted; the scheduler decides", 0, "observation.received"
    ),
)

READ_AUDIT = {
    "before_dispatch": ["run_id", "request_id", "capability", "args_digest"],
    "after_dispatch": ["outcome", "observation_id", "record_hash"],
}

DOUBLE_READ_FAULTS = [
    "before_validation",
    "after_validation_before_dispatch",
    "timeout",
    "unavailable",
    "cross_tenant_result",
]

DEPRECATION = {
    "notice": "30 days before retirement, in the catalog",
    "replacement": "a new admitted version with its own admission record",
    "removal": "retired versions leave model contexts and new dispatch at once; unknown "
    "effects stay owned until reconciled",
}

OWNER = "agentic-engineering (adapter); synthetic-world team (service semantics)"

NO_COMPENSATION = {
    "available": False,
    "note": "No compensation exists in v1. A future release capability needs its own "
    "contract, authority, idempotency and verification; it never erases the original.",
}
