"""Adapter for Google Gemini ``generateContent`` output (a ``GenerateContentResponse``
whose ``candidates[].content.parts[]`` hold ``text``, ``functionCall`` and ``thought``
parts) into exactly one local proposal, or a typed rejection naming every reason.

The Gemini API (and Vertex AI's, which answers in the same shape) has no finish reason
for a tool call: a candidate that calls a function finishes ``STOP`` like an answer. The
``functionCall`` part is what says the turn stopped for tool use, as a ``function_call``
item does in the Responses API. In the order checked:

- limits (depth, values, bytes) before anything else is read -> ``output_limit_exceeded``
- an error body ``{"error": {"code", "status", "message", "details"}}``, alone or as the one
  element of a list (a failed stream; google-genai unwraps it too) -> ``provider_error:<class>``
  (by its ``ErrorInfo`` reason, its canonical ``status``, then its HTTP ``code``:
  ``provider_errors.from_google_error``)
- any other JSON array (a whole streamGenerateContent body, a list of chunks) ->
  ``unknown_shape``, saying so
- ``promptFeedback.blockReason`` (the prompt was blocked, no candidate) ->
  ``model_refusal`` with the block reason as its category
- no ``candidates`` member -> ``unknown_shape``; an empty list -> ``empty_output``; more
  than one candidate (``candidateCount`` > 1) -> ``multiple_choices``
- ``executableCode`` / ``codeExecutionResult`` parts (code execution) and ``toolCall`` /
  ``toolResponse`` parts (Gemini 3's server-side tools: file search, maps...): the
  provider ran a tool outside validation -> ``provider_executed_tool``
- from 1.1.0: a candidate grounded by a tool Google ran itself (``groundingMetadata`` naming
  the searches, sources or retrievals it used: Grounding with Google Search or Google Maps,
  file search, Vertex AI Search / RAG; ``urlContextMetadata`` naming the pages URL context
  fetched) -> ``provider_executed_tool`` (1.0.0 read the text as the answer)
- from 1.3.0: a candidate without a ``finishReason`` (absent or ``null``) ->
  ``truncated_output``: the API documents it as unfinished ("If empty, the model has not
  stopped generating the tokens": a streamGenerateContent chunk before the last), and a
  generateContent response always states one; 1.2.0 read it like ``STOP`` (its text as the
  answer, its call as a proposal). A call still streaming says so itself too (below)
- a ``finishReason`` the API does not document (``FinishReason`` in google-genai, plus
  Vertex's ``MODEL_ARMOR``) -> ``unknown_shape``; up to 1.2.0 none stated is read like
  ``STOP``
- ``SAFETY``, ``RECITATION``, ``LANGUAGE``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``,
  ``SPII``, ``MODEL_ARMOR`` and the ``IMAGE_*`` filters -> ``model_refusal`` (category:
  the finish reason; explanation: ``finishMessage``, else the safety ratings that
  blocked); ``MAX_TOKENS``, ``TOO_MANY_TOOL_CALLS``, ``OTHER``, ``NO_IMAGE``,
  ``FINISH_REASON_UNSPECIFIED`` -> ``truncated_output``; ``MALFORMED_FUNCTION_CALL`` and
  ``UNEXPECTED_TOOL_CALL`` -> ``malformed_tool_call`` (with ``finishMessage``)
- from 1.2.0 the finish reasons google-genai 3.6.1 added (1.1.0: ``unknown_shape``):
  ``ESCALATION`` -> ``model_refusal``; ``CONTINUATION`` -> ``truncated_output``;
  ``MALFORMED_RESPONSE`` -> ``malformed_tool_call``; ``MISSING_THOUGHT_SIGNATURE`` ->
  ``provider_error:client_error``; ``PUP_LIMITED_DISABLED`` -> ``provider_error:auth_rejected``
- ``thought: true`` parts are declared reasoning: commentary evidence, never parsed; a
  ``thoughtSignature`` is the provider's opaque token and is ignored; from 1.2.0 a
  ``functionCall`` in a ``thought: true`` part is the model's thinking, not a call ->
  ``unknown_shape`` (1.1.0 proposed it)
- every other part (``inlineData``, ``fileData``, ``functionResponse``, a part with two
  kinds of data...) -> ``unknown_shape`` (each one named)
- then text and calls go through ``parsing.decide``. Text *before* the first
  ``functionCall`` part is a preamble (commentary); text after a call is an answer beside
  the call -> ``mixed_output``. A ``functionCall`` without ``args`` is a call with no
  arguments (the API omits an empty ``args``, recorded from Vertex AI); ``args`` that are
  not an object -> ``malformed_arguments``; a call still streaming (``willContinue`` or
  ``partialArgs``) -> ``truncated_output``.

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

VERSION = "gemini-function-calling-adapter@1.3.0"
# 1.2.0 read a candidate without a finishReason (a streamed chunk before the last) like one
# finished STOP; kept as it was for runs recorded under it.
VERSION_1_2 = "gemini-function-calling-adapter@1.2.0"
# 1.1.0 proposed a functionCall part marked ``thought: true`` and read the finish reasons
# google-genai added (MISSING_THOUGHT_SIGNATURE, MALFORMED_RESPONSE, ESCALATION,
# PUP_LIMITED_DISABLED, CONTINUATION) as unknown_shape; kept as it was for runs recorded
# under it.
VERSION_1_1 = "gemini-function-calling-adapter@1.1.0"
# 1.0.0 read a text answer grounded by Google Search, Maps, file search or URL context (the
# candidate's groundingMetadata / urlContextMetadata) as the answer; kept as it was for runs
# recorded under it.
VERSION_1_0 = "gemini-function-calling-adapter@1.0.0"
PROVIDER = "gemini"

# google-genai ``types.FinishReason`` (google/genai/types.py), and Vertex AI's MODEL_ARMOR
# (recorded: a Model Armor response template that blocked the answer).
REFUSING_FINISHES = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
TRUNCATING_FINISHES = frozenset(
    {
        "MAX_TOKENS",
        "TOO_MANY_TOOL_CALLS",
        "OTHER",
        "IMAGE_OTHER",
        "NO_IMAGE",
        "FINISH_REASON_UNSPECIFIED",
    }
)
MALFORMED_CALL_FINISHES = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
FINISH_REASONS_1_1 = frozenset(
    {"STOP", *REFUSING_FINISHES, *TRUNCATING_FINISHES, *MALFORMED_CALL_FINISHES}
)
# The finish reasons google-genai 3.6.1 documents that 1.1.0 did not know, from 1.2.0 each
# read as its documentation says: (the reading, for the typed failure it calls for).
NEWER_FINISHES: Mapping[str, str] = {
    # "Request has at least one thought signature missing": the request was wrong (the
    # Gemini API answers such a request with HTTP 400 otherwise).
    "MISSING_THOUGHT_SIGNATURE": "client_error",
    # "Finishes due to malformed response": the model's malformed output, read as the
    # malformed function call finishes are.
    "MALFORMED_RESPONSE": "malformed",
    # "Request was filtered by an escalation rule": a filter refused.
    "ESCALATION": "refusal",
    # "the user account is limited or disabled due to Prohibited Use Policy (PUP)
    # violations": the provider refuses this account, whatever it is asked.
    "PUP_LIMITED_DISABLED": "auth_rejected",
    # "reached the per-request token limit, but generation is not yet complete": cut.
    "CONTINUATION": "truncated",
}
FINISH_REASONS = frozenset({*FINISH_REASONS_1_1, *NEWER_FINISHES})
PROVIDER_EXECUTED_PARTS = frozenset(
    {"executableCode", "codeExecutionResult", "toolCall", "toolResponse"}
)
# The members of ``groundingMetadata`` (google-genai ``GroundingMetadata``) that say a
# grounding tool ran: the queries it sent and the sources or places it returned.
GROUNDING_EVIDENCE = (
    "webSearchQueries",
    "imageSearchQueries",
    "retrievalQueries",
    "groundingChunks",
    "searchEntryPoint",
)
# Keys of a part that describe it rather than carry its data.
PART_METADATA = frozenset(
    {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
)


def _read(
    raw: Any,
    kinds: Mapping[str, str],
    *,
    grounding: bool = True,
    documented: bool = True,
    finished: bool = True,
) -> Reading:
    """Return what ``raw`` (one generateContent response) proposes; never raises.

    ``finished`` is the 1.3.0 mapping (``finished=False`` is 1.2.0's), ``documented=False``
    1.1.0's, ``grounding=False`` 1.0.0's; all kept unchanged.
    """
    limit = limits.check(raw)
    if limit is not None:
        return Reading(parsing.rejected(limit))
    if (
        isinstance(raw, list)
        and len(raw) == 1
        and isinstance(raw[0], Mapping)
        and "error" in raw[0]
    ):
        # An error sent as a one-element list (a failed stream): google-genai's APIError
        # unwraps the same list (google/genai/errors.py).
        raw = raw[0]
    if isinstance(raw, list):
        return Reading(
            parsing.invalid(
                Reject.UNKNOWN_SHAPE,
                "output is a JSON array, not one generateContent response (a"
                " streamGenerateContent body is a list of chunks: record one response)",
            )
        )
    if not isinstance(raw, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object"))
    if "error" in raw:
        error = raw["error"]
        detail = str(error.get("message", ""))[:300] if isinstance(error, Mapping) else ""
        return Reading(parsing.provider_error(provider_errors.from_google_error(error), detail))
    blocked = _prompt_block(raw.get("promptFeedback"))
    if blocked is not None:
        return Reading(parsing.rejected(blocked))
    candidates = raw.get("candidates")
    if not isinstance(candidates, list):
        return Reading(
            parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a generateContent response")
        )
    if not candidates:
        return Reading(parsing.invalid(Reject.EMPTY_OUTPUT, "the response has no candidate"))
    if len(candidates) > 1:
        return Reading(
            parsing.invalid(
                Reject.MULTIPLE_CHOICES, f"{len(candidates)} candidates in one response"
            )
        )
    candidate = candidates[0]
    if not isinstance(candidate, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "the candidate is not an object"))
    content = candidate.get("content", {})
    content = {} if content is None else content
    if not isinstance(content, Mapping) or content.get("role", "model") != "model":
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "content is not the model's"))
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "parts is not a list"))
    kinds_seen = [_kind(p, thought_calls=documented) for p in parts]
    reasoning = _reasoning(parts)
    stated = candidate.get("finishReason")
    finish = stated if isinstance(stated, str) else ""
    executed = sorted({k for k in kinds_seen if k in PROVIDER_EXECUTED_PARTS})
    if executed:
        r = parsing.reason(Reject.PROVIDER_EXECUTED_TOOL, ", ".join(executed), provider_stop=finish)
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    grounded = _grounded(candidate) if grounding else ""
    if grounded:
        # Google searched, fetched or retrieved for this answer itself: the text rests on
        # sources no validation saw, as code execution's results do.
        r = parsing.reason(Reject.PROVIDER_EXECUTED_TOOL, grounded, provider_stop=finish)
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    if finished and stated is None:
        r = parsing.reason(
            Reject.TRUNCATED,
            "the candidate is not finished (no finishReason: the model has not stopped"
            " generating, a streamed chunk before the last)",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    known = FINISH_REASONS if documented else FINISH_REASONS_1_1
    if stated is not None and finish not in known:
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            f"unknown finishReason {json.dumps(stated, default=str)[:60]}",
            provider_stop=finish,
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    message = candidate.get("finishMessage")
    message = message if isinstance(message, str) else ""
    newer = NEWER_FINISHES.get(finish, "") if documented else ""
    said = message or f"finishReason {finish}"
    if newer in ("client_error", "auth_rejected"):
        error = parsing.provider_error(newer, said, provider_stop=finish)
        return Reading(error, _joined(reasoning, _joined_text(parts)))
    if finish in REFUSING_FINISHES or newer == "refusal":
        return Reading(_refusal(finish, message, candidate), reasoning)
    if finish in TRUNCATING_FINISHES or newer == "truncated":
        r = parsing.reason(
            Reject.TRUNCATED, message or f"finishReason {finish}", provider_stop=finish
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    if finish in MALFORMED_CALL_FINISHES or newer == "malformed":
        r = parsing.reason(
            Reject.MALFORMED_TOOL_CALL, message or f"finishReason {finish}", provider_stop=finish
        )
        return Reading(parsing.rejected(r), _joined(reasoning, _joined_text(parts)))
    preamble: list[str] = []
    answer: list[str] = []
    calls: list[ToolCall] = []
    problems = []
    for index, (part, kind) in enumerate(zip(parts, kinds_seen, strict=True)):
        if kind == "thought":
            continue
        if kind == "text":
            (answer if calls else preamble).append(part["text"])
        elif kind == "functionCall":
            calls.append(_call(part["functionCall"]))
        else:
            problems.append(parsing.reason(Reject.UNKNOWN_SHAPE, f"part {index}: {kind}"[:100]))
    after_call = "".join(answer).strip()
    if calls and not after_call:
        # Text before the call, nothing after it: a turn that stopped for the call.
        text, stop = "".join(preamble), Stop.TOOL_USE
    else:
        text = "".join(preamble) + "".join(answer)
        stop = Stop.ANSWER if finish == "STOP" else Stop.UNKNOWN
        if calls:
            # An answer written after the call: the model did not stop for it.
            stop = Stop.ANSWER
    turn = Turn(
        text=text,
        calls=calls,
        stop=stop,
        commentary=reasoning,
        problems=problems,
        provider_stop=finish,
    )
    return parsing.decide(turn, kinds, strict_final=True)


read = parsing.guarded(_read)
read_1_2 = parsing.guarded(partial(_read, finished=False))
read_1_1 = parsing.guarded(partial(_read, documented=False, finished=False))
read_1_0 = parsing.guarded(partial(_read, grounding=False, documented=False, finished=False))
EARLIER: dict[str, Any] = {VERSION_1_0: read_1_0, VERSION_1_1: read_1_1, VERSION_1_2: read_1_2}


def parse(raw: Any, kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    return read(raw, kinds).proposal


def _grounded(candidate: Mapping[str, Any]) -> str:
    """What says a grounding tool ran for ``candidate``, named ("" if nothing does).

    An empty ``groundingMetadata`` (``{}``, or members without entries) names no search and
    no source: it is not read as one.
    """
    found = []
    metadata = candidate.get("groundingMetadata")
    if isinstance(metadata, Mapping):
        found += [f"groundingMetadata.{key}" for key in GROUNDING_EVIDENCE if metadata.get(key)]
    urls = candidate.get("urlContextMetadata")
    if isinstance(urls, Mapping) and urls.get("urlMetadata"):
        found.append("urlContextMetadata.urlMetadata")
    return ", ".join(found)


def _prompt_block(feedback: Any) -> Any:
    """``model_refusal`` for a prompt the provider blocked, or None."""
    if not isinstance(feedback, Mapping) or feedback.get("blockReason") in (None, ""):
        return None
    why = feedback.get("blockReason")
    why_text = why[:100] if isinstance(why, str) else json.dumps(why, default=str)[:100]
    message = feedback.get("blockReasonMessage")
    message = message if isinstance(message, str) else ""
    return parsing.reason(
        Reject.REFUSAL,
        message or f"the provider blocked the prompt ({why_text})",
        category=why_text,
        explanation=message[:1000],
        provider_stop=f"blockReason:{why_text}",
    )


def _refusal(finish: str, message: str, candidate: Mapping[str, Any]) -> Proposal:
    """``model_refusal`` for a candidate a provider filter stopped."""
    ratings = candidate.get("safetyRatings")
    blocked = sorted(
        str(r.get("category"))[:60]
        for r in (ratings if isinstance(ratings, list) else [])
        if isinstance(r, Mapping) and r.get("blocked") is True
    )
    explanation = message or ", ".join(blocked)
    detail = message or f"the provider stopped the candidate ({finish})"
    if blocked and not message:
        detail += f": {', '.join(blocked)} blocked"
    return parsing.rejected(
        parsing.reason(
            Reject.REFUSAL,
            detail,
            category=finish,
            explanation=explanation[:1000],
            provider_stop=finish,
        )
    )


def _kind(part: Any, *, thought_calls: bool = True) -> str:
    """``text``, ``thought``, ``functionCall``, another data key, or a description.

    From 1.2.0 (``thought_calls``) a ``functionCall`` in a part marked ``thought: true`` is
    named as such: the model's thinking about a call (``Part.thought``: "the model's thought
    process or reasoning"), never a call, and the types say nothing more -> unknown_shape.
    """
    if not isinstance(part, Mapping):
        return "not an object"
    data = sorted(k for k in part if k not in PART_METADATA)
    if thought_calls and part.get("thought") is True and data == ["functionCall"]:
        return "functionCall marked as a thought"
    if part.get("thought") is True and data == ["text"] and isinstance(part["text"], str):
        return "thought"
    if data == ["text"] and not isinstance(part["text"], str):
        return "text that is not a string"
    if len(data) == 1:
        return str(data[0])[:60]
    if not data:
        # Only a signature (or nothing): carries no output of its own.
        return "thought" if "thoughtSignature" in part else "empty part"
    return "+".join(str(k)[:30] for k in data[:3])


def _reasoning(parts: Sequence[Any]) -> str:
    return "\n\n".join(
        p["text"].strip()
        for p in parts
        if isinstance(p, Mapping)
        and p.get("thought") is True
        and isinstance(p.get("text"), str)
        and p["text"].strip()
    )


def _joined(*texts: str) -> str:
    return "\n\n".join(t.strip() for t in texts if t and t.strip())


def _joined_text(parts: Sequence[Any]) -> str:
    return " ".join(p["text"] for p in parts if _kind(p) == "text")


def _call(call: Any) -> ToolCall:
    if not isinstance(call, Mapping):
        return ToolCall(
            None, problem=Reject.MALFORMED_TOOL_CALL, detail="functionCall is not an object"
        )
    name = call.get("name")
    if call.get("willContinue") is True or "partialArgs" in call:
        return ToolCall(
            name,
            problem=Reject.TRUNCATED,
            detail="the call is still streaming (willContinue / partialArgs)",
        )
    if call.get("args") is None:
        # The API leaves out an empty ``args``: a call of a function without parameters.
        return ToolCall(name, {})
    return parsing.call_with(name, call, "args", what="functionCall")


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str,
    calls: Sequence[tuple[str, Mapping[str, Any], str]],
    stop: Stop = Stop.UNKNOWN,
) -> dict[str, Any]:
    """Render one generateContent response with a text part and ``functionCall`` parts.

    Gemini states no tool-use finish: text before the calls is a preamble. With ``stop``
    an answer (``Stop.ANSWER``) and calls, the text is written after them (the shape
    adapters must reject as mixed output).
    """
    call_parts: list[dict[str, Any]] = [
        {"functionCall": {"id": call_id, "name": name, "args": dict(args)}}
        for name, args, call_id in calls
    ]
    text_parts = [{"text": text}] if text else []
    if calls and stop is Stop.ANSWER:
        parts = [*call_parts, *text_parts]
    else:
        parts = [*text_parts, *call_parts]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "modelVersion": "fieldops-double",
        "responseId": f"resp_{calls[0][2] if calls else 'text'}",
    }


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
