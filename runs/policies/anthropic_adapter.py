"""Adapter for Anthropic Messages API output (a ``message`` whose ``content`` is a list of
blocks: ``text``, ``tool_use``, ``thinking``...) into exactly one local proposal, or a
typed rejection naming every reason.

In the order checked:

- limits (depth, values, bytes) before anything else is read -> ``output_limit_exceeded``
- ``{"type": "error", "error": {"type": ...}}`` -> ``provider_error:<class>``; from 2.4.0
  the 4xx types the shared table does not name (``billing_error``, HTTP 402;
  ``conflict_error``; the memory tool's ``memory_*_error``) are ``client_error``, as a live
  call's status classifies them (2.3.0 read them ``unclassified``)
- ``server_tool_use`` / ``*_tool_result`` / ``mcp_tool_use`` blocks, or a ``tool_use``
  whose ``caller`` is not the model itself (programmatic tool calling from a code
  execution container): the provider ran a tool outside validation ->
  ``provider_executed_tool``; from 2.4.0 also a ``text`` block citing a
  ``web_search_result_location`` without any such block (an Anthropic-compatible API that
  searched by itself: the answer rests on pages no validation saw; 2.3.0 read it as the
  answer). Citations of documents or search results the client gave are no sign.
- from 2.5.0: ``stop_reason`` stated ``null`` -> ``truncated_output``: the API says "in
  streaming mode, it is null in the message_start event and non-null otherwise" (and never
  null in a non-streaming response), so the message is a stream's, not finished (its
  ``message_start`` snapshot, or one assembled before its ``message_delta``); 2.4.0 read its
  text as the answer and its ``tool_use`` (input still streaming) as the call. A message
  *without* the key is read as before: Anthropic-compatible gateways leave it out of
  finished answers, so its absence says nothing. A stream event itself (``type:
  message_start``, ``content_block_delta``, ``message_delta``...) is not a message:
  ``unknown_shape``, as in every version
- from 2.3.0: a ``stop_reason`` the API does not document (``end_turn``,
  ``stop_sequence``, ``tool_use``, ``max_tokens``, ``pause_turn``, ``refusal``,
  ``model_context_window_exceeded``) -> ``unknown_shape`` (2.2.0 read it as an answer's
  end); none stated is read as before
- ``stop_reason: refusal`` -> ``model_refusal`` with ``stop_details.category`` and
  ``.explanation`` as typed fields; ``max_tokens``, ``model_context_window_exceeded`` or
  ``pause_turn`` -> ``truncated_output``
- ``thinking`` / ``redacted_thinking`` blocks are declared reasoning, not output: commentary
  evidence, ignored by the parse; a ``compaction`` block (the provider's summary of earlier
  turns) is ignored too
- every other unknown block type -> ``unknown_shape`` (each one named)
- then the text and ``tool_use`` blocks go through ``parsing.decide``: ``stop_reason:
  tool_use`` is a turn stopped for tool use, so text before one call is a preamble
  (commentary); with ``end_turn`` (or none), text beside a call is ``mixed_output``.
  From 2.2.0 a ``{"final": ...}`` answer with duplicate keys is ``malformed_final``.

Versions: ``VERSION`` reads new runs; ``EARLIER`` keeps each earlier version's mapping
unchanged, for the runs recorded under it (a run never changes adapter version).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import limits, parsing, provider_errors
from runs.policies.parsing import Reading, Reject, Stop, ToolCall, Turn

VERSION = "anthropic-tool-use-adapter@2.5.0"
# 2.4.0 read a message whose stop_reason is null (a stream's, not finished) as the answer or
# the call; kept as it was for runs recorded under it.
VERSION_2_4 = "anthropic-tool-use-adapter@2.4.0"
# 2.3.0 read billing_error / conflict_error / memory_*_error bodies as unclassified and an
# answer citing web search results without a search block as the answer; kept as it was
# for runs recorded under it.
VERSION_2_3 = "anthropic-tool-use-adapter@2.3.0"
# 2.2.0 read a stop_reason it did not know as the end of an answer; kept as it was for runs
# recorded under it.
VERSION_2_2 = "anthropic-tool-use-adapter@2.2.0"
# 2.1.0 read a {"final": ...} answer with duplicate keys (the last value won); kept as it
# was for runs recorded under it.
VERSION_2_1 = "anthropic-tool-use-adapter@2.1.0"
PROVIDER = "anthropic"

REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
# The provider's own summary of earlier turns (context compaction): not this turn's output,
# kept in the raw output evidence only, like the Responses API's ``compaction`` item.
IGNORED_BLOCKS = frozenset({"compaction"})
PROVIDER_EXECUTED_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "mcp_tool_result"})
TRUNCATING_STOPS = frozenset({"max_tokens", "pause_turn", "model_context_window_exceeded"})
ANSWER_STOPS = frozenset({"end_turn", "stop_sequence"})
# The stop reasons the Messages API documents (anthropic/types/stop_reason.py). The list
# has grown (pause_turn, refusal, model_context_window_exceeded came later): a stop this
# adapter does not know may be a truncation or a refusal, never the end of an answer.
STOP_REASONS = frozenset({*ANSWER_STOPS, *TRUNCATING_STOPS, "tool_use", "refusal"})


def _read(
    raw: Any,
    kinds: Mapping[str, str],
    *,
    strict: bool = True,
    known_stops: bool = True,
    documented: bool = True,
    finished: bool = True,
) -> Reading:
    """Return what ``raw`` (one Messages API output) proposes; never raises.

    ``finished`` is the 2.5.0 mapping (``finished=False`` is 2.4.0's), ``documented=False``
    2.3.0's, ``known_stops=False`` 2.2.0's, ``strict=False`` 2.1.0's; all kept unchanged.
    """
    limit = limits.check(raw)
    if limit is not None:
        return Reading(parsing.rejected(limit))
    if not isinstance(raw, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object"))
    if raw.get("type") == "error":
        error = raw.get("error")
        detail = str(error.get("message", ""))[:300] if isinstance(error, Mapping) else ""
        classify = provider_errors.from_anthropic_body if documented else provider_errors.from_body
        return Reading(parsing.provider_error(classify(error), detail))
    if raw.get("type", "message") != "message" or raw.get("role", "assistant") != "assistant":
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not an assistant message"))
    blocks = raw.get("content")
    if not isinstance(blocks, list):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "content is not a list of blocks"))
    kinds_seen = [_kind(b) for b in blocks]
    stop = raw.get("stop_reason")
    stop = stop_text = stop if isinstance(stop, str) else ""
    reasoning = _reasoning(blocks)
    executed = sorted(
        {
            k
            for k in kinds_seen
            if isinstance(k, str) and (k in PROVIDER_EXECUTED_BLOCKS or k.endswith("_tool_result"))
        }
    )
    executed += sorted(
        {
            f"tool_use called by {_caller(b)}"
            for b, k in zip(blocks, kinds_seen, strict=True)
            if k == "tool_use" and _caller(b) not in ("", "direct")
        }
    )
    if documented and not executed and _cites_web_search(blocks):
        # No search block, yet the text cites web search results: the provider searched.
        executed.append("web search (web_search_result_location citations)")
    if executed:
        r = parsing.reason(
            Reject.PROVIDER_EXECUTED_TOOL, ", ".join(executed), provider_stop=stop_text
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    stated = raw.get("stop_reason")
    if finished and "stop_reason" in raw and stated is None:
        r = parsing.reason(
            Reject.TRUNCATED,
            "the message is not finished (stop_reason null: a stream's message before its"
            " message_delta)",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    if (
        known_stops
        and stated is not None
        and not (isinstance(stated, str) and stated in STOP_REASONS)
    ):
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            f"unknown stop_reason {json.dumps(stated, default=str)[:60]}",
            provider_stop=stop_text,
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    if stop == "refusal":
        return Reading(_refusal(raw, blocks), reasoning)
    if stop in TRUNCATING_STOPS:
        r = parsing.reason(Reject.TRUNCATED, f"stop_reason {stop}", provider_stop=stop_text)
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(blocks)))
    texts: list[str] = []
    calls: list[ToolCall] = []
    problems = []
    for index, (block, kind) in enumerate(zip(blocks, kinds_seen, strict=True)):
        if kind in REASONING_BLOCKS or kind in IGNORED_BLOCKS:
            continue
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            calls.append(_call(block))
        else:
            problems.append(
                parsing.reason(Reject.UNKNOWN_SHAPE, f"content block {index}: {kind!r}"[:100])
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
        provider_stop=stop_text,
    )
    return parsing.decide(turn, kinds, strict_final=strict)


read = parsing.guarded(_read)
read_2_4 = parsing.guarded(partial(_read, finished=False))
read_2_3 = parsing.guarded(partial(_read, documented=False, finished=False))
read_2_2 = parsing.guarded(partial(_read, known_stops=False, documented=False, finished=False))
read_2_1 = parsing.guarded(
    partial(_read, strict=False, known_stops=False, documented=False, finished=False)
)
EARLIER = {
    VERSION_2_1: read_2_1,
    VERSION_2_2: read_2_2,
    VERSION_2_3: read_2_3,
    VERSION_2_4: read_2_4,
}


def parse(raw: Any, kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    return read(raw, kinds).proposal


def _refusal(raw: Mapping[str, Any], blocks: Sequence[Any]) -> Proposal:
    """``model_refusal`` with the provider's ``stop_details`` (category, explanation)."""
    details = raw.get("stop_details")
    category = explanation = ""
    if isinstance(details, Mapping):
        if isinstance(details.get("category"), str):
            category = details["category"]
        if isinstance(details.get("explanation"), str):
            explanation = details["explanation"]
    text = _joined_text(blocks)
    detail = explanation or text or "the model declined"
    return parsing.rejected(
        parsing.reason(
            Reject.REFUSAL,
            detail,
            category=category[:100],
            explanation=explanation[:1000],
            provider_stop="refusal",
        )
    )


def _kind(block: Any) -> str | None:
    kind = block.get("type") if isinstance(block, Mapping) else None
    return kind if isinstance(kind, str) else None


def _caller(block: Mapping[str, Any]) -> str:
    caller = block.get("caller")
    if caller is None:
        return ""
    if isinstance(caller, Mapping) and isinstance(caller.get("type"), str):
        return caller["type"][:60]
    return "an unknown caller"


def _cites_web_search(blocks: Sequence[Any]) -> bool:
    """Whether a ``text`` block cites a ``web_search_result_location`` (a page the provider
    searched); ``char_location``, ``page_location``, ``content_block_location`` and
    ``search_result_location`` cite what the client sent."""
    for block in blocks:
        citations = block.get("citations") if isinstance(block, Mapping) else None
        for citation in citations if isinstance(citations, list) else []:
            if isinstance(citation, Mapping) and (
                citation.get("type") == "web_search_result_location"
            ):
                return True
    return False


def _reasoning(blocks: Sequence[Any]) -> str:
    return "\n\n".join(
        b["thinking"].strip()
        for b in blocks
        if isinstance(b, Mapping)
        and b.get("type") == "thinking"
        and isinstance(b.get("thinking"), str)
        and b["thinking"].strip()
    )


def _joined(*parts: str) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def _joined_text(blocks: Sequence[Any]) -> str:
    return " ".join(
        b["text"]
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _call(block: Mapping[str, Any]) -> ToolCall:
    return parsing.call_with(block.get("name"), block, "input", what="tool_use")


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str,
    calls: Sequence[tuple[str, Mapping[str, Any], str]],
    stop: Stop = Stop.UNKNOWN,
) -> dict[str, Any]:
    """Render one assistant message with a text block and ``tool_use`` blocks.

    ``stop`` picks the stop reason: ``tool_use`` for a turn stopped for tool use,
    ``end_turn`` for an answer; by default the one the API gives for the content.
    """
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for name, args, call_id in calls:
        content.append(
            {"type": "tool_use", "id": f"toolu_{call_id}", "name": name, "input": dict(args)}
        )
    if stop is Stop.UNKNOWN:
        stop = Stop.TOOL_USE if calls else Stop.ANSWER
    return {
        "id": f"msg_{calls[0][2] if calls else 'text'}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if stop is Stop.TOOL_USE else "end_turn",
        "stop_sequence": None,
    }


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
