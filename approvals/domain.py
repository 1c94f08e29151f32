"""Binding rules for exact approvals (SPEC §4), pure.

A reservation proposal is canonicalized once; its hash is what an approver approves and
what the dispatch must match. ``"1"`` and ``1`` are the same quantity; units are never
converted silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernel.canonical import digest

CANONICALIZATION_VERSION = "reservation-canonical@1"
_QUANTITY = re.compile(r"^[1-9][0-9]{0,3}$")
MAX_QUANTITY = 50


class ProposalError(ValueError):
    """A proposal that cannot be canonicalized. ``code`` is a stable reason code."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")


def canonical_quantity(value: Any) -> int:
    """Return the quantity as an int; ``"1"`` and ``1`` are equal. Raise ProposalError."""
    if isinstance(value, bool):
        raise ProposalError("invalid_quantity", "quantity must be a whole number")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _QUANTITY.match(value.strip()):
        number = int(value.strip())
    else:
        raise ProposalError("invalid_quantity", f"quantity {value!r} is not a whole number")
    if not 1 <= number <= MAX_QUANTITY:
        raise ProposalError("invalid_quantity", f"quantity must be 1..{MAX_QUANTITY}")
    return number


def canonical_unit(requested: str | None, part_unit: str) -> str:
    """Return the part's unit; refuse a different unit instead of converting it."""
    if requested is None or requested.strip().lower() == part_unit:
        return part_unit
    raise ProposalError(
        "unit_conversion_refused",
        f"part is counted in {part_unit!r}; {requested!r} is not converted silently",
    )


@dataclass(frozen=True)
class CanonicalProposal:
    content: Mapping[str, Any]
    hash: str


def canonicalize(
    *,
    tenant: str,
    principal_ref: str,
    task_id: str,
    run_id: str,
    part_id: str,
    slot_id: str,
    location_id: str,
    quantity: Any,
    unit: str | None,
    part_unit: str,
    evidence_refs: Sequence[str],
    proposed_at: str,
    expires_at: str,
) -> CanonicalProposal:
    """Return the exact proposal an approver sees and the hash a decision must bind."""
    content = {
        "canonicalization": CANONICALIZATION_VERSION,
        "effect": "reserve_part",
        "tenant": tenant,
        "principal_ref": principal_ref,
        "task_id": task_id,
        "run_id": run_id,
        "part_id": part_id.strip().upper(),
        "slot_id": slot_id.strip().upper(),
        "location_id": location_id,
        "quantity": canonical_quantity(quantity),
        "unit": canonical_unit(unit, part_unit),
        "evidence_refs": sorted(set(evidence_refs)),
        "proposed_at": proposed_at,
        "expires_at": expires_at,
    }
    return CanonicalProposal(content=content, hash=digest(content))


def proposal_hash(content: Mapping[str, Any]) -> str:
    return digest(dict(content))


# Reasons a decision is refused. Each is shown to the approver and recorded.
REFUSALS: Mapping[str, str] = {
    "hash_mismatch": "The proposal changed since you opened it: the hash you reviewed does "
    "not match. Reload to review the current proposal.",
    "checkpoint_expired": "This checkpoint expired before your decision; the run has moved on.",
    "already_decided": "This checkpoint was already decided; a decision is single use.",
    "run_not_waiting": "The run is no longer waiting for this decision (cancelled or ended).",
    "self_approval": "You requested this run; someone else must approve it.",
    "not_an_approver": "Only members of the approver role may decide approvals.",
    "wrong_tenant": "This checkpoint belongs to another tenant.",
    "reason_required": "A decision needs a reason.",
    "not_an_approval": "This checkpoint asks a question; answer it instead of approving.",
    "invalid_requested_change": "The requested change names a field that is not part of "
    "the proposal.",
    "busy": "The run is busy (another transaction holds it); nothing was recorded. "
    "Try again in a few seconds.",
}

CHANGEABLE_FIELDS: tuple[str, ...] = ("slot_id", "quantity", "part_id", "location_id")


def decision_refusal(
    *,
    seen_hash: str,
    checkpoint_hash: str,
    checkpoint_status: str,
    expired: bool,
    run_waiting_here: bool,
    approver_ref: str,
    requester_ref: str,
    approver_has_role: bool,
    reason: str,
) -> str | None:
    """Return the refusal code for a decision attempt, or None if it may be recorded.

    The checks run cheapest-authority-first: role, self-approval, liveness, then the hash.
    """
    if not approver_has_role:
        return "not_an_approver"
    if approver_ref == requester_ref:
        return "self_approval"
    if checkpoint_status != "PENDING":
        return "already_decided"
    if not run_waiting_here:
        return "run_not_waiting"
    if expired:
        return "checkpoint_expired"
    if seen_hash != checkpoint_hash:
        return "hash_mismatch"
    if not reason.strip():
        return "reason_required"
    return None


def requested_change_problems(change: Mapping[str, Any]) -> str | None:
    unknown = sorted(set(change) - set(CHANGEABLE_FIELDS))
    if unknown:
        return "invalid_requested_change"
    return None
