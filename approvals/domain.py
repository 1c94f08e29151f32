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
from kernel.text import bidi_control_refusal, field_name_shown, shows_nothing

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


# Bounds of what a person may send with a decision (SPEC §4). Larger inputs are refused
# with ``input_too_large`` (a 400 that is recorded), never truncated silently.
MAX_REASON_CHARS = 1000
MAX_CHANGE_VALUE_CHARS = 64
MAX_ANSWER_CHARS = 1000
MAX_HASH_CHARS = 64

# Reasons a decision is refused. Each is shown to the approver and recorded.
REFUSALS: Mapping[str, str] = {
    "hash_mismatch": "The page was altered: the hash you reviewed does not match this "
    "proposal, nor any proposal this run made, so it is not what FieldOps showed. Reload the "
    "page and review the proposal again.",
    "proposal_changed": "The proposal changed since you opened it: you reviewed an earlier "
    "proposal of this run, and the hash you saw does not match the one waiting now. Review "
    "the current proposal.",
    "checkpoint_expired": "This checkpoint expired before your decision; the run has moved on.",
    "already_decided": "This checkpoint was already decided; a decision is single use.",
    "quorum_complete": "The approvals this checkpoint needed are complete; your approval is "
    "not needed and was not counted.",
    "already_approved": "You already approved this checkpoint; the quorum needs a different "
    "approver.",
    "run_cancelled": "The run was cancelled; nothing will be dispatched.",
    "run_not_waiting": "The run is no longer waiting for this decision (it ended or moved on).",
    "self_approval": "You requested this run; someone else must approve it.",
    "not_an_approver": "Only members of the approver role may decide approvals.",
    "not_eligible": "You are not an eligible approver for this checkpoint: its approval "
    "policy names who may decide.",
    "wrong_tenant": "This checkpoint belongs to another tenant.",
    "reason_required": "A decision needs a reason.",
    # The text names the character (bidi_control_message); this is its fallback.
    "bidi_control": "A bidirectional control character (U+202A to U+202E, U+2066 to U+2069) "
    "is not allowed in a reason or an answer; nothing was decided.",
    "input_too_large": f"A reason or an answer may be at most {MAX_REASON_CHARS} characters "
    f"and each requested change at most {MAX_CHANGE_VALUE_CHARS}; nothing was decided.",
    "not_an_approval": "This checkpoint asks a question; answer it instead of approving.",
    "not_a_question": "This checkpoint asks for an approval; approve or decline it instead "
    "of answering.",
    "not_requester": "Only the person who requested the run can answer it.",
    "answer_required": "An answer is required.",
    "invalid_requested_change": "The requested change names a field that is not part of "
    "the proposal.",
    # The text names the location and the run's own (location_out_of_scope_message).
    "location_out_of_scope": "The requested location is not one this run may use; nothing "
    "was decided.",
    # The text names the field (repeated_field_message); this is its fallback.
    "repeated_field": "A field of the decision form was sent more than once, so it is "
    "ambiguous; nothing was decided.",
    "busy": "The run is busy (another transaction holds it); nothing was recorded. "
    "Try again in a few seconds.",
}

# Refusals of someone without standing to decide (403), and of a decision sent to the
# other kind of checkpoint (which anyone of the tenant may send): recorded in the refusal
# log but never written into the run's history, which an outsider must not be able to grow.
AUTHORITY_REFUSALS: frozenset[str] = frozenset(
    {"not_an_approver", "self_approval", "not_eligible", "not_requester"}
)
WRONG_KIND_REFUSALS: frozenset[str] = frozenset({"not_an_approval", "not_a_question"})
# Refusals of a decision that came too late for the checkpoint: late_approval.rejected.
LATE_REFUSALS: frozenset[str] = frozenset(
    {"checkpoint_expired", "run_not_waiting", "run_cancelled", "already_decided", "quorum_complete"}
)
# Refusals of malformed input (400).
INPUT_REFUSALS: frozenset[str] = frozenset(
    {
        "reason_required",
        "input_too_large",
        "bidi_control",
        "invalid_requested_change",
        "location_out_of_scope",
        "not_an_approval",
        "not_a_question",
        "answer_required",
    }
)

CHANGEABLE_FIELDS: tuple[str, ...] = ("slot_id", "quantity", "part_id", "location_id")

# Checkpoint statuses a decision can no longer change, and why.
_CLOSED: Mapping[str, str] = {
    "CANCELLED": "run_cancelled",
    "EXPIRED": "checkpoint_expired",
    "DECLINED": "already_decided",
    "ANSWERED": "already_decided",
}


