"""Stable local classes for failed provider calls.

Whatever went wrong between FieldOps and a model provider (a socket timeout, an HTTP
status, an error body, a body that is not JSON) is reduced to one of ``CLASSES``. The
runner turns a class into ``InvalidProposal("provider_error:<class>")``, which still
counts the turn (SPEC §1 Budgets) and is denied at validation step 2. Free-form provider
text never decides anything: it is kept, redacted and truncated, as evidence only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TIMEOUT = "timeout"
CONNECTION_FAILED = "connection_failed"
RATE_LIMITED = "rate_limited"
AUTH_REJECTED = "auth_rejected"
CLIENT_ERROR = "client_error"
SERVER_ERROR = "server_error"
OVERLOADED = "overloaded"
MALFORMED_RESPONSE = "malformed_response"
NOT_CONFIGURED = "not_configured"
UNCLASSIFIED = "unclassified"

CLASSES: tuple[str, ...] = (
    TIMEOUT,
    CONNECTION_FAILED,
    RATE_LIMITED,
    AUTH_REJECTED,
    CLIENT_ERROR,
    SERVER_ERROR,
    OVERLOADED,
    MALFORMED_RESPONSE,
    NOT_CONFIGURED,
    UNCLASSIFIED,
)

PREFIX = "provider_error:"

# Error ``type``/``code`` strings of the two vocabularies, mapped onto the local classes.
# OpenAI: {"error": {"type": ..., "code": ...}}; Anthropic: {"type": "error", "error": {"type"}}.
_BODY_CLASSES: Mapping[str, str] = {
    "rate_limit_exceeded": RATE_LIMITED,
    "rate_limit_error": RATE_LIMITED,
    "insufficient_quota": RATE_LIMITED,
    "requests": RATE_LIMITED,
    "tokens": RATE_LIMITED,
    "invalid_api_key": AUTH_REJECTED,
    "authentication_error": AUTH_REJECTED,
    "permission_error": AUTH_REJECTED,
    "invalid_request_error": CLIENT_ERROR,
    "not_found_error": CLIENT_ERROR,
    "request_too_large": CLIENT_ERROR,
    "context_length_exceeded": CLIENT_ERROR,
    "model_not_found": CLIENT_ERROR,
    "server_error": SERVER_ERROR,
    "api_error": SERVER_ERROR,
    "internal_error": SERVER_ERROR,
    "overloaded_error": OVERLOADED,
    "timeout_error": TIMEOUT,
}

# Anthropic error types (``anthropic/types/shared/error_type.py``, anthropic 2.17.0) the
# table above does not name. Each is answered with a 4xx status (``billing_error`` is HTTP
# 402, ``conflict_error`` 409), which a live call classifies as ``client_error``; from
# anthropic-tool-use-adapter@2.4.0 a replayed body of one is classified the same
# (``from_anthropic_body``). The shared table is unchanged, so every other adapter, and
# every earlier Anthropic version, reads as it did (``unclassified``).
_ANTHROPIC_TYPES: Mapping[str, str] = {
    "billing_error": CLIENT_ERROR,
    "conflict_error": CLIENT_ERROR,
    "memory_precondition_failed_error": CLIENT_ERROR,
    "memory_path_conflict_error": CLIENT_ERROR,
}


# Google's canonical error codes (google.rpc.Code), the ``status`` of a Gemini error body
# {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": ...}}.
_GOOGLE_STATUSES: Mapping[str, str] = {
    "RESOURCE_EXHAUSTED": RATE_LIMITED,
    "UNAUTHENTICATED": AUTH_REJECTED,
    "PERMISSION_DENIED": AUTH_REJECTED,
    "INVALID_ARGUMENT": CLIENT_ERROR,
    "FAILED_PRECONDITION": CLIENT_ERROR,
    "NOT_FOUND": CLIENT_ERROR,
    "OUT_OF_RANGE": CLIENT_ERROR,
    "ALREADY_EXISTS": CLIENT_ERROR,
    "ABORTED": SERVER_ERROR,
    "INTERNAL": SERVER_ERROR,
    "UNKNOWN": SERVER_ERROR,
    "DATA_LOSS": SERVER_ERROR,
    "UNIMPLEMENTED": CLIENT_ERROR,
    "UNAVAILABLE": OVERLOADED,
    "DEADLINE_EXCEEDED": TIMEOUT,
}
# ``google.rpc.ErrorInfo`` reasons more specific than the status: Gemini answers an invalid
# or expired API key with 400 INVALID_ARGUMENT and one of these in ``details``.
_GOOGLE_REASONS: Mapping[str, str] = {
    "API_KEY_INVALID": AUTH_REJECTED,
    "API_KEY_EXPIRED": AUTH_REJECTED,
    "API_KEY_SERVICE_BLOCKED": AUTH_REJECTED,
    "RATE_LIMIT_EXCEEDED": RATE_LIMITED,
}
# AWS error codes of Bedrock Runtime (the ``x-amzn-ErrorType`` / botocore ``Error.Code``).
_AWS_CODES: Mapping[str, str] = {
    "ThrottlingException": RATE_LIMITED,
    "ServiceQuotaExceededException": RATE_LIMITED,
    "TooManyRequestsException": RATE_LIMITED,
    "AccessDeniedException": AUTH_REJECTED,
    "UnrecognizedClientException": AUTH_REJECTED,
    "ExpiredTokenException": AUTH_REJECTED,
    "InvalidSignatureException": AUTH_REJECTED,
    "UnauthorizedException": AUTH_REJECTED,
    "MissingAuthenticationTokenException": AUTH_REJECTED,
    "ValidationException": CLIENT_ERROR,
    "ResourceNotFoundException": CLIENT_ERROR,
    "ConflictException": CLIENT_ERROR,
    "InternalServerException": SERVER_ERROR,
    "ModelErrorException": SERVER_ERROR,
    "ModelStreamErrorException": SERVER_ERROR,
    "ServiceUnavailableException": OVERLOADED,
    "ModelNotReadyException": OVERLOADED,
    "ModelTimeoutException": TIMEOUT,
}


def reason(error_class: str) -> str:
    """Return the InvalidProposal reason code of a provider error class."""
    return PREFIX + (error_class if error_class in CLASSES else UNCLASSIFIED)


def from_status(status: int) -> str:
    """Classify an HTTP status a provider answered with."""
    if status == 429:
        return RATE_LIMITED
    if status in (401, 403):
        return AUTH_REJECTED
    if status in (408, 504):
        return TIMEOUT
    if status == 529:
        return OVERLOADED
    if 400 <= status < 500:
        return CLIENT_ERROR
    if 500 <= status < 600:
        return SERVER_ERROR
    return UNCLASSIFIED


def from_body(error: Any) -> str:
    """Classify a provider error body (the value of its ``error`` member).

    ``code`` is more specific than ``type`` in OpenAI bodies (an ``invalid_request_error``
    with code ``invalid_api_key`` is an authentication failure), so it is looked at first;
    an integer ``code`` (OpenRouter) is the HTTP status and is classified as one.
    """
    if not isinstance(error, Mapping):
        return UNCLASSIFIED
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value in _BODY_CLASSES:
            return _BODY_CLASSES[value]
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        # OpenRouter's bodies name the HTTP status as an integer ``code``.
        return from_status(code)
    return UNCLASSIFIED


def from_anthropic_body(error: Any) -> str:
    """Classify an Anthropic error body (the value of its ``error`` member): the shared
    table, then the Anthropic types it does not name (``billing_error``...)."""
    found = from_body(error)
    kind = error.get("type") if isinstance(error, Mapping) else None
    if found == UNCLASSIFIED and isinstance(kind, str) and kind in _ANTHROPIC_TYPES:
        return _ANTHROPIC_TYPES[kind]
    return found


def from_google_error(error: Any) -> str:
    """Classify a Google API error body (the value of its ``error`` member).

    An ``ErrorInfo`` reason in ``details`` is looked at first (an invalid key is a 400
    INVALID_ARGUMENT), then the canonical ``status``, then the HTTP ``code``.
    """
    if not isinstance(error, Mapping):
        return UNCLASSIFIED
    details = error.get("details")
    for detail in details if isinstance(details, list) else []:
        found = detail.get("reason") if isinstance(detail, Mapping) else None
        if isinstance(found, str) and found in _GOOGLE_REASONS:
            return _GOOGLE_REASONS[found]
    status = error.get("status")
    if isinstance(status, str) and status in _GOOGLE_STATUSES:
        return _GOOGLE_STATUSES[status]
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return from_status(code)
    return UNCLASSIFIED


def from_aws_error(code: Any, status: Any = None) -> str:
    """Classify an AWS error by its code (``ThrottlingException``...), else its HTTP status.

    The code may carry the protocol's decorations (``aws.protocols#ValidationException``,
    ``ValidationException:http://internal.amazon.com/...``); they are dropped.
    """
    if isinstance(code, str):
        name = code.rsplit("#", 1)[-1].split(":", 1)[0].strip()
        if name in _AWS_CODES:
            return _AWS_CODES[name]
    if isinstance(status, int) and not isinstance(status, bool):
        return from_status(status)
    return UNCLASSIFIED
