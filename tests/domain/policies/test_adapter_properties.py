"""Property tests: for any JSON-ish provider output, each adapter returns exactly one
proposal or one typed rejection, and never raises.

The adapters' unguarded ``_read`` functions are tested (the runner's last-line guard that
turns an exception into ``adapter_error`` would hide a failure here), on random JSON,
on random values in provider-shaped objects, and on recorded fixtures with one part
replaced by something random.
"""

from __future__ import annotations

import json
import math
import os
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import (
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    EscalateIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    WaitIntent,
    from_dict,
    to_dict,
)
from runs.policies import (
    anthropic_adapter,
    bedrock_adapter,
    gemini_adapter,
    openai_adapter,
    openai_responses_adapter,
)
from runs.policies.parsing import Reading, Reject

KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
UNGUARDED = {
    "openai": openai_adapter._read,
    "openai-responses": openai_responses_adapter._read,
    "anthropic": anthropic_adapter._read,
    "gemini": gemini_adapter._read,
    "bedrock-converse": bedrock_adapter._read,
}
# The earlier versions still installed (for runs recorded under them) are held to it too.
EARLIER_UNGUARDED = [
    partial(openai_adapter._read, strict=False),
    partial(openai_adapter._read, server_tools=False),
    partial(openai_responses_adapter._read, strict=False),
    partial(openai_responses_adapter._read, hosted_shell=False),
    partial(anthropic_adapter._read, strict=False),
]
UNION = (
    ObserveIntent,
    ActionIntent,
    ClarifyIntent,
    WaitIntent,
    EscalateIntent,
    FinalCandidate,
    AbstainIntent,
    InvalidProposal,
)
KNOWN_CODES = {r.value for r in Reject}

# Words the vocabularies give meaning to, so random objects often look like outputs.
KEYS = [
    "choices", "message", "content", "tool_calls", "function", "arguments", "name", "type",
    "role", "finish_reason", "refusal", "function_call", "reasoning_content", "error", "code",
    "stop_reason", "stop_details", "category", "explanation", "input", "caller", "thinking",
    "output", "status", "incomplete_details", "reason", "phase", "summary", "text", "call_id",
    "namespace", "object", "id", "content_filters", "content_filter_results",
    "prompt_filter_results", "blocked", "filtered", "source_type", "executed_tools", "done",
    "done_reason", "environment",
    "candidates", "parts", "functionCall", "args", "thought", "thoughtSignature",
    "finishReason", "finishMessage", "promptFeedback", "blockReason", "safetyRatings",
    "willContinue", "partialArgs", "executableCode", "toolCall", "inlineData",
    "stopReason", "toolUse", "toolUseId", "reasoningContent", "reasoningText",
    "redactedContent", "toolResult", "citationsContent", "Error", "Code",
    "ResponseMetadata", "HTTPStatusCode", "$metadata", "httpStatusCode", "__type",
    "Message", "details", "@type",
]  # fmt: skip
WORDS = [
    "assistant", "user", "function", "tool_calls", "stop", "length", "content_filter",
    "message", "text", "tool_use", "end_turn", "refusal", "max_tokens", "pause_turn",
    "thinking", "server_tool_use", "web_search_tool_result", "error", "response",
    "function_call", "output_text", "reasoning", "completed", "incomplete", "failed",
    "queued", "final_answer", "commentary", "direct", "program", "custom_tool_call",
    "read_equipment", "reserve_part", "ask_user", "transfer_to_x", "rate_limit_error",
    '{"equipment_id": "EQ-17"}', "", "{", "null", '{"a": 1, "a": 2}',
    '{"final": {"artifact": {}, "claimed_evidence_refs": []}, "final": 1}', "in_progress",
    "cancelled", "requires_action", "violence", "search", "load", "unload",
    "shell_call", "shell_call_output", "container_auto", "local",
    "model", "STOP", "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "MODEL_ARMOR",
    "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "API_KEY_INVALID", "guardrail_intervened",
    "content_filtered", "malformed_tool_use", "server_tool_use", "ThrottlingException",
    "ValidationException",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(WORDS),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children, max_size=6
        ),
    ),
    max_leaves=40,
)
shaped = st.recursive(
    st.one_of(scalars, json_values),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), children, min_size=1, max_size=7),
    ),
    max_leaves=60,
)


