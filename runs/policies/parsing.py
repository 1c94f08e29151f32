"""What every provider adapter shares: the rejection classes, the limits, and the one
decision that turns "some text and some tool calls" into exactly one local proposal.

Each adapter only knows its provider's message shape. It extracts one ``Turn`` (the
assistant text, the tool calls with their decoded arguments or the reason decoding failed,
and whether the provider said the turn stopped *for tool use*) and hands it to ``decide``,
so the three adapters accept and reject the same things with the same typed reasons.

The preamble rule (SPEC §2): when the provider stopped the turn for tool use and there is
exactly one call, the call is the proposal and the text before it is commentary, kept as
evidence and never read as authority or as a final answer. Text beside a call in a turn
the provider ended as an answer (``end_turn``, ``stop``, a ``final_answer`` message) is
``mixed_output``: FieldOps declares no order between a final answer and a call.

Every rejection names every reason it found (each call's problem, all of the turn's), as
``RejectionReason`` values on the ``InvalidProposal``; its ``reason_code`` is the first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kernel.canonical import RepeatedKey, object_without_repeated_keys
from runs.domain.proposals import (
    CONTROL_OUTCOMES,
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    Proposal,
    RejectionReason,
    WaitIntent,
)
from runs.policies import limits, provider_errors


class Reject(StrEnum):
    """Typed parse failures: the codes of the reasons on the InvalidProposal an adapter
    returns. Validation step 2 denies the first as ``invalid_proposal:<code>`` and charges
    the correction budget."""

    UNKNOWN_SHAPE = "unknown_shape"  # not a message of this provider's vocabulary
    EMPTY_OUTPUT = "empty_output"  # neither text nor a tool call
    MIXED_OUTPUT = "mixed_output"  # a final answer and a tool call in one turn
    MULTIPLE_TOOL_CALLS = "multiple_tool_calls"  # more than one call in one turn
    TWO_EFFECT_CALLS = "two_effect_calls"  # more than one action-class call in one turn
    MULTIPLE_CHOICES = "multiple_choices"  # n > 1 candidates: provider order would decide
    HANDOFF = "handoff_not_admitted"  # FieldOps has no admitted handoff type
    MALFORMED_TOOL_CALL = "malformed_tool_call"  # a call without a name or function
    MALFORMED_ARGUMENTS = "malformed_arguments"  # arguments not one unambiguous JSON object
    MALFORMED_FINAL = "malformed_final"  # a {"final": ...} answer without artifact/refs
    REFUSAL = "model_refusal"  # the model (or the provider's filter) declined
    TRUNCATED = "truncated_output"  # the provider cut or paused the output
    PROVIDER_EXECUTED_TOOL = "provider_executed_tool"  # a server-side tool ran unvalidated
    LIMIT_EXCEEDED = limits.LIMIT_EXCEEDED  # depth, size or count over the adapter's limits
    ADAPTER_ERROR = "adapter_error"  # the adapter itself failed (a bug, never a model win)
    UNSTORABLE = "unstorable_output"  # a NUL or an unpaired surrogate: nothing can store it


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
MAX_COMMENTARY = 4000
MAX_DETAIL = 300


class Stop(StrEnum):
    """Why the provider says the turn ended."""

    TOOL_USE = "tool_use"  # stop_reason tool_use, finish_reason tool_calls, function_call
    ANSWER = "answer"  # end_turn, stop, a final_answer message: the text is an answer
    UNKNOWN = "unknown"  # not stated (a bare message): treated like an answer


@dataclass(frozen=True)
class ToolCall:
    """One tool call as an adapter extracted it; ``problem`` is a Reject code or ""."""

    name: Any
    args: Any = field(default_factory=dict)
    problem: str = ""
    detail: str = ""
    limit: RejectionReason | None = None


def call_with(name: Any, block: Mapping[str, Any], field: str, *, what: str) -> ToolCall:
    """The call ``name`` whose arguments are ``block[field]``, a JSON object; a call whose
    block has no such field, or holds something else there, has malformed arguments
    (``what``: the block as its vocabulary names it, for the detail)."""
    if field not in block:
        return ToolCall(name, problem=Reject.MALFORMED_ARGUMENTS, detail=f"{what} without {field}")
    arguments = block[field]
    if not isinstance(arguments, Mapping):
        return ToolCall(
            name, problem=Reject.MALFORMED_ARGUMENTS, detail=f"{field} is not a JSON object"
        )
    return ToolCall(name, dict(arguments))


@dataclass(frozen=True)
class Turn:
    """One assistant turn as an adapter extracted it from its provider's shape.

    ``text`` is the text that would be an answer; ``commentary`` text the provider itself
    labels as not-an-answer (reasoning summaries, ``commentary`` messages); ``problems``
    reasons the adapter found in the shape (unknown blocks...); ``provider_stop`` the raw
    stop/finish value, for the reasons' typed fields.
    """

    text: str = ""
    calls: Sequence[ToolCall] = ()
    stop: Stop = Stop.UNKNOWN
    commentary: str = ""
    problems: Sequence[RejectionReason] = ()
    provider_stop: str = ""


@dataclass(frozen=True)
class Reading:
    """What an adapter made of one raw output: exactly one proposal (possibly an
    InvalidProposal) and the model's commentary, which is evidence and never authority."""

    proposal: Proposal
    commentary: str = ""


