"""The local proposal union (SPEC §2).

A policy's output is parsed by an adapter into exactly one of these values. Nothing a
policy produces is ever anything else: whatever cannot be parsed is an InvalidProposal,
which validation denies at step 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ObserveIntent:
    """Request a read capability (effect class: read)."""

    capability: str
    args: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "observe"


@dataclass(frozen=True)
class ActionIntent:
    """Request a proposing or effect capability; also any tool of unknown class.

    A tool the adapter does not know is classified at the highest possible effect, so it
    crosses every validation step an effect would (and is denied at step 3).
    """

    capability: str
    args: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "action"


@dataclass(frozen=True)
class ClarifyIntent:
    question: str
    kind: str = "clarify"


@dataclass(frozen=True)
class WaitIntent:
    reason: str
    expected_event: str
    kind: str = "wait"


@dataclass(frozen=True)
class EscalateIntent:
    reason: str
    kind: str = "escalate"


@dataclass(frozen=True)
class FinalCandidate:
    artifact: Mapping[str, Any]
    claimed_evidence_refs: tuple[str, ...] = ()
    kind: str = "final"


@dataclass(frozen=True)
class AbstainIntent:
    reason: str
    kind: str = "abstain"


@dataclass(frozen=True)
class RejectionReason:
    """One typed reason an output is not a valid proposal.

    ``code`` is a stable snake_case class (``malformed_arguments``, ``model_refusal``...);
    the other fields say where and why, as data rather than prose: ``call`` is the index of
    the tool call in the turn it concerns (None for the turn as a whole) and ``tool`` its
    name; ``category`` and ``explanation`` carry a provider's refusal details; ``limit``,
    ``measured`` and ``maximum`` a size, depth or count limit that was exceeded;
    ``provider_stop`` the stop/finish reason the provider reported.
    """

    code: str
    detail: str = ""
    call: int | None = None
    tool: str = ""
    category: str = ""
    explanation: str = ""
    limit: str = ""
    measured: int | None = None
    maximum: int | None = None
    provider_stop: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The stored form: ``code`` and every field that is set."""
        out: dict[str, Any] = {"code": self.code}
        for name in REASON_FIELDS[1:]:
            value = getattr(self, name)
            if value not in ("", None):
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RejectionReason:
        def text(name: str) -> str:
            return str(data.get(name) or "")

        def number(name: str) -> int | None:
            value = data.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        return cls(
            code=text("code"),
            detail=text("detail"),
            call=number("call"),
            tool=text("tool"),
            category=text("category"),
            explanation=text("explanation"),
            limit=text("limit"),
            measured=number("measured"),
            maximum=number("maximum"),
            provider_stop=text("provider_stop"),
        )


REASON_FIELDS: tuple[str, ...] = (
    "code",
    "detail",
    "call",
    "tool",
    "category",
    "explanation",
    "limit",
    "measured",
    "maximum",
    "provider_stop",
)


@dataclass(frozen=True)
class InvalidProposal:
    """The adapter could not produce one valid local proposal (INVALID_PROPOSAL).

    ``reason_code`` is the primary class (what validation step 2 denies with);
    ``reasons`` lists every reason found in the output, the primary one first.
    """

    reason_code: str
    detail: str = ""
    kind: str = "invalid"
    reasons: tuple[RejectionReason, ...] = ()


Proposal = (
    ObserveIntent
    | ActionIntent
    | ClarifyIntent
    | WaitIntent
    | EscalateIntent
    | FinalCandidate
    | AbstainIntent
    | InvalidProposal
)
CapabilityRequest = ObserveIntent | ActionIntent

# Control outcomes are trusted local pseudo-capabilities (SPEC §3); their tool names map
# onto these proposal kinds.
CONTROL_OUTCOMES: Mapping[str, str] = {
    "ask_user": "clarify",
    "wait_for_event": "wait",
    "no_applicable_tool": "abstain",
}


def to_dict(proposal: Proposal) -> dict[str, Any]:
    """Return the stored form of a proposal (what evidence keeps)."""
    if isinstance(proposal, (ObserveIntent, ActionIntent)):
        return {
            "kind": proposal.kind,
            "capability": proposal.capability,
            "args": dict(proposal.args),
        }
    if isinstance(proposal, ClarifyIntent):
        return {"kind": proposal.kind, "question": proposal.question}
    if isinstance(proposal, WaitIntent):
        return {
            "kind": proposal.kind,
            "reason": proposal.reason,
            "expected_event": proposal.expected_event,
        }
    if isinstance(proposal, EscalateIntent):
        return {"kind": proposal.kind, "reason": proposal.reason}
    if isinstance(proposal, FinalCandidate):
        return {
            "kind": proposal.kind,
            "artifact": dict(proposal.artifact),
            "claimed_evidence_refs": list(proposal.claimed_evidence_refs),
        }
    if isinstance(proposal, AbstainIntent):
        return {"kind": proposal.kind, "reason": proposal.reason}
    out: dict[str, Any] = {
        "kind": proposal.kind,
        "reason_code": proposal.reason_code,
        "detail": proposal.detail,
    }
    if proposal.reasons:
        out["reasons"] = [r.as_dict() for r in proposal.reasons]
    return out


def from_dict(data: Mapping[str, Any]) -> Proposal:
    """Rebuild a proposal from its stored form; malformed data is an InvalidProposal."""
    try:
        kind = data["kind"]
        if kind == "observe":
            return ObserveIntent(str(data["capability"]), dict(data["args"]))
        if kind == "action":
            return ActionIntent(str(data["capability"]), dict(data["args"]))
        if kind == "clarify":
            return ClarifyIntent(str(data["question"]))
        if kind == "wait":
            return WaitIntent(str(data["reason"]), str(data["expected_event"]))
        if kind == "escalate":
            return EscalateIntent(str(data["reason"]))
        if kind == "final":
            return FinalCandidate(
                dict(data["artifact"]), tuple(str(r) for r in data["claimed_evidence_refs"])
            )
        if kind == "abstain":
            return AbstainIntent(str(data["reason"]))
        if kind == "invalid":
            reasons = data.get("reasons") or []
            return InvalidProposal(
                str(data["reason_code"]),
                str(data.get("detail", "")),
                reasons=tuple(
                    RejectionReason.from_dict(r) for r in reasons if isinstance(r, Mapping)
                ),
            )
    except (KeyError, TypeError, ValueError) as exc:
        return InvalidProposal("stored_proposal_malformed", str(exc))
    return InvalidProposal("unknown_proposal_kind", str(data.get("kind")))


def summary(proposal: Proposal) -> str:
    """Return a one-line human summary for timelines."""
    if isinstance(proposal, (ObserveIntent, ActionIntent)):
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(proposal.args.items()))
        return f"{proposal.capability}({args})"
    if isinstance(proposal, ClarifyIntent):
        return f"ask_user: {proposal.question}"
    if isinstance(proposal, WaitIntent):
        return f"wait_for_event: {proposal.expected_event}"
    if isinstance(proposal, EscalateIntent):
        return f"escalate: {proposal.reason}"
    if isinstance(proposal, FinalCandidate):
        return "final candidate"
    if isinstance(proposal, AbstainIntent):
        return f"no_applicable_tool: {proposal.reason}"
    return f"INVALID_PROPOSAL: {proposal.reason_code}"