@dataclass(frozen=True)
class DecisionAttempt:
    """Everything the refusal rules need about one decision attempt, as read."""

    seen_hash: str
    checkpoint_hash: str
    checkpoint_status: str
    expired: bool
    run_waiting_here: bool
    run_cancelled: bool
    approver_ref: str
    requester_ref: str
    approver_has_role: bool
    reason: str
    approve: bool = True
    eligible: bool = True
    quorum: int = 1
    approved_by: tuple[str, ...] = ()
    other_proposal_hashes: frozenset[str] = frozenset()
    requested_change: Mapping[str, Any] | None = None
    # The name of a form field that was sent more than once (None when none was).
    repeated_field: str | None = None
    # The locations the run's scope delegates: the only ones a requested change may name
    # (the run's re-proposal anywhere else is denied for scope, and then escalated).
    allowed_locations: tuple[str, ...] = ()


def decision_refusal(attempt: DecisionAttempt) -> str | None:
    """Return the refusal code for a decision attempt, or None if it may be recorded.

    The checks run cheapest-authority-first: role, self-approval, eligibility, the size of
    what was sent (a field sent twice, then its size) and the characters of its reason
    (``kernel.text``), the checkpoint's
    liveness (each closed state names its own cause), a second approval by the same person,
    the hash (a changed proposal apart from an altered page), then the content.
    """
    a = attempt
    if not a.approver_has_role:
        return "not_an_approver"
    if a.approver_ref == a.requester_ref:
        return "self_approval"
    if not a.eligible:
        return "not_eligible"
    if a.repeated_field is not None:
        return "repeated_field"
    if too_large(reason=a.reason, seen_hash=a.seen_hash, change=a.requested_change):
        return "input_too_large"
    if bidi_control_refusal(a.reason):
        return "bidi_control"
    closed = _CLOSED.get(a.checkpoint_status)
    if closed is not None:
        return closed
    if a.checkpoint_status in ("APPROVED", "USED"):
        return "quorum_complete" if a.quorum > 1 else "already_decided"
    if a.expired:
        return "checkpoint_expired"
    if not a.run_waiting_here:
        return "run_cancelled" if a.run_cancelled else "run_not_waiting"
    if a.approver_ref in a.approved_by:
        return "already_approved"
    if a.seen_hash != a.checkpoint_hash:
        return "proposal_changed" if a.seen_hash in a.other_proposal_hashes else "hash_mismatch"
    if shows_nothing(a.reason):
        return "reason_required"
    if a.requested_change and not a.approve:
        return requested_change_problems(a.requested_change, a.allowed_locations)
    return None


def approval_with_change(*, approve: bool, change: Mapping[str, Any] | None) -> bool:
    """An approval sent with a requested change filled in. Refused before anything is
    decided (the console's form and the API, each in its own words): dropping the change
    would approve the proposal its sender asked to change."""
    return approve and any(str(v).strip() for v in (change or {}).values() if v is not None)


def too_large(*, reason: str, seen_hash: str, change: Mapping[str, Any] | None) -> bool:
    """True when a decision's inputs exceed the bounds above."""
    if len(reason) > MAX_REASON_CHARS or len(seen_hash) > MAX_HASH_CHARS:
        return True
    if change and len(change) > len(CHANGEABLE_FIELDS):
        return True
    return any(len(str(v)) > MAX_CHANGE_VALUE_CHARS for v in (change or {}).values())


def too_large_message(
    *, reason: str = "", seen_hash: str = "", change: Mapping[str, Any] | None = None
) -> str:
    """The ``input_too_large`` refusal of these inputs with the bound they crossed and the
    size they had (the first such input in the order ``too_large`` checks them)."""
    told = "; nothing was decided."
    if len(reason) > MAX_REASON_CHARS:
        return (
            f"A reason may be at most {MAX_REASON_CHARS} characters and this one has "
            f"{len(reason)}{told}"
        )
    if len(seen_hash) > MAX_HASH_CHARS:
        return (
            f"The reviewed hash may be at most {MAX_HASH_CHARS} characters and this one has "
            f"{len(seen_hash)}{told}"
        )
    if change and len(change) > len(CHANGEABLE_FIELDS):
        return (
            f"A requested change may name at most {len(CHANGEABLE_FIELDS)} fields and this "
            f"one names {len(change)}{told}"
        )
    for key, value in (change or {}).items():
        if len(str(value)) > MAX_CHANGE_VALUE_CHARS:
            # A field name not offered is not echoed (it is whatever was sent).
            name = f"the {key} sent" if key in CHANGEABLE_FIELDS else "one sent"
            return (
                f"Each requested change may be at most {MAX_CHANGE_VALUE_CHARS} characters "
                f"and {name} has {len(str(value))}{told}"
            )
    return REFUSALS["input_too_large"]


def bidi_control_message(text: str, *, what: str = "a reason") -> str:
    """The ``bidi_control`` refusal of ``text``, naming its first such character."""
    refused = bidi_control_refusal(text, what=what) or REFUSALS["bidi_control"]
    return f"{refused}; nothing was decided."


def repeated_field_message(name: str, *, what: str = "the decision form") -> str:
    """The ``repeated_field`` refusal, naming the field sent more than once."""
    return (
        f"The field {field_name_shown(name)} of {what} was sent more than once, so what "
        "was meant is ambiguous; nothing was decided."
    )


