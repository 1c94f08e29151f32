"""Adapter for OpenAI Responses API output (a ``response`` whose ``output`` is a list of
items) into exactly one local proposal, or a typed rejection naming every reason.

Items: ``function_call`` (name, ``arguments`` JSON text, ``call_id``) is a tool call;
``message`` carries ``output_text`` and ``refusal`` parts; ``reasoning`` is declared
reasoning (its summary is commentary evidence, never read). In the order checked:

- limits (depth, values, bytes) before anything else is read -> ``output_limit_exceeded``
- an ``error`` (an HTTP error body, or ``status: failed``) -> ``provider_error:<class>``
- from 1.2.0: a ``status`` other than the documented ones (``completed``, ``incomplete``,
  ``failed``, ``cancelled``, ``queued``, ``in_progress``) -> ``unknown_shape`` (1.1.0
  read it as completed); an Azure OpenAI ``content_filters`` entry that is ``blocked``
  (or filtered a category) -> ``model_refusal`` (category ``content_filter``)
- ``status: incomplete``: ``incomplete_details.reason`` ``content_filter`` ->
  ``model_refusal``, any other (``max_output_tokens``...) -> ``truncated_output``; a
  response still ``queued`` / ``in_progress`` (background mode) or ``cancelled`` ->
  ``truncated_output``. No ``status`` at all is read as before: Responses-compatible APIs
  leave it out of finished responses, so its absence says nothing (an unfinished item still
  says so by its own ``status``, below). A stream event (``type``
  ``response.output_text.delta``, ``response.in_progress``..., the response inside it) is
  not a response: ``unknown_shape``
- hosted tools that ran at the provider (``web_search_call``, ``file_search_call``,
  ``code_interpreter_call``, ``mcp_call``, ``image_generation_call``, ``program``, xAI's
  ``x_search_call``...), or a
  ``function_call`` whose ``caller`` is a provider-run program -> ``provider_executed_tool``;
  from 1.3.0 also the hosted shell: a ``shell_call`` whose ``environment`` is a container
  the provider manages (``container_auto`` / ``container_reference``) and any
  ``shell_call_output`` (1.2.0 named them ``malformed_tool_call`` / ``unknown_shape``);
  from 1.4.0 an ``output_text`` with ``url_citation`` annotations but no search item
  (Responses-compatible APIs that search before every answer, as Parallel's, or add web
  results by a plugin, as OpenRouter's: the answer rests on pages no validation saw; 1.3.0
  read it as the answer)
- from 1.5.0: a ``message`` or ``function_call`` item whose own ``status`` is
  ``in_progress`` or ``incomplete`` -> ``truncated_output``, whatever the response's status
  says (a stream snapshot, a compatible API that states none: the item itself is cut; 1.4.0
  read the text as the answer, the call as a proposal); an ``incomplete_details.reason``
  beside another status is read as ``status: incomplete`` (1.4.0 ignored it)
- a ``refusal`` part -> ``model_refusal`` (its text is the ``explanation``)
- calls the client would run that are not functions (``custom_tool_call``,
  ``computer_call``, ``local_shell_call``, a ``tool_search_call`` with ``execution:
  client``...) -> ``malformed_tool_call``
- then text and calls go through ``parsing.decide``. A ``function_call`` item means the
  turn stopped for tool use, so a ``message`` before one call is a preamble (commentary)
  unless the model labelled it ``phase: final_answer``, which is ``mixed_output``.
  ``phase: commentary`` messages are commentary in any turn. From 1.2.0 a
  ``{"final": ...}`` answer with duplicate keys is ``malformed_final``.

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

VERSION = "openai-responses-adapter@1.5.0"
# 1.4.0 read a message or function_call item whose own status was in_progress / incomplete
# as finished; kept for its recorded runs.
VERSION_1_4 = "openai-responses-adapter@1.4.0"
# 1.3.0 read an answer citing web pages (url_citation annotations) without a search item as
# the answer; kept for its recorded runs.
VERSION_1_3 = "openai-responses-adapter@1.3.0"
# 1.2.0 named a hosted shell (a shell_call OpenAI ran in its container, its
# shell_call_output) unknown_shape / malformed_tool_call; kept for its recorded runs.
VERSION_1_2 = "openai-responses-adapter@1.2.0"
# 1.1.0 read an unknown status as completed, a {"final": ...} answer with duplicate keys
# (the last value won) and ignored Azure's content filters; kept for its recorded runs.
VERSION_1_1 = "openai-responses-adapter@1.1.0"
PROVIDER = "openai-responses"

HOSTED_TOOL_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "tool_search_call",
        "tool_search_output",
        "program",
        "program_output",
        # Responses-compatible APIs' own hosted tools (xAI: X search).
        "x_search_call",
    }
)
CLIENT_NON_FUNCTION_CALLS = frozenset(
    {"custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call"}
)
CLIENT_TOOL_SEARCH = "tool_search_call (execution client)"
# From 1.3.0: the hosted shell. OpenAI runs a ``shell_call`` whose ``environment`` is a
# container it manages and returns each ``shell_call_output``; a shell call without one
# (or ``local``) is the client's to run, as before.
HOSTED_SHELL_OUTPUT = "shell_call_output"
IGNORED_ITEMS = frozenset({"reasoning", "compaction"})
# The items read as output, and the item statuses that say one is not finished
# (``ResponseOutputMessage.status``, ``ResponseFunctionToolCall.status``).
OUTPUT_ITEMS = frozenset({"message", "function_call"})
UNFINISHED_ITEMS = frozenset({"in_progress", "incomplete"})
NOT_DONE = frozenset({"queued", "in_progress", "cancelled"})
# The statuses the Responses API documents (openai/types/responses/response.py).
STATUSES = frozenset({"completed", "incomplete", "failed", *NOT_DONE})


def _read(
    raw: Any,
    kinds: Mapping[str, str],
    *,
    strict: bool = True,
    hosted_shell: bool = True,
    cited: bool = True,
    item_status: bool = True,
) -> Reading:
    """Return what ``raw`` (one Responses API output) proposes; never raises.

    ``item_status`` is the 1.5.0 mapping (``item_status=False`` is 1.4.0's), ``cited=False``
    1.3.0's, ``hosted_shell=False`` 1.2.0's, ``strict=False`` 1.1.0's; all kept unchanged.
    """
    limit = limits.check(raw)
    if limit is not None:
        return Reading(parsing.rejected(limit))
    if not isinstance(raw, Mapping):
        return Reading(parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a JSON object"))
    status = raw.get("status")
    status = status_text = status if isinstance(status, str) else ""
    if raw.get("error"):
        error = raw["error"]
        detail = str(error.get("message", ""))[:300] if isinstance(error, Mapping) else ""
        return Reading(parsing.provider_error(provider_errors.from_body(error), detail))
    if raw.get("object", "response") != "response" or not isinstance(raw.get("output"), list):
        return Reading(
            parsing.invalid(Reject.UNKNOWN_SHAPE, "output is not a Responses API response")
        )
    items = raw["output"]
    reasoning = _reasoning(items)
    stated = raw.get("status")
    if strict and stated is not None and not (isinstance(stated, str) and stated in STATUSES):
        # A status the API does not document is not a finished answer: nothing says the
        # output is complete, so nothing in it is a proposal.
        r = parsing.reason(
            Reject.UNKNOWN_SHAPE,
            f"unknown response status {json.dumps(stated, default=str)[:60]}",
            provider_stop=status_text,
        )
        return Reading(parsing.rejected(r), reasoning)
    if status == "failed":
        return Reading(parsing.provider_error(provider_errors.UNCLASSIFIED, "status failed"))
    blocked = _blocked(raw.get("content_filters")) if strict else []
    if blocked:
        r = parsing.content_filter_refusal(blocked, status_text)
        return Reading(parsing.rejected(r), reasoning)
    details = raw.get("incomplete_details")
    stated_cut = isinstance(details, Mapping) and isinstance(details.get("reason"), str)
    if status == "incomplete" or (item_status and stated_cut):
        # From 1.5.0 an ``incomplete_details.reason`` says the output was cut whatever the
        # status beside it says.
        why = details.get("reason") if isinstance(details, Mapping) else None
        why_text = why if isinstance(why, str) else ""
        if why == "content_filter":
            r = parsing.reason(
                Reject.REFUSAL,
                "the provider filtered the content",
                category="content_filter",
                provider_stop=f"incomplete:{why_text}",
            )
        else:
            r = parsing.reason(
                Reject.TRUNCATED,
                f"the response is incomplete ({why_text or 'no reason given'})",
                provider_stop=f"incomplete:{why_text}",
            )
        return Reading(parsing.rejected(r), reasoning)
    if status in NOT_DONE:
        r = parsing.reason(
            Reject.TRUNCATED,
            f"the response is not done (status {status})",
            provider_stop=status_text,
        )
        return Reading(parsing.rejected(r), reasoning)
    kinds_seen = [_kind(i) for i in items]
    # A tool search the client is asked to run ran nowhere yet: a call, not a function call.
    kinds_seen = [
        CLIENT_TOOL_SEARCH if k == "tool_search_call" and i.get("execution") == "client" else k
        for i, k in zip(items, kinds_seen, strict=True)
    ]
    if hosted_shell:
        kinds_seen = [
            f"shell_call (hosted: {_container(i)})" if k == "shell_call" and _container(i) else k
            for i, k in zip(items, kinds_seen, strict=True)
        ]
    hosted = (HOSTED_TOOL_ITEMS | {HOSTED_SHELL_OUTPUT}) if hosted_shell else HOSTED_TOOL_ITEMS
    executed = sorted(
        {
            k
            for k in kinds_seen
            if isinstance(k, str) and (k in hosted or k.startswith("shell_call (hosted"))
        }
    )
    executed += sorted(
        {
            f"function_call called by {_caller(i)}"
            for i, k in zip(items, kinds_seen, strict=True)
            if k == "function_call" and _caller(i) not in ("", "direct")
        }
    )
    if cited and not executed and _cites_the_web(items):
        # No search item, yet the text cites pages: the provider searched all the same.
        executed.append("web search (url_citation annotations)")
    if executed:
        r = parsing.reason(Reject.PROVIDER_EXECUTED_TOOL, ", ".join(executed))
        return Reading(parsing.rejected(r), reasoning)
    unfinished = [
        f"output item {index} ({kind}) is {item.get('status')}"
        for index, (item, kind) in enumerate(zip(items, kinds_seen, strict=True))
        if item_status and kind in OUTPUT_ITEMS and item.get("status") in UNFINISHED_ITEMS
    ]
    if unfinished:
        r = parsing.reason(Reject.TRUNCATED, "; ".join(unfinished)[:300], provider_stop=status_text)
        return Reading(parsing.rejected(r), reasoning)
    answer: list[str] = []
    commentary: list[str] = [reasoning] if reasoning else []
    calls: list[ToolCall] = []
    problems = []
    final_answer = False
    for index, (item, kind) in enumerate(zip(items, kinds_seen, strict=True)):
        if kind in IGNORED_ITEMS:
            continue
        if kind == "function_call":
            calls.append(_call(item))
        elif kind == "message":
            text, problem = _message_text(item)
            if problem is not None:
                if problem.code == Reject.REFUSAL:
                    return Reading(parsing.rejected(problem), "\n\n".join(commentary))
                problems.append(problem)
                continue
            phase = item.get("phase") if isinstance(item.get("phase"), str) else None
            if phase == "commentary":
                commentary.append(text)
            else:
                final_answer = final_answer or phase == "final_answer"
                answer.append(text)
        elif kind in CLIENT_NON_FUNCTION_CALLS or kind == CLIENT_TOOL_SEARCH:
            calls.append(
                ToolCall(
                    item.get("name") if isinstance(item.get("name"), str) else None,
                    problem=Reject.MALFORMED_TOOL_CALL,
                    detail=f"unsupported call type {item.get('type')!r}",
                )
            )
        else:
            problems.append(
                parsing.reason(Reject.UNKNOWN_SHAPE, f"output item {index}: {kind!r}"[:100])
            )
    # A function_call item means the turn stopped for tool use, unless the model itself
    # labelled its text the final answer.
    stop = Stop.TOOL_USE if calls and not final_answer else Stop.ANSWER
    turn = Turn(
        text="".join(answer),
        calls=calls,
        stop=stop,
        commentary="\n\n".join(c for c in commentary if c.strip()),
        problems=problems,
        provider_stop=status_text,
    )
    return parsing.decide(turn, kinds, strict_final=strict)


read = parsing.guarded(_read)
read_1_4 = parsing.guarded(partial(_read, item_status=False))
read_1_3 = parsing.guarded(partial(_read, cited=False, item_status=False))
read_1_2 = parsing.guarded(partial(_read, hosted_shell=False, cited=False, item_status=False))
read_1_1 = parsing.guarded(
    partial(_read, strict=False, hosted_shell=False, cited=False, item_status=False)
)
EARLIER = {
    VERSION_1_1: read_1_1,
    VERSION_1_2: read_1_2,
    VERSION_1_3: read_1_3,
    VERSION_1_4: read_1_4,
}


def parse(raw: Any, kinds: Mapping[str, str]) -> Proposal:
    """Return the one local proposal ``raw`` makes, or an InvalidProposal saying why not."""
    return read(raw, kinds).proposal


def _blocked(filters: Any) -> list[str]:
    """What Azure OpenAI's ``content_filters`` (one entry per checked text) blocked."""
    blocked: list[str] = []
    for entry in filters if isinstance(filters, list) else []:
        if not isinstance(entry, Mapping):
            continue
        source = entry.get("source_type")
        source = source[:30] if isinstance(source, str) else "content"
        found = parsing.blocked_filters(entry.get("content_filter_results"))
        if entry.get("blocked") is True or found:
            blocked += [f"{source}: {c}" for c in found] or [f"{source}: blocked"]
    return blocked


def _kind(item: Any) -> str | None:
    kind = item.get("type") if isinstance(item, Mapping) else None
    return kind if isinstance(kind, str) else None


def _container(item: Any) -> str:
    """The type of the provider-managed container a ``shell_call`` runs in ("" if none)."""
    environment = item.get("environment") if isinstance(item, Mapping) else None
    kind = environment.get("type") if isinstance(environment, Mapping) else None
    return kind[:40] if isinstance(kind, str) and kind.startswith("container") else ""


def _caller(item: Mapping[str, Any]) -> str:
    caller = item.get("caller")
    if caller is None:
        return ""
    if isinstance(caller, Mapping) and isinstance(caller.get("type"), str):
        return caller["type"][:60]
    return "an unknown caller"


def _reasoning(items: Sequence[Any]) -> str:
    """The reasoning summaries (declared reasoning, kept as commentary, never parsed)."""
    texts = []
    for item in items:
        if not (isinstance(item, Mapping) and item.get("type") == "reasoning"):
            continue
        for part in item.get("summary") or []:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"].strip())
    return "\n\n".join(t for t in texts if t)


def _cites_the_web(items: Sequence[Any]) -> bool:
    """Whether a message's ``output_text`` carries a ``url_citation`` annotation (a page the
    provider read); ``file_citation`` / ``container_file_citation`` come with the hosted
    file search / code interpreter items, which are read as such already."""
    for item in items:
        content = item.get("content") if isinstance(item, Mapping) else None
        for part in content if isinstance(content, list) else []:
            notes = part.get("annotations") if isinstance(part, Mapping) else None
            for note in notes if isinstance(notes, list) else []:
                if isinstance(note, Mapping) and note.get("type") == "url_citation":
                    return True
    return False


def _message_text(item: Mapping[str, Any]) -> tuple[str, Any]:
    """Return (the text of a message item, a RejectionReason or None)."""
    if item.get("role", "assistant") != "assistant":
        return "", parsing.reason(Reject.UNKNOWN_SHAPE, "message is not from the assistant")
    content = item.get("content")
    if not isinstance(content, list):
        return "", parsing.reason(Reject.UNKNOWN_SHAPE, "message content is not a list")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "refusal":
            refusal = part.get("refusal")
            refusal = refusal if isinstance(refusal, str) else ""
            return "", parsing.reason(Reject.REFUSAL, refusal, explanation=refusal[:1000])
        if kind != "output_text" or not isinstance(part.get("text"), str):
            return "", parsing.reason(Reject.UNKNOWN_SHAPE, f"message part {kind!r}"[:100])
        texts.append(part["text"])
    return "".join(texts), None


def _call(item: Mapping[str, Any]) -> ToolCall:
    name = item.get("name")
    namespace = item.get("namespace")
    if isinstance(name, str) and isinstance(namespace, str) and namespace:
        # A namespaced tool is not one FieldOps offered: keep the qualified name, so it is
        # an unknown tool for validation, never a match by its short name.
        name = f"{namespace}.{name}"
    return parsing.call(name, item.get("arguments"))


# -- rendering (the policy double speaks this vocabulary) ------------------------------------
def render_message(
    text: str,
    calls: Sequence[tuple[str, Mapping[str, Any], str]],
    stop: Stop = Stop.UNKNOWN,
) -> dict[str, Any]:
    """Render one ``response`` with a message item and ``function_call`` items.

    With calls, the message is ``phase: final_answer`` when ``stop`` is an answer (the
    shape adapters must reject as mixed output) and ``commentary`` otherwise.
    """
    output: list[dict[str, Any]] = []
    first = calls[0][2] if calls else "text"
    if text:
        phase = "final_answer" if (not calls or stop is Stop.ANSWER) else "commentary"
        output.append(
            {
                "id": f"msg_{first}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "phase": phase,
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for name, args, call_id in calls:
        output.append(
            {
                "id": f"fc_{call_id}",
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(dict(args), sort_keys=True),
                "status": "completed",
            }
        )
    return {"id": f"resp_{first}", "object": "response", "status": "completed", "output": output}


def render_call(name: str, args: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return render_message("", [(name, args, call_id)])


def render_text(text: str) -> dict[str, Any]:
    return render_message(text, [])
