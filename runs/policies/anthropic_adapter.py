"""Adapter for Anthropic-style Messages API output (a ``message`` whose ``content`` is a
list of blocks: ``text``, ``tool_use``, ``thinking``...) into exactly one local proposal,
or a typed parse failure.

Shapes, in the order they are checked:

- ``{"type": "error", "error": {"type": ...}}`` -> ``provider_error:<class>``
- ``server_tool_use`` / ``*_tool_result`` / ``mcp_tool_use`` blocks: the provider ran a
  tool itself, outside validation -> ``provider_executed_tool``
- ``stop_reason == "refusal"`` -> ``model_refusal``; ``"max_tokens"`` or ``"pause_turn"``
  -> ``truncated_output``
- ``thinking`` / ``redacted_thinking`` blocks are declared reasoning, not output: kept as
  evidence, ignored by the parse
- any other unknown block type -> ``unknown_shape``
- then text and ``tool_use`` blocks go through ``parsing.decide``, exactly as the
  OpenAI-style adapter's text and ``tool_calls`` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import parsing, provider_errors
from runs.policies.parsing import Reject, ToolCall

VERSION = "anthropic-tool-use-adapter@1.0.0"
PROVIDER = "anthropic"

REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
PROVIDER_EXECUTED_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "mcp_tool_result"})


def parse(raw: Mapping[str, Any], kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    if not isinstance(raw, Mapping):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object")
    if raw.get("type") == "error":
        error = raw.get("error")
        detail = str(error.get("message", "")) if isinstance(error, Mapping) else ""
        return parsing.provider_error(provider_errors.from_body(error), detail)
    if raw.get("type", "message") != "message" or raw.get("role", "assistant") != "assistant":
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not an assistant message")
    blocks = raw.get("content")
    if not isinstance(blocks, list):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "content is not a list of blocks")
    kinds_seen = [b.get("type") if isinstance(b, Mapping) else None for b in blocks]
    executed = [
        k
        for k in kinds_seen
        if isinstance(k, str) and (k in PROVIDER_EXECUTED_BLOCKS or k.endswith("_tool_result"))
    ]
    if executed:
        return parsing.invalid(Reject.PROVIDER_EXECUTED_TOOL, ", ".join(sorted(set(executed))))
    stop = raw.get("stop_reason")
    if stop == "refusal":
        return parsing.invalid(Reject.REFUSAL, _joined_text(blocks))
    if stop in ("max_tokens", "pause_turn"):
        return parsing.invalid(Reject.TRUNCATED, f"stop_reason {stop}")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block, kind in zip(blocks, kinds_seen, strict=True):
        if kind in REASONING_BLOCKS:
            continue
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            calls.append(_call(block))
        else:
            return parsing.invalid(Reject.UNKNOWN_SHAPE, f"content block {kind!r}")
    return parsing.decide("".join(texts), calls, kinds)


def _joined_text(blocks: Sequence[Any]) -> str:
    return " ".join(
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _call(block: Mapping[str, Any]) -> ToolCall:
    name = block.get("name")
    arguments = block.get("input", {})
    if not isinstance(arguments, Mapping):
        return ToolCall(
            name, problem=Reject.MALFORMED_ARGUMENTS, detail="input is not a JSON object"
        )
    return ToolCall(name, dict(arguments))


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str, calls: Sequence[tuple[str, Mapping[str, Any], str]]
) -> dict[str, Any]:
    """Render one assistant message with a text block and ``tool_use`` blocks."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args, call_id in calls:
        content.append(
            {"type": "tool_use", "id": f"toolu_{call_id}", "name": name, "input": dict(args)}
        )
    return {
        "id": f"msg_{calls[0][2] if calls else 'text'}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
    }


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