def answer_too_large_message(answer: str) -> str:
    """The ``input_too_large`` refusal of a clarification answer over its bound."""
    return (
        f"An answer may be at most {MAX_ANSWER_CHARS} characters and this one has "
        f"{len(answer)}; nothing was recorded."
    )


def requested_change_problems(
    change: Mapping[str, Any], allowed_locations: Sequence[str] = ()
) -> str | None:
    """The refusal of a requested change: a field that is not the proposal's, or a location
    outside ``allowed_locations`` (the run could never reserve there: SPEC §2 step 7)."""
    unknown = sorted(set(change) - set(CHANGEABLE_FIELDS))
    if unknown or requested_quantity_problem(change):
        return "invalid_requested_change"
    if "location_id" in change and str(change["location_id"]) not in allowed_locations:
        return "location_out_of_scope"
    return None


def requested_quantity_problem(change: Mapping[str, Any]) -> str:
    """Why the quantity a decline asks for is none a proposal may have ("" when it asks for
    none or for one): a next proposal is validated anyway, but the record of the decision
    kept 10**30, -5 or "many" as what the approver asked for."""
    asked = change.get("quantity")
    if asked is None or (isinstance(asked, str) and not asked.strip()):
        return ""
    try:
        canonical_quantity(asked)
    except ProposalError:
        shown = repr(asked) if len(str(asked)) <= 20 else f"a number of {len(str(asked))} digits"
        return (
            f"The requested quantity {shown} is not one a proposal may have (a whole number "
            f"from 1 to {MAX_QUANTITY}); nothing was decided."
        )
    return ""


def location_out_of_scope_message(location: Any, allowed_locations: Sequence[str]) -> str:
    """The ``location_out_of_scope`` refusal, naming the location asked for and the ones
    the run may use."""
    allowed = ", ".join(allowed_locations) or "none"
    return (
        f"{str(location)!r} is not a location this run may use (it may use only {allowed}); "
        "nothing was decided."
    )


# -- who may decide: approval policies and quorum -------------------------------------------
@dataclass(frozen=True)
class PolicyRule:
    """An approval policy as stored (one row of ``approvals.ApprovalPolicy``)."""

    name: str
    capability: str
    effect_class: str = ""  # "" applies to every effect class of the capability
    world: str = ""  # "" applies to every world
    group: str = ""  # "" : the approver role of the tenant; else only this group's members
    usernames: tuple[str, ...] = ()  # () : anyone the group admits; else only these users
    quorum: int = 1
    quorum_min_quantity: int | None = None
    quorum_part_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Eligibility:
    """Who may decide one checkpoint, and how many distinct approvals it needs."""

    policy: str = ""
    group: str = ""
    usernames: tuple[str, ...] = ()
    quorum: int = 1

    def admits(self, *, username: str, groups: frozenset[str]) -> bool:
        """True when a holder of the approver role with ``groups`` is eligible."""
        if self.group and self.group not in groups:
            return False
        return not self.usernames or username in self.usernames

    def describe(self) -> str:
        who = "members of the approver role"
        if self.group:
            who += f" in group {self.group!r}"
        if self.usernames:
            who += " named " + ", ".join(self.usernames)
        need = f"{self.quorum} distinct approvals" if self.quorum > 1 else "one approval"
        return f"{who}; {need}" + (f" (policy {self.policy!r})" if self.policy else "")


DEFAULT_ELIGIBILITY = Eligibility()


def eligibility_for(
    rules: Sequence[PolicyRule],
    *,
    capability: str,
    effect_class: str,
    world: str,
    quantity: int,
    part_id: str,
) -> Eligibility:
    """The eligibility of a proposal: the most specific matching policy (an exact world
    before any world, an exact effect class before any), or the tenant's approver role with
    one approval when none matches. A policy's quorum applies when it names no condition,
    or when the quantity reaches ``quorum_min_quantity`` or the part is flagged high-value
    (``quorum_part_ids``); otherwise one approval suffices."""
    matching = [
        r
        for r in rules
        if r.capability == capability
        and r.effect_class in ("", effect_class)
        and r.world in ("", world)
    ]
    if not matching:
        return DEFAULT_ELIGIBILITY
    rule = max(matching, key=lambda r: (bool(r.world), bool(r.effect_class), r.name))
    conditional = rule.quorum_min_quantity is not None or bool(rule.quorum_part_ids)
    applies = not conditional or (
        (rule.quorum_min_quantity is not None and quantity >= rule.quorum_min_quantity)
        or part_id in rule.quorum_part_ids
    )
    return Eligibility(
        policy=rule.name,
        group=rule.group,
        usernames=tuple(rule.usernames),
        quorum=max(1, rule.quorum) if applies else 1,
    )


def quorum_met(*, quorum: int, approvals: int) -> bool:
    return approvals >= max(1, quorum)
