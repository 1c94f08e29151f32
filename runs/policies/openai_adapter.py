"""Adapter for OpenAI-style chat-completions output into exactly one local proposal, or a
typed parse failure.

Accepts what an OpenAI-compatible endpoint returns: the whole ``chat.completion`` object,
one of its ``choices``, or the bare assistant ``message`` (``content`` and/or
``tool_calls``). Shapes, in the order they are checked:

- an ``{"error": {...}}`` body -> ``provider_error:<class>`` (see ``provider_errors``)
- more than one choice -> ``multiple_choices``
- ``refusal`` (string or content part) or ``finish_reason == "content_filter"`` ->
  ``model_refusal``; ``finish_reason == "length"`` -> ``truncated_output``
- reasoning fields (``reasoning_content``, ``reasoning``) are declared reasoning, not
  output: kept as evidence, ignored by the parse
- then text and calls go through ``parsing.decide`` (mixed output, two calls, handoffs,
  malformed arguments, unknown tools).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import parsing, provider_errors
from runs.policies.parsing import Reject, ToolCall

VERSION = "openai-tool-calls-adapter@1.1.0"
PROVIDER = "openai"

# Kept for callers of the first version of this module.
HANDOFF_PREFIXES = parsing.HANDOFF_PREFIXES
tool_proposal = parsing.tool_proposal
final_proposal = parsing.final_proposal


def parse(raw: Mapping[str, Any], kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    if not isinstance(raw, Mapping):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object")
    if raw.get("error"):
        error = raw["error"]
        detail = str(error.get("message", "")) if isinstance(error, Mapping) else ""
        return parsing.provider_error(provider_errors.from_body(error), detail)
    choice: Any = raw
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list):
            return parsing.invalid(Reject.UNKNOWN_SHAPE, "choices is not a list")
        if not choices:
            return parsing.invalid(Reject.EMPTY_OUTPUT, "no choices")
        if len(choices) > 1:
            return parsing.invalid(Reject.MULTIPLE_CHOICES, f"{len(choices)} choices")
        choice = choices[0]
    if not isinstance(choice, Mapping):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "choice is not an object")
    message = choice.get("message", choice)
    finish = choice.get("finish_reason")
    if not isinstance(message, Mapping) or not _is_assistant_message(message):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not an assistant message")
    if message.get("refusal"):
        return parsing.invalid(Reject.REFUSAL, str(message["refusal"]))
    text, problem = _text(message.get("content"))
    if problem:
        return problem
    if finish == "content_filter":
        return parsing.invalid(Reject.REFUSAL, "the provider filtered the content")
    if finish == "length":
        return parsing.invalid(Reject.TRUNCATED, "the output hit the token limit")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return parsing.invalid(Reject.UNKNOWN_SHAPE, "tool_calls is not a list")
    extracted = [_call(c) for c in calls]
    legacy = message.get("function_call")
    if legacy:
        if extracted:
            return parsing.invalid(Reject.UNKNOWN_SHAPE, "both function_call and tool_calls")
        extracted = [_function(legacy)]
    return parsing.decide(text, extracted, kinds)


def _is_assistant_message(message: Mapping[str, Any]) -> bool:
    role = message.get("role", "assistant")
    if role != "assistant":
        return False
    return any(k in message for k in ("content", "tool_calls", "function_call", "refusal"))


def _text(content: Any) -> tuple[str, Proposal | None]:
    """Return the assistant text of ``content`` (a string, null, or a list of parts)."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return "", parsing.invalid(Reject.UNKNOWN_SHAPE, "content is neither text nor parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "refusal":
            return "", parsing.invalid(Reject.REFUSAL, str(part.get("refusal", "")))
        if kind != "text" or not isinstance(part.get("text"), str):
            return "", parsing.invalid(Reject.UNKNOWN_SHAPE, f"content part {kind!r}")
        texts.append(part["text"])
    return "".join(texts), None


def _call(call: Any) -> ToolCall:
    if not isinstance(call, Mapping):
        return ToolCall(None, problem=Reject.MALFORMED_TOOL_CALL, detail="call is not an object")
    kind = call.get("type", "function")
    if kind != "function":
        return ToolCall(
            None, problem=Reject.MALFORMED_TOOL_CALL, detail=f"unsupported call type {kind!r}"
        )
    return _function(call.get("function"))


def _function(function: Any) -> ToolCall:
    if not isinstance(function, Mapping):
        return ToolCall(
            None, problem=Reject.MALFORMED_TOOL_CALL, detail="tool call without a function"
        )
    name = function.get("name")
    arguments = function.get("arguments", "")
    if arguments is None:
        arguments = ""
    if isinstance(arguments, str):
        decoded, detail = parsing.decode_arguments(arguments)
        if decoded is None:
            return ToolCall(name, problem=Reject.MALFORMED_ARGUMENTS, detail=detail)
        return ToolCall(name, decoded)
    if isinstance(arguments, Mapping):
        return ToolCall(name, dict(arguments))
    return ToolCall(
        name, problem=Reject.MALFORMED_ARGUMENTS, detail="arguments are not a JSON object"
    )


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str, calls: Sequence[tuple[str, Mapping[str, Any], str]]
) -> dict[str, Any]:
    """Render one assistant message with ``text`` and ``calls`` (name, args, call id)."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(args), sort_keys=True)},
            }
            for name, args, call_id in calls
        ]
    return message


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """Render one tool call as an OpenAI-style assistant message (used by the double)."""
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