def reason(code: Reject | str, detail: str = "", **fields: Any) -> RejectionReason:
    return RejectionReason(str(code), detail[:MAX_DETAIL], **fields)


def rejected(*reasons: RejectionReason) -> InvalidProposal:
    """The InvalidProposal naming every one of ``reasons`` (the first is its class)."""
    if not reasons:
        reasons = (reason(Reject.ADAPTER_ERROR, "a rejection without a reason"),)
    detail = reasons[0].detail if len(reasons) == 1 else "; ".join(_summary(r) for r in reasons)
    return InvalidProposal(reasons[0].code, detail[:MAX_DETAIL], reasons=tuple(reasons))


def _summary(r: RejectionReason) -> str:
    where = f"@call {r.call}" if r.call is not None else ""
    if r.tool:
        where += f" ({r.tool})"
    return f"{r.code}{where}: {r.detail}" if r.detail else f"{r.code}{where}"


def invalid(code: Reject | str, detail: str = "", **fields: Any) -> InvalidProposal:
    return rejected(reason(code, detail, **fields))


def provider_error(error_class: str, detail: str = "", **fields: Any) -> InvalidProposal:
    code = provider_errors.reason(error_class)
    return rejected(reason(code, detail, category=code.removeprefix("provider_error:"), **fields))


# -- arguments ---------------------------------------------------------------------------
def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_arguments(text: Any) -> ToolCall:
    """Decode one call's arguments (a JSON string, already-decoded object, or missing).

    Returns a ``ToolCall`` with ``name`` unset: ``args`` the object, or ``problem`` the
    reason it is not one unambiguous JSON object. Empty or missing arguments are not ``{}``:
    a call must state its arguments. Duplicate keys and NaN/Infinity are rejected (the
    decoder, not the proposal, would decide a value); the text is bounded before decoding.
    """
    if text is None:
        return ToolCall(
            None, problem=Reject.MALFORMED_ARGUMENTS, detail="the call has no arguments"
        )
    if isinstance(text, Mapping):
        return ToolCall(None, text)
    if not isinstance(text, str):
        return ToolCall(
            None, problem=Reject.MALFORMED_ARGUMENTS, detail="arguments are not a JSON object"
        )
    if not text.strip():
        return ToolCall(
            None,
            problem=Reject.MALFORMED_ARGUMENTS,
            detail="arguments are empty, not a JSON object",
        )
    limit = limits.check_json_text(text)
    if limit is not None:
        return ToolCall(None, problem=Reject.LIMIT_EXCEEDED, detail=limit.detail, limit=limit)
    try:
        value = json.loads(
            text, object_pairs_hook=object_without_repeated_keys, parse_constant=_no_constants
        )
    except RepeatedKey as exc:
        return ToolCall(
            None,
            problem=Reject.MALFORMED_ARGUMENTS,
            detail=f"duplicate argument keys: {', '.join(exc.keys)}",
        )
    except (ValueError, RecursionError):
        return ToolCall(
            None, problem=Reject.MALFORMED_ARGUMENTS, detail="arguments are not valid JSON"
        )
    if not isinstance(value, dict):
        return ToolCall(
            None, problem=Reject.MALFORMED_ARGUMENTS, detail="arguments are not a JSON object"
        )
    return ToolCall(None, value)


