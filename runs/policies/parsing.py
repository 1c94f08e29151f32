"""What every provider adapter shares: the rejection classes and the one decision that
turns "some text and some tool calls" into exactly one local proposal.

Each adapter only knows its provider's message shape. It extracts the assistant text and
the tool calls (name + decoded arguments, or the reason decoding failed) and hands them to
``decide``, so the OpenAI-style and the Anthropic-style adapter reject the same things
with the same stable reason codes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runs.domain.proposals import (
    CONTROL_OUTCOMES,
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    Proposal,
    WaitIntent,
)
from runs.policies import provider_errors


class Reject(StrEnum):
    """Typed parse failures: the ``reason_code`` of the InvalidProposal an adapter returns.

    Validation step 2 denies every one as ``invalid_proposal:<code>`` and charges the
    correction budget.
    """

    UNKNOWN_SHAPE = "unknown_shape"  # not a message of this provider's vocabulary
    EMPTY_OUTPUT = "empty_output"  # neither text nor a tool call
    MIXED_OUTPUT = "mixed_output"  # final text and a tool call without declared order
    MULTIPLE_TOOL_CALLS = "multiple_tool_calls"  # more than one call in one turn
    TWO_EFFECT_CALLS = "two_effect_calls"  # more than one action-class call in one turn
    MULTIPLE_CHOICES = "multiple_choices"  # n > 1 candidates: provider order would decide
    HANDOFF = "handoff_not_admitted"  # FieldOps has no admitted handoff type
    MALFORMED_TOOL_CALL = "malformed_tool_call"  # a call without a name or function
    MALFORMED_ARGUMENTS = "malformed_arguments"  # arguments not one unambiguous JSON object
    MALFORMED_FINAL = "malformed_final"  # a {"final": ...} answer without artifact/refs
    REFUSAL = "model_refusal"  # the model declined to answer
    TRUNCATED = "truncated_output"  # the provider cut the output (length, paused turn)
    PROVIDER_EXECUTED_TOOL = "provider_executed_tool"  # a server-side tool ran unvalidated


# Not a parse failure: a well-formed call to a tool name the adapter does not know becomes
# an ActionIntent (classified at the highest effect), which validation step 3 denies with
# ``unknown_capability`` and charges to the action budget. ``classify`` names it.
UNKNOWN_TOOL = "unknown_tool"

HANDOFF_PREFIXES = ("transfer_to_", "handoff")

# The declared inputs of the trusted control outcomes (SPEC §3). Anything else supplied
# with a control call is rejected rather than silently dropped.
CONTROL_FIELDS: Mapping[str, frozenset[str]] = {
    "ask_user": frozenset({"question"}),
    "wait_for_event": frozenset({"reason", "expected_event"}),
    "no_applicable_tool": frozenset({"reason"}),
}

MAX_FINAL_TEXT = 4000


@dataclass(frozen=True)
class ToolCall:
    """One tool call as an adapter extracted it; ``problem`` is a Reject code or ""."""

    name: Any
    args: Any = field(default_factory=dict)
    problem: str = ""
    detail: str = ""


def invalid(code: Reject | str, detail: str = "") -> InvalidProposal:
    return InvalidProposal(str(code), detail[:300])


def provider_error(error_class: str, detail: str = "") -> InvalidProposal:
    return InvalidProposal(provider_errors.reason(error_class), detail[:300])


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Duplicate(", ".join(sorted({k for k in keys if keys.count(k) > 1})))
    return dict(pairs)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_arguments(text: str) -> tuple[dict[str, Any] | None, str]:
    """Decode a JSON arguments string; return (object, "") or (None, detail).

    Duplicate keys and NaN/Infinity are rejected: either would let the decoder, not the
    proposal, decide a value.
    """
    if not text.strip():
        return {}, ""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _Duplicate as exc:
        return None, f"duplicate argument keys: {exc}"
    except ValueError:
        return None, "arguments are not valid JSON"
    if not isinstance(value, dict):
        return None, "arguments are not a JSON object"
    return value, ""


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def tool_proposal(name: Any, args: Any, kinds: Mapping[str, str]) -> Proposal:
    """Map one tool call (name, decoded args) onto the local union.

    ``kinds`` maps known capability ids to "observe" | "action" | "control". A name the
    adapter does not know is classified at the highest effect (ActionIntent); validation
    denies it at step 3.
    """
    if not isinstance(name, str) or not name.strip():
        return invalid(Reject.MALFORMED_TOOL_CALL, "tool call without a name")
    if name.startswith(HANDOFF_PREFIXES):
        return invalid(Reject.HANDOFF, name)
    if not isinstance(args, Mapping):
        return invalid(Reject.MALFORMED_ARGUMENTS, "arguments are not a JSON object")
    if not _finite(args):
        return invalid(Reject.MALFORMED_ARGUMENTS, "arguments hold a non-finite number")
    control = CONTROL_OUTCOMES.get(name)
    if control is not None:
        extra = sorted(set(args) - CONTROL_FIELDS[name])
        if extra:
            return invalid(Reject.MALFORMED_ARGUMENTS, f"{name} takes no {', '.join(extra)}")
        if any(not isinstance(v, str) for v in args.values()):
            return invalid(Reject.MALFORMED_ARGUMENTS, f"{name} takes text arguments only")
        if control == "clarify":
            return ClarifyIntent(args.get("question", ""))
        if control == "wait":
            return WaitIntent(args.get("reason", ""), args.get("expected_event", ""))
        return AbstainIntent(args.get("reason", ""))
    if kinds.get(name) == "observe":
        return ObserveIntent(name, dict(args))
    return ActionIntent(name, dict(args))


def final_proposal(text: str) -> Proposal:
    """Plain assistant text is a final candidate; a JSON ``{"final": ...}`` carries refs."""
    try:
        data = json.loads(text)
    except ValueError:
        return FinalCandidate({"text": text[:MAX_FINAL_TEXT]}, ())
    if isinstance(data, Mapping) and "final" in data:
        final = data["final"]
        if not isinstance(final, Mapping):
            return invalid(Reject.MALFORMED_FINAL, "final must be an object")
        refs = final.get("claimed_evidence_refs", [])
        artifact = final.get("artifact", {})
        if not isinstance(refs, list) or not isinstance(artifact, Mapping):
            return invalid(Reject.MALFORMED_FINAL, "final needs an artifact object and a refs list")
        return FinalCandidate(dict(artifact), tuple(str(r) for r in refs))
    return FinalCandidate({"text": text[:MAX_FINAL_TEXT]}, ())


def decide(text: str, calls: Sequence[ToolCall], kinds: Mapping[str, str]) -> Proposal:
    """Return the one proposal that ``text`` and ``calls`` (one assistant turn) make.

    FieldOps declares no ordering between a final answer and a tool call, and admits one
    proposal per turn, so text beside a call, and two calls, are rejected rather than
    letting provider ordering decide authority.
    """
    if calls and text.strip():
        return invalid(Reject.MIXED_OUTPUT, "final text and a tool call without declared order")
    if len(calls) > 1:
        parsed = [_one(c, kinds) for c in calls]
        effects = [p for p in parsed if isinstance(p, ActionIntent)]
        if len(effects) > 1:
            return invalid(Reject.TWO_EFFECT_CALLS, ", ".join(p.capability for p in effects))
        return invalid(Reject.MULTIPLE_TOOL_CALLS, f"{len(calls)} calls in one turn")
    if calls:
        return _one(calls[0], kinds)
    if text.strip():
        return final_proposal(text.strip())
    return invalid(Reject.EMPTY_OUTPUT, "no tool call and no text")


def _one(call: ToolCall, kinds: Mapping[str, str]) -> Proposal:
    if call.problem:
        return invalid(call.problem, call.detail)
    return tool_proposal(call.name, call.args, kinds)


def classify(proposal: Proposal, kinds: Mapping[str, str]) -> str:
    """Name how a parsed proposal will be rejected ("" if the adapter has no objection).

    An InvalidProposal's class is its reason code; a request for a tool the adapter does
    not know is ``unknown_tool`` (denied later, at validation step 3).
    """
    if isinstance(proposal, InvalidProposal):
        return proposal.reason_code
    if isinstance(proposal, ActionIntent) and proposal.capability not in kinds:
        return UNKNOWN_TOOL
    return ""
