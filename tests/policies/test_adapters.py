"""The provider adapters over recorded raw outputs (tests/fixtures/provider_outputs).

Each fixture is a verbatim response body of one API. Every one maps onto exactly one local
proposal or a typed rejection class; every rejection class has at least one recorded
fixture in each vocabulary where the provider can produce it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import (
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    WaitIntent,
)
from runs.policies import anthropic_adapter, double, openai_adapter, parsing, vocabularies
from runs.policies.parsing import UNKNOWN_TOOL, Reject

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "provider_outputs"
# The same map the runner hands to the adapter.
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}

READ = ObserveIntent("read_equipment", {"equipment_id": "EQ-17"})
SEARCH = ObserveIntent(
    "search_manual",
    {"query": "seal weep at the impeller housing", "family": "pump-fixture", "max_passages": 3},
)
PROPOSE = ActionIntent(
    "propose_reservation",
    {
        "part_id": "A17",
        "slot_id": "S-N1-01",
        "quantity": 1,
        "evidence_refs": [
            "ev-3e76ec6db2ca4e6eb775",
            "ev-f5cbecddc77442ec9a24",
            "ev-38b5a9f9d0b84588ae2a",
        ],
    },
)
RESERVE = ActionIntent("reserve_part", {"part_id": "A17", "slot_id": "S-N1-01", "quantity": 1})
ASK = ClarifyIntent("Which depot should supply the part?")
WAIT = WaitIntent("the depot confirms the delivery window", "depot.delivery_confirmed")
ABSTAIN = AbstainIntent("no capability schedules a technician visit")
FINAL = FinalCandidate(
    {
        "kind": "reservation_confirmation",
        "effect_id": "EF-3F9A1C2B7D4E",
        "text": "Reserved 1 x A17 in slot S-N1-01.",
    },
    ("ev-7755c82d2d54416da973", "ev-38b5a9f9d0b84588ae2a"),
)
FINAL_TEXT = FinalCandidate({"text": "Done: part A17 is reserved in slot S-N1-01."})
LOOKUP = ActionIntent("lookup_stock", {"part_id": "A17", "location_id": "LOC-N1"})

# fixture -> the proposal it must parse to, or the rejection class it must get.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai": {
        "tool_call_read_equipment": READ,
        "tool_call_search_manual": SEARCH,
        "tool_call_propose_reservation": PROPOSE,
        "tool_call_reserve_part": RESERVE,
        "tool_call_ask_user": ASK,
        "tool_call_wait_for_event": WAIT,
        "tool_call_no_applicable_tool": ABSTAIN,
        "legacy_function_call": READ,
        "reasoning_then_tool_call": READ,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "mixed_text_and_tool_call": Reject.MIXED_OUTPUT,
        "parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "parallel_two_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "malformed_arguments_truncated_json": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_duplicate_keys": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_not_object": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "tool_call_without_name": Reject.MALFORMED_TOOL_CALL,
        "custom_tool_call": Reject.MALFORMED_TOOL_CALL,
        "unknown_tool_lookup_stock": LOOKUP,
        "refusal": Reject.REFUSAL,
        "content_filter": Reject.REFUSAL,
        "length_truncated": Reject.TRUNCATED,
        "multiple_choices": Reject.MULTIPLE_CHOICES,
        "empty_message": Reject.EMPTY_OUTPUT,
        "unknown_shape_responses_api": Reject.UNKNOWN_SHAPE,
        "error_rate_limit": "provider_error:rate_limited",
        "error_invalid_api_key": "provider_error:auth_rejected",
        "error_server": "provider_error:server_error",
    },
    "anthropic": {
        "tool_use_read_equipment": READ,
        "tool_use_search_manual": SEARCH,
        "tool_use_propose_reservation": PROPOSE,
        "tool_use_reserve_part": RESERVE,
        "tool_use_ask_user": ASK,
        "tool_use_wait_for_event": WAIT,
        "tool_use_no_applicable_tool": ABSTAIN,
        "thinking_then_tool_use": READ,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "text_and_tool_use": Reject.MIXED_OUTPUT,
        "two_tool_use_effects": Reject.TWO_EFFECT_CALLS,
        "two_tool_use_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "input_not_object": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "tool_use_without_name": Reject.MALFORMED_TOOL_CALL,
        "unknown_tool_lookup_stock": LOOKUP,
        "refusal": Reject.REFUSAL,
        "max_tokens": Reject.TRUNCATED,
        "pause_turn": Reject.PROVIDER_EXECUTED_TOOL,
        "server_tool_use_web_search": Reject.PROVIDER_EXECUTED_TOOL,
        "unknown_block": Reject.UNKNOWN_SHAPE,
        "unknown_shape_openai_completion": Reject.UNKNOWN_SHAPE,
        "empty_content": Reject.EMPTY_OUTPUT,
        "error_overloaded": "provider_error:overloaded",
        "error_rate_limit": "provider_error:rate_limited",
        "error_authentication": "provider_error:auth_rejected",
        "error_api": "provider_error:server_error",
    },
}

# Rejection classes a provider's API cannot produce (so no fixture can record them).
NOT_PRODUCIBLE = {
    "openai": {Reject.PROVIDER_EXECUTED_TOOL},  # chat completions runs no server-side tools
    "anthropic": {Reject.MULTIPLE_CHOICES},  # the Messages API returns one message
}
PARSE = {"openai": openai_adapter.parse, "anthropic": anthropic_adapter.parse}


def load(vocabulary: str, name: str) -> Any:
    return json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())


CASES = [(v, name) for v, table in EXPECTED.items() for name in sorted(table)]


@pytest.mark.parametrize(("vocabulary", "name"), CASES, ids=[f"{v}/{n}" for v, n in CASES])
def test_it_maps_each_recorded_output_onto_one_proposal_or_a_typed_rejection(vocabulary, name):
    expected = EXPECTED[vocabulary][name]
    proposal = PARSE[vocabulary](load(vocabulary, name), KINDS)
    if isinstance(expected, str):
        assert isinstance(proposal, InvalidProposal), proposal
        assert proposal.reason_code == expected
        assert parsing.classify(proposal, KINDS) == expected
    else:
        assert proposal == expected
        expected_class = UNKNOWN_TOOL if expected is LOOKUP else ""
        assert parsing.classify(proposal, KINDS) == expected_class


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
def test_every_recorded_fixture_has_an_expectation_and_vice_versa(vocabulary):
    on_disk = {p.stem for p in (FIXTURES / vocabulary).glob("*.json")}
    assert on_disk == set(EXPECTED[vocabulary])


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
def test_every_rejection_class_has_a_recorded_fixture(vocabulary):
    classes = {e for e in EXPECTED[vocabulary].values() if isinstance(e, str)}
    wanted = {r.value for r in Reject} - {r.value for r in NOT_PRODUCIBLE[vocabulary]}
    assert wanted <= classes
    assert any(c.startswith("provider_error:") for c in classes)
    assert LOOKUP in EXPECTED[vocabulary].values()  # the unknown_tool class


def test_an_unknown_tool_is_classified_at_the_highest_effect_not_as_a_read():
    # lookup_stock *sounds* like a read; the adapter cannot know, so it is an ActionIntent
    # that must cross every validation step an effect would.
    proposal = openai_adapter.parse(load("openai", "unknown_tool_lookup_stock"), KINDS)
    assert isinstance(proposal, ActionIntent)
    assert parsing.classify(proposal, KINDS) == UNKNOWN_TOOL
    assert parsing.classify(READ, KINDS) == ""


def test_a_rejected_capability_name_is_an_unknown_tool_for_the_adapter():
    # run_sql is in the rejection log, not the catalog: the adapter still maps it onto an
    # ActionIntent; validation step 3 denies it as capability_rejected.
    raw = openai_adapter.render_call("run_sql", {"query": "DELETE FROM ledger"}, "c1")
    proposal = openai_adapter.parse(raw, KINDS)
    assert proposal == ActionIntent("run_sql", {"query": "DELETE FROM ledger"})


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ('{"part_id": "A17", "location_id": NaN}', "arguments are not valid JSON"),
        ('{"equipment_id": Infinity}', "arguments are not valid JSON"),
        ("null", "arguments are not a JSON object"),
        ('"EQ-17"', "arguments are not a JSON object"),
    ],
)
def test_it_rejects_arguments_a_decoder_would_have_to_interpret(arguments, detail):
    raw = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "x", "arguments": arguments}}
        ],
    }
    proposal = openai_adapter.parse(raw, KINDS)
    assert proposal == InvalidProposal("malformed_arguments", detail)


def test_it_rejects_non_finite_numbers_in_already_decoded_arguments():
    raw = anthropic_adapter.render_call("check_inventory", {"quantity": float("nan")}, "c")
    proposal = anthropic_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "malformed_arguments"


def test_control_arguments_must_be_text():
    raw = openai_adapter.render_call("ask_user", {"question": {"text": "which depot?"}}, "c")
    proposal = openai_adapter.parse(raw, KINDS)
    assert proposal == InvalidProposal("malformed_arguments", "ask_user takes text arguments only")


def test_whitespace_beside_a_tool_call_is_not_mixed_output():
    raw = openai_adapter.render_message(
        "\n  ", [("read_equipment", {"equipment_id": "EQ-17"}, "c")]
    )
    assert openai_adapter.parse(raw, KINDS) == READ


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ([], "unknown_shape"),
        ({"choices": "none"}, "unknown_shape"),
        ({"choices": []}, "empty_output"),
        ({"role": "user", "content": "hi"}, "unknown_shape"),
        ({"role": "assistant", "content": [{"type": "image_url"}]}, "unknown_shape"),
        ({"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, "model_refusal"),
        ({"role": "assistant", "content": 7}, "unknown_shape"),
        ({"role": "assistant", "content": None, "tool_calls": {"id": "c"}}, "unknown_shape"),
        ({"role": "assistant", "content": None, "tool_calls": ["call"]}, "malformed_tool_call"),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": 3}}],
                "function_call": {"name": "b", "arguments": "{}"},
            },
            "unknown_shape",
        ),
        ({"error": "boom"}, "provider_error:unclassified"),
    ],
)
def test_openai_shapes_it_does_not_recognise_are_typed_failures(raw, reason):
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("text", "unknown_shape"),
        ({"type": "message", "role": "user", "content": []}, "unknown_shape"),
        ({"type": "completion", "content": []}, "unknown_shape"),
        ({"type": "message", "content": "hello"}, "unknown_shape"),
        ({"type": "message", "content": ["hello"]}, "unknown_shape"),
        ({"type": "error", "error": {"type": "brand_new_error"}}, "provider_error:unclassified"),
    ],
)
def test_anthropic_shapes_it_does_not_recognise_are_typed_failures(raw, reason):
    proposal = anthropic_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == reason


@pytest.mark.parametrize("vocabulary", sorted(vocabularies.VOCABULARIES))
@pytest.mark.parametrize(
    "step",
    [
        double.Call("read_equipment", {"equipment_id": "EQ-17"}),
        double.Call("reserve_part", {"part_id": "A17", "slot_id": "S-N1-01", "quantity": 1}),
        double.Call("ask_user", {"question": "Which depot?"}),
        double.Call("wait_for_event", {"reason": "depot", "expected_event": "depot.confirmed"}),
        double.Call("no_applicable_tool", {"reason": "nothing applies"}),
        double.Call("lookup_stock", {"part_id": "A17"}),
        double.Final({"text": "done"}, ("ev-1",)),
        double.Mixed("text", double.Call("read_equipment", {"equipment_id": "EQ-17"})),
    ],
    ids=lambda s: type(s).__name__ + ":" + getattr(s, "name", ""),
)
def test_every_vocabulary_reads_back_what_the_double_renders_in_it(vocabulary, step):
    parsed = vocabularies.get(vocabulary).parse(double.render(step, vocabulary, "c_1"), KINDS)
    for other in vocabularies.VOCABULARIES:
        assert vocabularies.get(other).parse(double.render(step, other, "c_1"), KINDS) == parsed
    if isinstance(step, double.Call):
        assert not isinstance(parsed, InvalidProposal)
    else:
        assert isinstance(
            parsed, FinalCandidate if isinstance(step, double.Final) else InvalidProposal
        )


def test_the_anthropic_vocabulary_is_registered_with_its_own_adapter_version():
    vocab = vocabularies.get("anthropic")
    assert vocab.adapter_version == anthropic_adapter.VERSION
    assert vocab.adapter_version != vocabularies.get("openai").adapter_version
    with pytest.raises(ValueError, match="unknown provider vocabulary"):
        vocabularies.get("gemini")