def call(name: Any, arguments: Any) -> ToolCall:
    """A ``ToolCall`` for ``name`` with ``arguments`` decoded by ``decode_arguments``."""
    decoded = decode_arguments(arguments)
    return ToolCall(name, decoded.args, decoded.problem, decoded.detail, decoded.limit)


def _json_problem(value: Any) -> str:
    """Why decoded arguments are not plain JSON data ("" when they are); iterative."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "arguments hold a non-finite number"
        if isinstance(item, Mapping):
            if any(not isinstance(k, str) for k in item):
                return "arguments have a key that is not text"
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not (item is None or isinstance(item, (str, int, float, bool))):
            return f"arguments hold a {type(item).__name__}, not JSON"
    return ""


# -- one call ----------------------------------------------------------------------------
def tool_proposal(name: Any, args: Any, kinds: Mapping[str, str]) -> Proposal:
    """Map one tool call (name, decoded args) onto the local union.

    ``kinds`` maps known capability ids to "observe" | "action" | "control". A name the
    adapter does not know is classified at the highest effect (ActionIntent); validation
    denies it at step 3.
    """
    if not isinstance(name, str) or not name.strip():
        return invalid(Reject.MALFORMED_TOOL_CALL, "tool call without a name")
    if name.startswith(HANDOFF_PREFIXES):
        return invalid(Reject.HANDOFF, name, tool=name)
    if not isinstance(args, Mapping):
        return invalid(Reject.MALFORMED_ARGUMENTS, "arguments are not a JSON object", tool=name)
    problem = _json_problem(args)
    if problem:
        return invalid(Reject.MALFORMED_ARGUMENTS, problem, tool=name)
    control = CONTROL_OUTCOMES.get(name)
    if control is not None:
        extra = sorted(set(args) - CONTROL_FIELDS[name])
        if extra:
            return invalid(
                Reject.MALFORMED_ARGUMENTS, f"{name} takes no {', '.join(extra)}", tool=name
            )
        if any(not isinstance(v, str) for v in args.values()):
            return invalid(
                Reject.MALFORMED_ARGUMENTS, f"{name} takes text arguments only", tool=name
            )
        if control == "clarify":
            return ClarifyIntent(args.get("question", ""))
        if control == "wait":
            return WaitIntent(args.get("reason", ""), args.get("expected_event", ""))
        return AbstainIntent(args.get("reason", ""))
    if kinds.get(name) == "observe":
        return ObserveIntent(name, dict(args))
    return ActionIntent(name, dict(args))


def _one(index: int, c: ToolCall, kinds: Mapping[str, str]) -> Proposal:
    tool = c.name if isinstance(c.name, str) else ""
    if c.limit is not None:
        r = c.limit
        return rejected(
            RejectionReason(
                r.code, r.detail, index, tool, limit=r.limit, measured=r.measured, maximum=r.maximum
            )
        )
    if c.problem:
        return rejected(reason(c.problem, c.detail, call=index, tool=tool))
    proposal = tool_proposal(c.name, c.args, kinds)
    if isinstance(proposal, InvalidProposal):
        return rejected(*(_at(r, index, tool) for r in proposal.reasons))
    return proposal


def _at(r: RejectionReason, index: int, tool: str) -> RejectionReason:
    return RejectionReason(
        r.code,
        r.detail,
        index,
        r.tool or tool,
        r.category,
        r.explanation,
        r.limit,
        r.measured,
        r.maximum,
        r.provider_stop,
    )


def _is_effect(c: ToolCall, kinds: Mapping[str, str]) -> bool:
    """Whether a call names an action-class tool (known or unknown), whatever its arguments."""
    name = c.name
    if not isinstance(name, str) or not name.strip() or name.startswith(HANDOFF_PREFIXES):
        return False
    return name not in CONTROL_OUTCOMES and kinds.get(name) != "observe"


# -- provider content filters ------------------------------------------------------------
def blocked_filters(results: Any) -> list[str]:
    """The categories an Azure OpenAI ``content_filter_results`` object marks as acted on.

    Azure names each category (``hate``, ``violence``, ``protected_material_text``,
    ``custom_blocklists``...) with ``filtered`` (and ``detected`` / ``severity``); an entry
    of the Responses ``content_filters`` list says ``blocked`` for the whole check. A
    category with ``filtered: true`` or ``blocked: true`` is one the filter blocked;
    ``detected`` alone (annotate-only) is not.
    """
    if not isinstance(results, Mapping):
        return []
    return sorted(
        str(name)[:60]
        for name, result in results.items()
        if isinstance(result, Mapping)
        and (result.get("filtered") is True or result.get("blocked") is True)
    )


def content_filter_refusal(blocked: Sequence[str], provider_stop: str = "") -> RejectionReason:
    """``model_refusal`` for a provider content filter that blocked ``blocked``."""
    return reason(
        Reject.REFUSAL,
        f"the provider's content filter blocked: {', '.join(blocked)}",
        category="content_filter",
        explanation=", ".join(blocked)[:1000],
        provider_stop=provider_stop,
    )


# -- the turn ----------------------------------------------------------------------------
def final_proposal(text: str, *, strict: bool = False) -> Proposal:
    """Plain assistant text is a final candidate; a JSON ``{"final": ...}`` carries refs.

    ``strict`` (the adapters from 2.2.0 / 1.2.0 on) refuses a ``{"final": ...}`` answer
    with duplicate keys anywhere in it as ``malformed_final``: the decoder, not the model,
    would pick which value counts (the check arguments and response bodies get). Earlier
    adapter versions keep their mapping (the last value wins) for replay.
    """
    limit = limits.check_json_text(text, max_depth=limits.MAX_DEPTH, max_bytes=limits.MAX_BYTES)
    if limit is not None:
        return rejected(limit)
    duplicates = ""
    try:
        if strict:
            try:
                data = json.loads(text, object_pairs_hook=object_without_repeated_keys)
            except RepeatedKey as exc:
                duplicates = ", ".join(exc.keys)
                data = json.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, RecursionError):
        return FinalCandidate({"text": text[:MAX_FINAL_TEXT]}, ())
    if isinstance(data, Mapping) and "final" in data and duplicates:
        return invalid(Reject.MALFORMED_FINAL, f"final has duplicate keys: {duplicates}")
    if isinstance(data, Mapping) and "final" in data:
        final = data["final"]
        if not isinstance(final, Mapping):
            return invalid(Reject.MALFORMED_FINAL, "final must be an object")
        refs = final.get("claimed_evidence_refs", [])
        artifact = final.get("artifact", {})
        if not isinstance(refs, list) or not isinstance(artifact, Mapping):
            return invalid(Reject.MALFORMED_FINAL, "final needs an artifact object and a refs list")
        if _json_problem(artifact) or any(not isinstance(r, (str, int)) for r in refs):
            return invalid(Reject.MALFORMED_FINAL, "final holds values that are not plain JSON")
        return FinalCandidate(dict(artifact), tuple(str(r) for r in refs))
    return FinalCandidate({"text": text[:MAX_FINAL_TEXT]}, ())


def decide(turn: Turn, kinds: Mapping[str, str], *, strict_final: bool = False) -> Reading:
    """Return the one proposal ``turn`` makes, and its commentary.

    Text beside exactly one call in a turn stopped for tool use is commentary (the
    preamble rule); beside a call in any other turn it is ``mixed_output``. More than one
    call is never admitted (one proposal per turn), and every call's own problem is named
    too. A turn that stopped for tool use without a call is ``truncated_output``.
    ``strict_final``: see ``final_proposal``.
    """
    text = turn.text.strip()
    notes = [turn.commentary.strip()] if turn.commentary.strip() else []
    reasons = list(turn.problems)
    calls = list(turn.calls)
    stop = turn.provider_stop
    if len(calls) > limits.MAX_CALLS:
        reasons.append(
            reason(
                Reject.LIMIT_EXCEEDED,
                f"{len(calls)} tool calls > {limits.MAX_CALLS}",
                limit="calls",
                measured=len(calls),
                maximum=limits.MAX_CALLS,
            )
        )
        return Reading(rejected(*reasons), _commentary([*notes, text]))
    if calls:
        if text and turn.stop is Stop.TOOL_USE:
            notes.append(text)
        elif text:
            reasons.append(
                reason(
                    Reject.MIXED_OUTPUT,
                    "a final answer beside a tool call in a turn not stopped for tool use",
                    provider_stop=stop,
                )
            )
        parsed = [_one(i, c, kinds) for i, c in enumerate(calls)]
        if len(calls) > 1:
            effects = [c.name for c in calls if _is_effect(c, kinds)]
            if len(effects) > 1:
                reasons.append(reason(Reject.TWO_EFFECT_CALLS, ", ".join(effects)))
            else:
                reasons.append(
                    reason(Reject.MULTIPLE_TOOL_CALLS, f"{len(calls)} calls in one turn")
                )
        for p in parsed:
            if isinstance(p, InvalidProposal):
                reasons.extend(p.reasons)
        if reasons:
            return Reading(rejected(*reasons), _commentary(notes))
        return Reading(parsed[0], _commentary(notes))
    if turn.stop is Stop.TOOL_USE:
        reasons.append(
            reason(
                Reject.TRUNCATED,
                "the provider stopped for tool use but sent no tool call",
                provider_stop=stop,
            )
        )
        return Reading(rejected(*reasons), _commentary([*notes, text]))
    if reasons:
        return Reading(rejected(*reasons), _commentary([*notes, text]))
    if text:
        return Reading(final_proposal(text, strict=strict_final), _commentary(notes))
    return Reading(invalid(Reject.EMPTY_OUTPUT, "no tool call and no text"), _commentary(notes))


def _commentary(parts: Sequence[str]) -> str:
    text = "\n\n".join(p for p in parts if p)
    return text[:MAX_COMMENTARY]


def guarded(read: Callable[[Any, Mapping[str, str]], Reading]) -> Callable[..., Reading]:
    """Wrap an adapter's ``read`` so that nothing a model sends can raise out of it.

    The adapters are written to be total (the property tests hold them to it); this is the
    last line: an unexpected exception becomes ``adapter_error``, a typed rejection on the
    run, never a stuck run.
    """

    def safe(raw: Any, kinds: Mapping[str, str]) -> Reading:
        try:
            return read(raw, kinds)
        except Exception as exc:
            return Reading(invalid(Reject.ADAPTER_ERROR, type(exc).__name__))

    safe.__doc__ = read.__doc__
    safe.__wrapped__ = read  # type: ignore[attr-defined]
    return safe


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
