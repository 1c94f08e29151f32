"""Adapter for AWS Bedrock Converse output (a ``ConverseResponse``: ``output.message``
whose ``content`` is a list of blocks: ``text``, ``toolUse``, ``reasoningContent``...,
and a ``stopReason``) into exactly one local proposal, or a typed rejection naming every
reason. The body is read as the HTTP API returns it and as boto3's ``converse`` returns
it (with ``ResponseMetadata``); other members (``usage``, ``metrics``, the rest of
``trace``...) are kept in the raw output evidence only. In the order checked:

- limits (depth, values, bytes) before anything else is read -> ``output_limit_exceeded``
- an error -> ``provider_error:<class>`` (``provider_errors.from_aws_error``, by its AWS
  error code, else its HTTP status): boto3's ``ClientError.response`` (``Error.Code``,
  ``ResponseMetadata.HTTPStatusCode``), the JavaScript SDK's exception (``name``,
  ``$metadata.httpStatusCode``), an AWS JSON body with ``__type``, or the bare HTTP body
  ``{"message": ...}`` (its class is in a header the body does not keep: ``unclassified``)
- not ``output.message`` from the ``assistant`` with a list of blocks -> ``unknown_shape``
- a ``toolUse`` of ``type: server_tool_use`` (Nova's code interpreter...) or any
  ``toolResult`` block: the provider ran a tool outside validation -> ``provider_executed_tool``
- a ``stopReason`` the API does not document (``end_turn``, ``tool_use``, ``max_tokens``,
  ``stop_sequence``, ``guardrail_intervened``, ``content_filtered``,
  ``malformed_model_output``, ``malformed_tool_use``, ``model_context_window_exceeded``)
  -> ``unknown_shape``; none stated is read as unknown (text beside a call is mixed). An
  absent ``stopReason`` is not read as unfinished: the Converse API always states one
  (botocore marks it required) and documents no meaning for its absence, so a body without
  it was built outside the API (a gateway, a hand-written recording) and says nothing
  either way; it reads as it always has. A ConverseStream event (``messageStart``,
  ``contentBlockDelta``, ``messageStop``...) has no ``output.message``: ``unknown_shape``
- ``guardrail_intervened`` / ``content_filtered`` -> ``model_refusal`` (category: the stop
  reason; explanation: the text Bedrock put in place of the answer); ``max_tokens`` /
  ``model_context_window_exceeded`` -> ``truncated_output``; ``malformed_tool_use`` ->
  ``malformed_tool_call``; ``malformed_model_output`` -> ``unknown_shape``
- from 1.1.0, checked before the truncating and malformed stops: a guardrail trace
  (``trace.guardrail``) whose input or output assessment has a policy entry with an
  ``action`` other than ``NONE`` (``BLOCKED``, ``ANONYMIZED``) -> ``model_refusal``
  (category ``guardrail_intervened``, explanation its ``actionReason``), whatever the
  documented ``stopReason`` (1.0.0 read the answer or the call)
- ``reasoningContent`` blocks are declared reasoning: its ``reasoningText.text`` is
  commentary evidence, never parsed (``redactedContent`` is kept in the raw output only)
- ``citationsContent`` blocks are answer text (their ``content[].text``); every other
  block (``image``, ``document``, ``video``...) -> ``unknown_shape`` (each one named)
- then text and ``toolUse`` blocks go through ``parsing.decide``: ``stopReason:
  tool_use`` is a turn stopped for tool use, so text before one call is a preamble
  (commentary); with ``end_turn`` (or none), text beside a call is ``mixed_output``.

Versions: ``VERSION`` reads new runs; ``EARLIER`` keeps each earlier version's mapping
unchanged, for the runs recorded under it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import limits, parsing, provider_errors
from runs.policies.parsing import Reading, Reject, Stop, ToolCall, Turn

VERSION = "bedrock-converse-adapter@1.1.0"
# 1.0.0 read a turn whose guardrail trace says a guardrail blocked or masked it, beside a
# stopReason other than guardrail_intervened (end_turn, tool_use, none), as the answer or
# the call; kept as it was for runs recorded under it.
VERSION_1_0 = "bedrock-converse-adapter@1.0.0"
PROVIDER = "bedrock-converse"

ANSWER_STOPS = frozenset({"end_turn", "stop_sequence"})
REFUSING_STOPS = frozenset({"guardrail_intervened", "content_filtered"})
TRUNCATING_STOPS = frozenset({"max_tokens", "model_context_window_exceeded"})
# The stop reasons the Converse API documents (botocore bedrock-runtime StopReason).
STOP_REASONS = frozenset(
    {
        *ANSWER_STOPS,
        *REFUSING_STOPS,
        *TRUNCATING_STOPS,
        "tool_use",
        "malformed_tool_use",
        "malformed_model_output",
    }
)
PROVIDER_EXECUTED_BLOCKS = frozenset({"toolResult"})
# The policies of a guardrail assessment (mypy-boto3-bedrock-runtime 1.43.62
# ``GuardrailAssessmentTypeDef``) and the lists whose entries each state an ``action``:
# ``BLOCKED`` / ``ANONYMIZED`` (sensitive information) when the guardrail acted, ``NONE``
# when it only detected or found nothing.
GUARDRAIL_POLICIES: Mapping[str, tuple[str, ...]] = {
    "topicPolicy": ("topics",),
    "contentPolicy": ("filters",),
    "wordPolicy": ("customWords", "managedWordLists"),
    "sensitiveInformationPolicy": ("piiEntities", "regexes"),
    "contextualGroundingPolicy": ("filters",),
}
GUARDRAIL_CATEGORY = "guardrail_intervened"
SERVER_TOOL_USE = "toolUse (server_tool_use)"


def _read(raw: Any, kinds: Mapping[str, str], *, trace: bool = True) -> Reading:
    """Return what ``raw`` (one Converse response) proposes; never raises.

    ``trace`` is the 1.1.0 mapping (``trace=False`` is 1.0.0's, kept unchanged).
    """
    limit = limits.check(raw)
    if limit is not None:
        return Reading(parsing.rejected(limit))
    if not isinstance(raw, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object"))
    error = _error(raw)
    if error is not None:
        return Reading(error)
    output = raw.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
        return Reading(
            parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a Converse assistant message")
        )
    blocks = message.get("content")
    if not isinstance(blocks, list):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "content is not a list of blocks"))
    kinds_seen = [_kind(b) for b in blocks]
    stated = raw.get("stopReason")
    stop = stated if isinstance(stated, str) else ""
    reasoning = _reasoning(blocks)
    executed = sorted(
        {k for k in kinds_seen if k in PROVIDER_EXECUTED_BLOCKS or k == SERVER_TOOL_USE}
    )
    if executed:
        r = parsing.reason(Reject.PROVIDER_EXECUTED_TOOL, ", ".join(executed), provider_stop=stop)
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    if stated is not None and stop not in STOP_REASONS:
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            f"unknown stopReason {json.dumps(stated, default=str)[:60]}",
            provider_stop=stop,
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    acted = _guardrail_acted(raw.get("trace")) if trace and stop not in REFUSING_STOPS else ""
    if acted:
        # The trace says a guardrail blocked or masked this turn, whatever the stopReason
        # says: the guardrail's refusal, as stopReason guardrail_intervened is.
        guardrail = raw["trace"]["guardrail"]
        why = guardrail.get("actionReason")
        explanation = why if isinstance(why, str) else ""
        r = parsing.reason(
            Reject.REFUSAL,
            f"the guardrail trace says a guardrail acted: {acted}",
            category=GUARDRAIL_CATEGORY,
            explanation=(explanation or acted)[:1000],
            provider_stop=stop,
        )
        return Reading(parsing.rejected(r), reasoning)
    if stop in REFUSING_STOPS:
        text = _joined_text(blocks)
        r = parsing.reason(
            Reject.REFUSAL,
            text or f"stopReason {stop}",
            category=stop,
            explanation=text[:1000],
            provider_stop=stop,
        )
        return Reading(parsing.rejected(r), reasoning)
    if stop in TRUNCATING_STOPS:
        r = parsing.reason(Reject.TRUNCATED, f"stopReason {stop}", provider_stop=stop)
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    if stop == "malformed_tool_use":
        r = parsing.reason(
            Reject.MALFORMED_TOOL_CALL,
            "the provider reports a malformed tool use (stopReason malformed_tool_use)",
            provider_stop=stop,
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    if stop == "malformed_model_output":
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            "the provider reports malformed model output (stopReason malformed_model_output)",
            provider_stop=stop,
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    texts: list[str] = []
    calls: list[ToolCall] = []
    problems = []
    for index, (block, kind) in enumerate(zip(blocks, kinds_seen, strict=True)):
        if kind == "reasoningContent":
            continue
        if kind == "text":
            texts.append(block["text"])
        elif kind == "citationsContent":
            texts.append(_citations_text(block["citationsContent"]))
        elif kind == "toolUse":
            calls.append(_call(block["toolUse"]))
        else:
            problems.append(
                parsing.reason(Reject.UNKNOWN_SHAPE, f"content block {index}: {kind}"[:100])
            )
    if stop == "tool_use":
        turn_stop = Stop.TOOL_USE
    elif stop in ANSWER_STOPS:
        turn_stop = Stop.ANSWER
    else:
        turn_stop = Stop.UNKNOWN
    turn = Turn(
        text="".join(texts),
        calls=calls,
        stop=turn_stop,
        commentary=reasoning,
        problems=problems,
        provider_stop=stop,
    )
    return parsing.decide(turn, kinds, strict_final=True)


read = parsing.guarded(_read)
read_1_0 = parsing.guarded(partial(_read, trace=False))
EARLIER: dict[str, Any] = {VERSION_1_0: read_1_0}


def parse(raw: Any, kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    return read(raw, kinds).proposal


def _error(raw: Mapping[str, Any]) -> Proposal | None:
    """The ``provider_error`` of an error shape, or None when ``raw`` is not one."""
    code: Any = None
    status: Any = None
    message: Any = None
    if isinstance(raw.get("Error"), Mapping):
        # boto3 / botocore: ClientError.response
        code = raw["Error"].get("Code")
        message = raw["Error"].get("Message")
        metadata = raw.get("ResponseMetadata")
        status = metadata.get("HTTPStatusCode") if isinstance(metadata, Mapping) else None
    elif isinstance(raw.get("$metadata"), Mapping) and "output" not in raw:
        # AWS SDK for JavaScript v3: a ServiceException (name, $fault, $metadata)
        code = raw.get("name")
        status = raw["$metadata"].get("httpStatusCode")
        message = raw.get("message")
    elif "output" not in raw and ("__type" in raw or _message_only(raw)):
        # The HTTP body: {"message": ...}; AWS JSON protocols add "__type".
        code = raw.get("__type")
        message = raw.get("message", raw.get("Message"))
    else:
        return None
    detail = message[:300] if isinstance(message, str) else ""
    return parsing.provider_error(provider_errors.from_aws_error(code, status), detail)


def _guardrail_acted(trace: Any) -> str:
    """What ``trace.guardrail`` says a guardrail did to this turn, named ("" if nothing).

    Each policy entry of an input or output assessment states its ``action``; one that is
    not ``NONE`` (``BLOCKED``, ``ANONYMIZED``, or a value the types do not list) acted.
    ``actionReason`` is free text and decides nothing; an entry only ``detected`` did not act.
    """
    guardrail = trace.get("guardrail") if isinstance(trace, Mapping) else None
    if not isinstance(guardrail, Mapping):
        return ""
    assessments: list[tuple[str, Any]] = []
    inputs = guardrail.get("inputAssessment")
    if isinstance(inputs, Mapping):
        assessments += [("inputAssessment", a) for a in inputs.values()]
    outputs = guardrail.get("outputAssessments")
    if isinstance(outputs, Mapping):
        for listed in outputs.values():
            if isinstance(listed, list):
                assessments += [("outputAssessments", a) for a in listed]
    found: set[str] = set()
    for where, assessment in assessments:
        if not isinstance(assessment, Mapping):
            continue
        for policy, lists in GUARDRAIL_POLICIES.items():
            assessed = assessment.get(policy)
            if not isinstance(assessed, Mapping):
                continue
            for name in lists:
                entries = assessed.get(name)
                for entry in entries if isinstance(entries, list) else []:
                    action = entry.get("action", "NONE") if isinstance(entry, Mapping) else "NONE"
                    if action != "NONE":
                        shown = action[:20] if isinstance(action, str) else "an action"
                        found.add(f"{where} {policy} {shown}")
                        if len(found) >= 5:
                            return ", ".join(sorted(found))
    return ", ".join(sorted(found))


def _message_only(raw: Mapping[str, Any]) -> bool:
    keys = set(raw)
    return (
        bool(keys)
        and keys <= {"message", "Message"}
        and all(isinstance(v, str) for v in raw.values())
    )


def _kind(block: Any) -> str:
    """The block's one member (``text``, ``toolUse``...), or a description."""
    if not isinstance(block, Mapping):
        return "not an object"
    keys = sorted(str(k)[:30] for k in block)
    if len(keys) != 1:
        return "+".join(keys[:3]) or "empty block"
    kind = keys[0]
    value = block[kind]
    if kind == "text" and not isinstance(value, str):
        return "text that is not a string"
    if kind in ("toolUse", "citationsContent", "reasoningContent") and not isinstance(
        value, Mapping
    ):
        return f"{kind} that is not an object"
    if kind == "toolUse" and value.get("type", "tool_use") != "tool_use":
        return (
            SERVER_TOOL_USE if value.get("type") == "server_tool_use" else "toolUse (unknown type)"
        )
    return kind


def _reasoning(blocks: Sequence[Any]) -> str:
    texts = []
    for block in blocks:
        if _kind(block) != "reasoningContent":
            continue
        reasoning_text = block["reasoningContent"].get("reasoningText")
        if isinstance(reasoning_text, Mapping) and isinstance(reasoning_text.get("text"), str):
            texts.append(reasoning_text["text"].strip())
    return "\n\n".join(t for t in texts if t)


def _citations_text(citations: Mapping[str, Any]) -> str:
    content = citations.get("content")
    return "".join(
        c["text"]
        for c in (content if isinstance(content, list) else [])
        if isinstance(c, Mapping) and isinstance(c.get("text"), str)
    )


def _joined(*texts: str) -> str:
    return "\n\n".join(t.strip() for t in texts if t and t.strip())


def _joined_text(blocks: Sequence[Any]) -> str:
    return " ".join(b["text"] for b in blocks if _kind(b) == "text")


def _call(tool_use: Mapping[str, Any]) -> ToolCall:
    return parsing.call_with(tool_use.get("name"), tool_use, "input", what="toolUse")


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str,
    calls: Sequence[tuple[str, Mapping[str, Any], str]],
    stop: Stop = Stop.UNKNOWN,
) -> dict[str, Any]:
    """Render one Converse response with a text block and ``toolUse`` blocks.

    ``stop`` picks the stop reason: ``tool_use`` for a turn stopped for tool use,
    ``end_turn`` for an answer; by default the one the API gives for the content.
    """
    content: list[dict[str, Any]] = []
    if text:
        content.append({"text": text})
    for name, args, call_id in calls:
        content.append(
            {"toolUse": {"toolUseId": f"tooluse_{call_id}", "name": name, "input": dict(args)}}
        )
    if stop is Stop.UNKNOWN:
        stop = Stop.TOOL_USE if calls else Stop.ANSWER
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if stop is Stop.TOOL_USE else "end_turn",
        "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0},
    }


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
