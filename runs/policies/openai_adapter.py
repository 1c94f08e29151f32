"""Adapter for OpenAI-style Chat Completions output into exactly one local proposal, or a
typed rejection naming every reason.

Accepts what an OpenAI-compatible endpoint returns (OpenAI, Azure, OpenRouter, vLLM,
Ollama, Gemini's and Mistral's compatible endpoints...): the whole ``chat.completion``
object, one of its ``choices``, or the bare assistant ``message``. In the order checked:

- limits (depth, values, bytes) before anything else is read -> ``output_limit_exceeded``
- an ``{"error": {...}}`` body, or a choice that finished with an error (``finish_reason:
  error`` and/or a choice ``error``, OpenRouter) -> ``provider_error:<class>`` (see
  ``provider_errors``)
- more than one choice -> ``multiple_choices``
- a ``refusal`` (string or content part) or ``finish_reason: content_filter`` ->
  ``model_refusal`` (the refusal text is its ``explanation``); from 2.2.0 also Azure
  OpenAI's ``content_filter_results`` (of the choice, or ``prompt_filter_results``) with a
  category ``filtered`` / ``blocked`` (category ``content_filter``, the categories its
  ``explanation``); ``finish_reason: length`` -> ``truncated_output``
- from 2.3.0: a ``finish_reason`` other than the documented ones (``stop``, ``length``,
  ``tool_calls``, ``content_filter``, ``function_call``), ``end_turn``, OpenRouter's
  ``error`` or ``""`` (none stated) -> ``unknown_shape`` (2.2.0 read it as an answer's end)
- from 2.4.0: an Ollama /api/chat body (``message`` with ``done`` / ``done_reason``, no
  ``finish_reason``) is read by its ``done_reason`` as Ollama's own compatible endpoint
  maps it (``stop`` with calls is ``tool_calls``); ``done: false`` (a streamed chunk) ->
  ``truncated_output``; ``load`` / ``unload`` or any other -> ``unknown_shape`` (2.3.0
  read it as a choice without a finish reason)
- from 2.4.0: tools the provider says it ran itself (Groq's ``message.executed_tools``) ->
  ``provider_executed_tool`` (2.3.0 read the text beside them as the answer)
- from 2.5.0: Together's ``finish_reason: eos`` (end of sequence) ends an answer as
  ``stop`` does; an Azure choice its filter blocked without any ``message``
  (``finish_reason: content_filter``, ``content_filter_results``) and Azure's prompt
  filter error (``code: content_filter``) -> ``model_refusal`` (``content_filter``); an
  error ``code`` that is an HTTP status as text (Azure's ``"404"``) is classified as that
  status; Ollama's ``message.thinking`` is declared reasoning (2.4.0 named the first two
  ``unknown_shape``, the errors ``provider_error:unclassified``, and dropped the thinking)
- from 2.6.0: a web search the provider ran itself before it answered (``url_citation``
  annotations on the message: OpenAI's search models, OpenRouter's web search; an answer
  of one of OpenAI's Chat Completions search models (``gpt-4o-search-preview``,
  ``gpt-5-search-api``...), which search before every answer; a count in
  OpenRouter's ``usage.server_tool_use_details``; Perplexity's ``search_results`` /
  ``citations``; Azure On Your Data's ``message.context`` citations) ->
  ``provider_executed_tool`` (2.5.0 read the answer beside it as the answer)
- from 2.7.0: a choice whose ``finish_reason`` is stated ``null`` -> ``truncated_output``:
  a ``chat.completion`` choice always states why it finished (``Choice.finish_reason`` is
  required and never null), and only a stream chunk's choice says ``null``: not finished
  yet (2.6.0 read its text as the answer and its calls as proposals). A choice *without*
  the key, or a bare message, is read as before: compatible gateways leave it out of
  finished answers (recorded: OpenRouter -> Nebius), so its absence says nothing. A chunk
  itself (``object: chat.completion.chunk``, a choice with a ``delta``) is not an assistant
  message: ``unknown_shape``, as in every version
- reasoning fields (``reasoning_content``, ``reasoning``) and Mistral's ``thinking``
  content parts are declared reasoning, not output: commentary evidence, ignored by the
  parse
- then the text and calls go through ``parsing.decide``: ``finish_reason: tool_calls`` (or
  the legacy ``function_call``) is a turn stopped for tool use, so text before one call is
  a preamble; with ``stop`` or no finish reason, text beside a call is ``mixed_output``.
  From 2.2.0 a ``{"final": ...}`` answer with duplicate keys is ``malformed_final``.

Versions: ``VERSION`` reads new runs; ``EARLIER`` keeps each earlier version's mapping
unchanged, for the runs recorded under it (a run never changes adapter version).

Compatible-endpoint quirks read as what they mean: empty placeholders (``function_call:
{"name": "", "arguments": ""}``, ``refusal: ""``) are absent; a call without ``type``
(Mistral) is a function call; an empty call ``id`` (Gemini) does not matter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from runs.domain.proposals import Proposal, RejectionReason
from runs.policies import limits, parsing, provider_errors
from runs.policies.parsing import Reading, Reject, Stop, ToolCall, Turn

VERSION = "openai-tool-calls-adapter@2.7.0"
# 2.6.0 read a choice whose finish_reason is null (a stream chunk's, not finished) as the
# answer or the call; kept as it was for runs recorded under it.
VERSION_2_6 = "openai-tool-calls-adapter@2.6.0"
# 2.5.0 read an answer resting on a web search the provider ran itself (``url_citation``
# annotations, OpenRouter's server tool counts, Perplexity's search results) as the answer;
# kept as it was for runs recorded under it.
VERSION_2_5 = "openai-tool-calls-adapter@2.5.0"
# 2.4.0 named Together's eos finish and an Azure choice filtered without a message
# unknown_shape, left Azure's prompt filter error and string status codes unclassified and
# dropped Ollama's thinking; kept as it was for runs recorded under it.
VERSION_2_4 = "openai-tool-calls-adapter@2.4.0"
# 2.3.0 read an answer beside tools the provider ran itself (Groq's ``executed_tools``) and
# an Ollama /api/chat body as a choice without a finish reason (its ``done`` /
# ``done_reason`` unread); kept as it was for runs recorded under it.
VERSION_2_3 = "openai-tool-calls-adapter@2.3.0"
# 2.2.0 read a finish_reason it did not know as the end of an answer; kept as it was for
# runs recorded under it.
VERSION_2_2 = "openai-tool-calls-adapter@2.2.0"
# 2.1.0 read a {"final": ...} answer with duplicate keys (the last value won) and ignored
# Azure's content filter results; kept as it was for runs recorded under it.
VERSION_2_1 = "openai-tool-calls-adapter@2.1.0"
PROVIDER = "openai"

# Kept for callers of the first version of this module.
HANDOFF_PREFIXES = parsing.HANDOFF_PREFIXES
tool_proposal = parsing.tool_proposal
final_proposal = parsing.final_proposal

TOOL_FINISH = frozenset({"tool_calls", "function_call"})
ANSWER_FINISH = frozenset({"stop", "end_turn"})
# The finish reasons the API documents (openai/types/chat/chat_completion.py), OpenRouter's
# ``error``, and ``""`` (a compatible endpoint that states none, as Snowflake's): from
# 2.3.0 any other is not known to end an answer (a compatible server's aborted or cut
# generation), so it is ``unknown_shape``, never a proposal.
FINISH_REASONS = frozenset({*TOOL_FINISH, *ANSWER_FINISH, "length", "content_filter", "error", ""})
# OpenAI's Chat Completions search models (gpt-4o-search-preview, gpt-4o-mini-search-preview
# and their dated snapshots, gpt-5-search-api), possibly behind a gateway's "openai/" prefix.
SEARCH_MODEL = re.compile(r"^gpt-[\w.-]*-search-(preview|api)(-[\w.-]+)?$")
# Together's end of sequence, typed beside ``stop`` by its API (together-py): from 2.5.0
# the end of an answer.
EOS_FINISH = "eos"


def _read(
    raw: Any,
    kinds: Mapping[str, str],
    *,
    strict: bool = True,
    known_finish: bool = True,
    server_tools: bool = True,
    quirks: bool = True,
    searched: bool = True,
    finished: bool = True,
) -> Reading:
    """Return what ``raw`` (one Chat Completions output) proposes; never raises.

    ``finished`` is the 2.7.0 mapping (``finished=False`` is 2.6.0's), ``searched=False``
    2.5.0's, ``quirks=False`` 2.4.0's, ``server_tools=False`` 2.3.0's,
    ``known_finish=False`` 2.2.0's, ``strict=False`` 2.1.0's; all kept unchanged.
    """
    limit = limits.check(raw)
    if limit is not None:
        return Reading(parsing.rejected(limit))
    if not isinstance(raw, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object"))
    if raw.get("error"):
        return Reading(_error(raw["error"], quirks=quirks))
    choice: Any = raw
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list):
            return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "choices is not a list"))
        if not choices:
            return Reading(parsing.invalid(Reject.EMPTY_OUTPUT, "no choices"))
        if len(choices) > 1:
            return Reading(
                parsing.invalid(
                    Reject.MULTIPLE_CHOICES,
                    f"{len(choices)} choices",
                    limit="choices",
                    measured=len(choices),
                    maximum=1,
                )
            )
        choice = choices[0]
    if not isinstance(choice, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "choice is not an object"))
    message = choice.get("message", choice)
    stated = choice.get("finish_reason")
    finish_field = "finish_reason"
    if server_tools and "choices" not in raw and _is_ollama(choice):
        done = choice.get("done")
        if done is False:
            # One object of a stream (or a response cut before its end): not an answer.
            r = parsing.reason(Reject.TRUNCATED, "the Ollama response is not done (done false)")
            return Reading(parsing.rejected(r))
        if done is not True:
            r = parsing.reason(
                Reject.UNKNOWN_SHAPE, f"Ollama done {json.dumps(done, default=str)[:40]}"
            )
            return Reading(parsing.rejected(r))
        stated = _ollama_finish(choice.get("done_reason"), message)
        finish_field = "done_reason"
    finish = stated
    finish = finish_text = finish if isinstance(finish, str) else None
    if finish == "error" or (isinstance(choice.get("error"), Mapping) and choice["error"]):
        # A gateway that lost its upstream part way (OpenRouter) has already answered 200:
        # the failure rides on the choice, beside whatever text came first. Never an answer.
        return Reading(_error(choice.get("error")))
    if quirks and choice.get("message") is None:
        # Azure drops the message of a completion its filter blocked: the choice keeps
        # only its finish reason and the filter results.
        blocked = _blocked(raw, choice)
        if blocked or finish == "content_filter":
            return Reading(parsing.rejected(_filtered(blocked, finish_text or "")))
    if not isinstance(message, Mapping) or not _is_assistant_message(message):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not an assistant message"))
    reasoning = _reasoning(message, thinking=quirks)
    refusal = message.get("refusal")
    if refusal:
        text = refusal if isinstance(refusal, str) else json.dumps(refusal, default=str)[:300]
        return Reading(_refusal(text, finish_text or ""), reasoning)
    text, thinking, problem = _text(message.get("content"))
    reasoning = _joined(reasoning, thinking)
    if problem is not None:
        return Reading(parsing.rejected(problem), reasoning)
    blocked = _blocked(raw, choice) if strict else []
    if blocked:
        r = parsing.content_filter_refusal(blocked, finish_text or "")
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    if finish == "content_filter":
        r = parsing.reason(
            Reject.REFUSAL,
            "the provider filtered the content",
            category="content_filter",
            provider_stop=finish_text or "",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    if quirks and finish == EOS_FINISH:
        finish = "stop"
    if finished and "finish_reason" in choice and stated is None:
        r = parsing.reason(
            Reject.TRUNCATED,
            "the choice is not finished (finish_reason null: a stream chunk's choice)",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    if finish == "length":
        r = parsing.reason(
            Reject.TRUNCATED, "the output hit the token limit", provider_stop=finish_text or ""
        )
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    if (
        known_finish
        and stated is not None
        and not (isinstance(stated, str) and stated in FINISH_REASONS)
        and not (quirks and stated == EOS_FINISH)
    ):
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            f"unknown {finish_field} {json.dumps(stated, default=str)[:60]}",
            provider_stop=finish_text or "",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    executed = _executed(message.get("executed_tools")) if server_tools else ""
    if executed:
        # The provider ran tools itself before it answered (Groq's compound systems): what
        # the turn says rests on tool results no validation saw.
        r = parsing.reason(
            Reject.PROVIDER_EXECUTED_TOOL,
            f"executed_tools: {executed}",
            provider_stop=finish_text or "",
        )
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    search = _provider_search(raw, message) if searched else ""
    if search:
        # The provider searched the web itself and wrote from what it found: the turn rests
        # on results no validation saw, like Groq's executed tools.
        r = parsing.reason(Reject.PROVIDER_EXECUTED_TOOL, search, provider_stop=finish_text or "")
        return Reading(parsing.rejected(r), _joined(reasoning, text))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "tool_calls is not a list"))
    extracted = [_call(c) for c in calls]
    legacy = message.get("function_call")
    if _present(legacy):
        if extracted:
            return Reading(
                parsing.invalid(Reject.UNKNOWN_SHAPE, "both function_call and tool_calls")
            )
        extracted = [_function(legacy)]
    if finish in TOOL_FINISH or (_present(legacy) and finish is None):
        stop = Stop.TOOL_USE
    elif finish in ANSWER_FINISH:
        stop = Stop.ANSWER
    else:
        stop = Stop.UNKNOWN
    turn = Turn(
        text=text, calls=extracted, stop=stop, commentary=reasoning, provider_stop=finish_text or ""
    )
    return parsing.decide(turn, kinds, strict_final=strict)


read = parsing.guarded(_read)
read_2_6 = parsing.guarded(partial(_read, finished=False))
read_2_5 = parsing.guarded(partial(_read, searched=False, finished=False))
read_2_4 = parsing.guarded(partial(_read, quirks=False, searched=False, finished=False))
read_2_3 = parsing.guarded(
    partial(_read, server_tools=False, quirks=False, searched=False, finished=False)
)
read_2_2 = parsing.guarded(
    partial(
        _read,
        known_finish=False,
        server_tools=False,
        quirks=False,
        searched=False,
        finished=False,
    )
)
read_2_1 = parsing.guarded(
    partial(
        _read,
        strict=False,
        known_finish=False,
        server_tools=False,
        quirks=False,
        searched=False,
        finished=False,
    )
)
EARLIER = {
    VERSION_2_1: read_2_1,
    VERSION_2_2: read_2_2,
    VERSION_2_3: read_2_3,
    VERSION_2_4: read_2_4,
    VERSION_2_5: read_2_5,
    VERSION_2_6: read_2_6,
}


def parse(raw: Any, kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    return read(raw, kinds).proposal


def _is_ollama(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is an Ollama /api/chat response: a ``message`` with ``done`` /
    ``done_reason`` beside it instead of a ``finish_reason``."""
    return (
        "message" in body
        and "finish_reason" not in body
        and ("done" in body or "done_reason" in body)
    )


def _ollama_finish(done_reason: Any, message: Any) -> Any:
    """The finish reason Ollama's own compatible endpoint gives for ``done_reason``
    (ollama openai/openai.go): ``stop`` with tool calls is ``tool_calls``; none stated
    (absent or ``""``) is none; any other value is kept, for the finish reason check."""
    if done_reason is None or done_reason == "":
        return None
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    if done_reason == "stop" and calls:
        return "tool_calls"
    return done_reason


def _executed(executed: Any) -> str:
    """What a provider says it ran itself (``executed_tools``: Groq), named; "" if nothing."""
    if not executed:
        return ""
    if not isinstance(executed, list):
        return "reported"
    names = []
    for tool in executed:
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        names.append(kind[:40] if isinstance(kind, str) and kind else "a tool")
    return ", ".join(sorted(set(names)))[:200]


def _provider_search(raw: Mapping[str, Any], message: Mapping[str, Any]) -> str:
    """What says the provider ran a web search itself for this answer, named; "" if nothing.

    OpenAI's search models (``gpt-4o-search-preview``) and OpenRouter's web search mark the
    text they took from a page with ``url_citation`` annotations; OpenAI's search models
    search before every answer, so their answer rests on a search even when it cites none
    (recorded: ``"annotations": []``); OpenRouter also counts
    the server tools it ran in ``usage.server_tool_use_details``; Perplexity's API returns
    the pages it searched as ``search_results`` / ``citations`` beside the choices; Azure
    OpenAI On Your Data, the documents it retrieved from the data source as the message's
    ``context`` (``citations``, ``all_retrieved_documents``). Other annotation types (none
    documented yet) are not read as a search.
    """
    found = []
    model = raw.get("model")
    if isinstance(model, str) and SEARCH_MODEL.search(model.rsplit("/", 1)[-1]):
        found.append(f"web search (a search model: {model[:80]})")
    annotations = message.get("annotations")
    for annotation in annotations if isinstance(annotations, list) else []:
        if isinstance(annotation, Mapping) and annotation.get("type") == "url_citation":
            found.append("web search (url_citation annotations)")
            break
    usage = raw.get("usage")
    details = usage.get("server_tool_use_details") if isinstance(usage, Mapping) else None
    if isinstance(details, Mapping) and any(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in details.values()
    ):
        found.append("server tools (usage.server_tool_use_details)")
    if any(isinstance(raw.get(k), list) and raw[k] for k in ("search_results", "citations")):
        found.append("web search (search_results / citations)")
    context = message.get("context")
    if isinstance(context, Mapping) and any(
        isinstance(context.get(k), list) and context[k]
        for k in ("citations", "all_retrieved_documents")
    ):
        found.append("data source retrieval (Azure On Your Data: message.context)")
    return "; ".join(found)


def _blocked(raw: Mapping[str, Any], choice: Mapping[str, Any]) -> list[str]:
    """What Azure OpenAI's content filters blocked, in the choice or in the prompt."""
    blocked = [
        f"completion: {c}" for c in parsing.blocked_filters(choice.get("content_filter_results"))
    ]
    prompts = raw.get("prompt_filter_results")
    for prompt in prompts if isinstance(prompts, list) else []:
        if isinstance(prompt, Mapping):
            found = parsing.blocked_filters(prompt.get("content_filter_results"))
            blocked += [f"prompt: {c}" for c in found]
    return blocked


def _error(error: Any, *, quirks: bool = False) -> Proposal:
    """The provider error (or, from 2.5.0, Azure's prompt filter refusal) ``error`` names."""
    detail = str(error.get("message", ""))[:300] if isinstance(error, Mapping) else ""
    error_class = provider_errors.from_body(error)
    if quirks and isinstance(error, Mapping):
        if error.get("code") == "content_filter":
            # Azure refused the prompt: its filter's categories are in the innererror.
            inner = error.get("innererror")
            results = inner.get("content_filter_result") if isinstance(inner, Mapping) else None
            blocked = [f"prompt: {c}" for c in parsing.blocked_filters(results)]
            return parsing.rejected(_filtered(blocked, ""))
        code = error.get("code")
        if error_class == provider_errors.UNCLASSIFIED and _status_text(code):
            # Azure names the HTTP status as text ("404"), as OpenRouter does as a number.
            error_class = provider_errors.from_status(int(code))
    return parsing.provider_error(error_class, detail)


def _status_text(code: Any) -> bool:
    """Whether ``code`` is an HTTP status written as text (three ASCII digits)."""
    return isinstance(code, str) and len(code) == 3 and code.isascii() and code.isdigit()


def _filtered(blocked: list[str], finish: str) -> RejectionReason:
    """``model_refusal`` for a provider filter that acted (naming what it blocked, if said)."""
    if blocked:
        return parsing.content_filter_refusal(blocked, finish)
    return parsing.reason(
        Reject.REFUSAL,
        "the provider filtered the content",
        category="content_filter",
        provider_stop=finish,
    )


def _refusal(text: str, finish: str) -> Proposal:
    return parsing.rejected(
        parsing.reason(Reject.REFUSAL, text[:300], explanation=text[:1000], provider_stop=finish)
    )


def _present(value: Any) -> bool:
    """Whether a legacy ``function_call`` is really there (gateways send empty ones)."""
    if not value:
        return False
    if isinstance(value, Mapping):
        return any(value.get(k) not in (None, "") for k in ("name", "arguments"))
    return True


def _is_assistant_message(message: Mapping[str, Any]) -> bool:
    role = message.get("role", "assistant")
    if role != "assistant":
        return False
    return any(k in message for k in ("content", "tool_calls", "function_call", "refusal"))


def _reasoning(message: Mapping[str, Any], *, thinking: bool = False) -> str:
    """Declared reasoning: ``reasoning_content`` / ``reasoning``, from 2.5.0 also Ollama's
    ``thinking``."""
    parts = []
    keys = (
        ("reasoning_content", "reasoning", "thinking")
        if thinking
        else ("reasoning_content", "reasoning")
    )
    for key in keys:
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
    return "\n\n".join(parts)


def _joined(*parts: str) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def _text(content: Any) -> tuple[str, str, Any]:
    """Return (the assistant text of ``content``, its declared reasoning, a RejectionReason
    or None). Mistral's reasoning models send ``thinking`` parts (a list of text parts)
    before the ``text`` ones: declared reasoning, like ``reasoning_content``."""
    if content is None:
        return "", "", None
    if isinstance(content, str):
        return content, "", None
    if not isinstance(content, list):
        return "", "", parsing.reason(Reject.UNKNOWN_SHAPE, "content is neither text nor parts")
    texts = []
    thoughts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "refusal":
            refusal = part.get("refusal", "")
            refusal = refusal if isinstance(refusal, str) else ""
            return "", "", parsing.reason(Reject.REFUSAL, refusal, explanation=refusal[:1000])
        if kind == "thinking":
            thought = _thinking(part.get("thinking"))
            if thought is None:
                return "", "", parsing.reason(Reject.UNKNOWN_SHAPE, "a thinking part without text")
            thoughts.append(thought)
            continue
        if kind != "text" or not isinstance(part.get("text"), str):
            return "", "", parsing.reason(Reject.UNKNOWN_SHAPE, f"content part {kind!r}"[:100])
        texts.append(part["text"])
    return "".join(texts), _joined(*thoughts), None


def _thinking(value: Any) -> str | None:
    """The text of a ``thinking`` part's value (a list of text parts), None if it is not one."""
    if not isinstance(value, list):
        return None
    texts = []
    for part in value:
        if not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            return None
        texts.append(part["text"])
    return "".join(texts)


def _call(c: Any) -> ToolCall:
    if not isinstance(c, Mapping):
        return ToolCall(None, problem=Reject.MALFORMED_TOOL_CALL, detail="call is not an object")
    kind = c.get("type", "function")
    if not isinstance(kind, str) and kind is not None:
        kind = repr(type(kind).__name__)
    if kind is None:
        kind = "function"  # Mistral omits the type of its function calls
    if kind != "function":
        return ToolCall(
            None,
            problem=Reject.MALFORMED_TOOL_CALL,
            detail=f"unsupported call type {kind!r}"[:100],
        )
    return _function(c.get("function"))


def _function(function: Any) -> ToolCall:
    if not isinstance(function, Mapping):
        return ToolCall(
            None, problem=Reject.MALFORMED_TOOL_CALL, detail="tool call without a function"
        )
    return parsing.call(function.get("name"), function.get("arguments"))


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str,
    calls: Sequence[tuple[str, Mapping[str, Any], str]],
    stop: Stop = Stop.UNKNOWN,
) -> dict[str, Any]:
    """Render one ``chat.completion`` with ``text`` and ``calls`` (name, args, call id).

    ``stop`` picks the finish reason: ``tool_calls`` for a turn stopped for tool use,
    ``stop`` for an answer; by default the one a provider would give for the content.
    """
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
    if stop is Stop.UNKNOWN:
        stop = Stop.TOOL_USE if calls else Stop.ANSWER
    finish = "tool_calls" if stop is Stop.TOOL_USE else "stop"
    first = calls[0][2] if calls else "text"
    return {
        "id": f"chatcmpl-{first}",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """Render one tool call as a Chat Completions answer (used by the double)."""
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
