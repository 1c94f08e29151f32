"""Adapter for OpenAI-style chat-completions output (an assistant message with
``tool_calls``) into exactly one local proposal, or a typed parse failure."""

from __future__ import annotations

import json
from collections.abc import Mapping
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

VERSION = "openai-tool-calls-adapter@1.0.0"
HANDOFF_PREFIXES = ("transfer_to_", "handoff")


def tool_proposal(name: Any, args: Any, kinds: Mapping[str, str]) -> Proposal:
    """Map one tool call (name, decoded args) onto the local union.

    ``kinds`` maps known capability ids to "observe" | "action". A name the adapter does
    not know is classified at the highest effect (ActionIntent); validation denies it.
    """
    if not isinstance(name, str) or not name:
        return InvalidProposal("malformed_tool_call", "tool call without a name")
    if name.startswith(HANDOFF_PREFIXES):
        return InvalidProposal("handoff_not_admitted", name)
    if not isinstance(args, Mapping):
        return InvalidProposal("malformed_arguments", "arguments are not a JSON object")
    control = CONTROL_OUTCOMES.get(name)
    if control == "clarify":
        return ClarifyIntent(str(args.get("question", "")))
    if control == "wait":
        return WaitIntent(str(args.get("reason", "")), str(args.get("expected_event", "")))
    if control == "abstain":
        return AbstainIntent(str(args.get("reason", "")))
    if kinds.get(name) == "observe":
        return ObserveIntent(name, dict(args))
    return ActionIntent(name, dict(args))


def final_proposal(text: str) -> Proposal:
    """Plain assistant text is a final candidate; a JSON ``{"final": ...}`` carries refs."""
    try:
        data = json.loads(text)
    except ValueError:
        return FinalCandidate({"text": text[:4000]}, ())
    if isinstance(data, Mapping) and isinstance(data.get("final"), Mapping):
        final = data["final"]
        refs = final.get("claimed_evidence_refs", [])
        artifact = final.get("artifact", {})
        if not isinstance(refs, list) or not isinstance(artifact, Mapping):
            return InvalidProposal("malformed_final", "final needs artifact and refs")
        return FinalCandidate(dict(artifact), tuple(str(r) for r in refs))
    return FinalCandidate({"text": text[:4000]}, ())


def parse(raw: Mapping[str, Any], kinds: Mapping[str, str]) -> Proposal:
    message = raw.get("message", raw) if isinstance(raw, Mapping) else None
    if not isinstance(message, Mapping):
        return InvalidProposal("unknown_shape", "output is not a message object")
    if message.get("refusal"):
        return InvalidProposal("model_refusal", str(message["refusal"])[:200])
    calls = message.get("tool_calls") or []
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if not isinstance(calls, list):
        return InvalidProposal("unknown_shape", "tool_calls is not a list")
    if calls and text.strip():
        return InvalidProposal("mixed_output", "final text and a tool call without declared order")
    if len(calls) > 1:
        parsed = [_call(c, kinds) for c in calls]
        effects = [p for p in parsed if isinstance(p, ActionIntent)]
        if len(effects) > 1:
            return InvalidProposal("two_effect_calls", ", ".join(p.capability for p in effects))
        return InvalidProposal("multiple_tool_calls", f"{len(calls)} calls in one turn")
    if calls:
        return _call(calls[0], kinds)
    if text.strip():
        return final_proposal(text)
    return InvalidProposal("empty_output", "no tool call and no text")


def _call(call: Any, kinds: Mapping[str, str]) -> Proposal:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return InvalidProposal("malformed_tool_call", "tool call without a function")
    function = call["function"]
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return InvalidProposal("malformed_arguments", "arguments are not valid JSON")
    return tool_proposal(function.get("name"), arguments, kinds)


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """Render one tool call as an OpenAI-style assistant message (used by the double)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(args), sort_keys=True)},
            }
        ],
    }


def render_text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}