def fixtures() -> list[tuple[str, Any]]:
    return [
        (v, json.loads(p.read_text()))
        for v in UNGUARDED
        for p in sorted((FIXTURES / v).glob("*.json"))
    ]


FIXTURE_BODIES = fixtures()


def replace_somewhere(value: Any, path: list[int], new: Any) -> Any:
    """``value`` with the node chosen by ``path`` (indexes into children) replaced."""
    if not path or not isinstance(value, (dict, list)) or not value:
        return new
    if isinstance(value, dict):
        keys = list(value)
        key = keys[path[0] % len(keys)]
        return {**value, key: replace_somewhere(value[key], path[1:], new)}
    index = path[0] % len(value)
    return [*value[:index], replace_somewhere(value[index], path[1:], new), *value[index + 1 :]]


def check(reading: Any) -> None:
    assert isinstance(reading, Reading)
    proposal = reading.proposal
    assert isinstance(proposal, UNION)
    assert isinstance(reading.commentary, str)
    if isinstance(proposal, InvalidProposal):
        assert proposal.reasons, proposal
        assert proposal.reasons[0].code == proposal.reason_code
        code = proposal.reason_code
        assert code in KNOWN_CODES or code.startswith("provider_error:"), code
        assert code != Reject.ADAPTER_ERROR
    stored = to_dict(proposal)
    json.dumps(stored, allow_nan=False)  # storable as evidence
    assert from_dict(stored) == proposal
    if isinstance(proposal, (ObserveIntent, ActionIntent)):
        assert not _has_non_finite(proposal.args)


def _has_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


PROPERTY = settings(
    max_examples=int(os.environ.get("FIELDOPS_PROPERTY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(raw=json_values)
def test_random_json_gives_one_proposal_or_one_typed_rejection(raw):
    for read in UNGUARDED.values():
        check(read(raw, KINDS))


@PROPERTY
@given(raw=shaped)
def test_random_provider_shaped_objects_give_one_proposal_or_one_typed_rejection(raw):
    for read in [*UNGUARDED.values(), *EARLIER_UNGUARDED]:
        check(read(raw, KINDS))


@PROPERTY
@given(
    which=st.integers(min_value=0, max_value=len(FIXTURE_BODIES) - 1),
    path=st.lists(st.integers(min_value=0, max_value=50), max_size=8),
    new=json_values,
)
def test_recorded_outputs_with_any_part_replaced_never_break_an_adapter(which, path, new):
    vocabulary, body = FIXTURE_BODIES[which]
    mutated = replace_somewhere(body, path, new)
    check(UNGUARDED[vocabulary](mutated, KINDS))
    # ...and read in the other vocabularies' terms (and by the earlier versions), too.
    for read in [*UNGUARDED.values(), *EARLIER_UNGUARDED]:
        check(read(mutated, KINDS))


@PROPERTY
@given(depth=st.integers(min_value=60, max_value=3000), as_text=st.booleans())
def test_any_nesting_depth_is_a_typed_rejection_never_a_recursion_error(depth, as_text):
    args: Any = "[" * depth + "]" * depth if as_text else nested(depth)
    outputs = {
        "openai": openai_adapter.render_call("check_inventory", {}, "c"),
        "openai-responses": openai_responses_adapter.render_call("check_inventory", {}, "c"),
        "anthropic": anthropic_adapter.render_call("check_inventory", {}, "c"),
        "gemini": gemini_adapter.render_call("check_inventory", {}, "c"),
        "bedrock-converse": bedrock_adapter.render_call("check_inventory", {}, "c"),
    }
    outputs["openai"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        args if as_text else json.dumps(1)
    )
    outputs["openai-responses"]["output"][0]["arguments"] = args if as_text else "{}"
    outputs["anthropic"]["content"][0]["input"] = {"deep": nested(depth)}
    outputs["gemini"]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] = {
        "deep": nested(depth)
    }
    outputs["bedrock-converse"]["output"]["message"]["content"][0]["toolUse"]["input"] = {
        "deep": nested(depth)
    }
    decoded = ("anthropic", "gemini", "bedrock-converse")
    for vocabulary, raw in outputs.items():
        if not as_text and vocabulary not in decoded:
            raw = {"wrapper": nested(depth)}
        reading = UNGUARDED[vocabulary](raw, KINDS)
        check(reading)
        assert isinstance(reading.proposal, InvalidProposal)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value
