"""What the Gemini and Bedrock Converse adapters read that the other vocabularies do not:
Gemini's call-without-a-tool-use-finish, its thoughts, finish and block reasons, Google
error bodies; Converse's reasoning blocks, guardrails, server tools and the AWS error
shapes. The fixture-driven expectations are in test_adapters.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import (
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    to_dict,
)
from runs.policies import bedrock_adapter, gemini_adapter, provider_errors
from runs.policies.parsing import Reject, Stop

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}
READ = ObserveIntent("read_equipment", {"equipment_id": "EQ-17"})


def load(vocabulary: str, name: str) -> Any:
    return json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())


def reasons(proposal: Any) -> list[str]:
    assert isinstance(proposal, InvalidProposal), proposal
    return [r.code for r in proposal.reasons]


# -- Gemini --------------------------------------------------------------------------------
def test_a_gemini_thought_is_commentary_and_never_the_answer():
    raw = load("gemini", "recorded_thought_then_text")
    reading = gemini_adapter.read(raw, KINDS)
    thought = raw["candidates"][0]["content"]["parts"][0]["text"]
    assert isinstance(reading.proposal, FinalCandidate)
    assert reading.commentary.startswith("**A Safe Street-Crossing Guide")
    assert thought[:200] not in json.dumps(to_dict(reading.proposal))
    assert reading.proposal.artifact["text"].startswith("Crossing the street safely")


def test_gemini_text_before_the_one_call_is_a_preamble_and_after_it_an_answer_beside_it():
    before = gemini_adapter.render_message(
        "Reading the equipment now.", [("read_equipment", {"equipment_id": "EQ-17"}, "c")]
    )
    reading = gemini_adapter.read(before, KINDS)
    assert (reading.proposal, reading.commentary) == (READ, "Reading the equipment now.")
    after = gemini_adapter.render_message(
        "Done.", [("read_equipment", {"equipment_id": "EQ-17"}, "c")], Stop.ANSWER
    )
    parts = after["candidates"][0]["content"]["parts"]
    assert list(parts[0]) == ["functionCall"] and parts[1] == {"text": "Done."}
    assert reasons(gemini_adapter.parse(after, KINDS)) == ["mixed_output"]


def test_a_gemini_call_without_args_is_a_call_without_arguments_but_other_args_are_not():
    raw = gemini_adapter.render_call("read_equipment", {}, "c")
    call = raw["candidates"][0]["content"]["parts"][0]["functionCall"]
    del call["args"]
    assert gemini_adapter.parse(raw, KINDS) == ObserveIntent("read_equipment", {})
    for args in ("EQ-17", ["EQ-17"], 17):
        call["args"] = args
        assert reasons(gemini_adapter.parse(raw, KINDS)) == ["malformed_arguments"]


def test_a_gemini_call_still_streaming_is_truncated_not_a_call():
    raw = load("gemini", "recorded_vertex_call_still_streaming")
    # The recorded chunk states no finishReason: the candidate is not finished (1.3.0).
    assert reasons(gemini_adapter.parse(raw, KINDS)) == ["truncated_output"]
    # The call says so itself (willContinue), whatever the candidate's finishReason says.
    raw["candidates"][0]["finishReason"] = "STOP"
    proposal = gemini_adapter.parse(raw, KINDS)
    assert reasons(proposal) == ["truncated_output"]
    assert proposal.reasons[0].tool == "read_screen"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "category", "explanation"),
    [
        ("recorded_safety_blocked", "SAFETY", "HARM_CATEGORY_HATE_SPEECH"),
        ("recorded_vertex_model_armor_finish", "MODEL_ARMOR", "The response violated"),
        ("recorded_prompt_blocked_prohibited_content", "PROHIBITED_CONTENT", ""),
        ("recorded_vertex_model_armor_prompt_block", "MODEL_ARMOR", "The prompt violated"),
    ],
)
def test_a_gemini_filter_is_a_refusal_that_names_its_reason(name, category, explanation):
    proposal = gemini_adapter.parse(load("gemini", name), KINDS)
    assert reasons(proposal) == ["model_refusal"]
    reason = proposal.reasons[0]  # type: ignore[union-attr]
    assert reason.category == category
    assert reason.explanation.startswith(explanation)
    assert reason.detail


def test_a_gemini_malformed_function_call_keeps_the_providers_message():
    proposal = gemini_adapter.parse(load("gemini", "malformed_function_call"), KINDS)
    assert reasons(proposal) == ["malformed_tool_call"]
    assert proposal.detail.startswith("Malformed function call: print(default_api")  # type: ignore[union-attr]
    assert proposal.reasons[0].provider_stop == "MALFORMED_FUNCTION_CALL"  # type: ignore[union-attr]


def test_a_part_with_two_kinds_of_data_is_an_unknown_shape_not_a_guess():
    raw = gemini_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    raw["candidates"][0]["content"]["parts"][0]["text"] = "Done."
    assert reasons(gemini_adapter.parse(raw, KINDS)) == ["unknown_shape"]


def test_a_content_that_is_not_the_models_is_an_unknown_shape():
    raw = gemini_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    raw["candidates"][0]["content"]["role"] = "user"
    assert reasons(gemini_adapter.parse(raw, KINDS)) == ["unknown_shape"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # A bad key is a 400 INVALID_ARGUMENT whose ErrorInfo says why.
        (
            {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "details": [{"reason": "API_KEY_INVALID"}],
            },
            "auth_rejected",
        ),
        ({"code": 400, "status": "INVALID_ARGUMENT"}, "client_error"),
        ({"code": 429, "status": "RESOURCE_EXHAUSTED"}, "rate_limited"),
        ({"code": 403, "status": "PERMISSION_DENIED"}, "auth_rejected"),
        ({"code": 503, "status": "UNAVAILABLE"}, "overloaded"),
        ({"code": 504, "status": "DEADLINE_EXCEEDED"}, "timeout"),
        ({"code": 500}, "server_error"),
        ({"message": "no code, no status"}, "unclassified"),
    ],
)
def test_a_google_error_body_is_classified_by_reason_then_status_then_code(error, expected):
    assert provider_errors.from_google_error(error) == expected
    proposal = gemini_adapter.parse({"error": error}, KINDS)
    assert reasons(proposal) == [f"provider_error:{expected}"]


def test_a_failed_vertex_stream_error_list_is_a_provider_error_and_other_lists_say_what_they_are():
    body = [
        {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}
    ]
    assert reasons(gemini_adapter.parse(body, KINDS)) == ["provider_error:rate_limited"]
    chunks = [gemini_adapter.render_text("Hel"), gemini_adapter.render_text("lo")]
    proposal = gemini_adapter.parse(chunks, KINDS)
    assert reasons(proposal) == ["unknown_shape"]
    assert "streamGenerateContent" in proposal.detail  # type: ignore[union-attr]


# -- Bedrock Converse ----------------------------------------------------------------------
def test_converse_reasoning_is_commentary_and_redacted_reasoning_is_not_kept_as_text():
    reading = bedrock_adapter.read(load("bedrock-converse", "recorded_reasoning_then_text"), KINDS)
    assert isinstance(reading.proposal, FinalCandidate)
    assert reading.commentary.startswith("This is a straightforward question")
    assert reading.commentary not in json.dumps(to_dict(reading.proposal))
    redacted = bedrock_adapter.read(
        load("bedrock-converse", "recorded_redacted_reasoning_then_text"), KINDS
    )
    assert isinstance(redacted.proposal, FinalCandidate)
    assert redacted.commentary == ""


def test_a_converse_guardrail_is_a_refusal_with_the_text_bedrock_put_in_the_answers_place():
    proposal = bedrock_adapter.parse(load("bedrock-converse", "guardrail_intervened"), KINDS)
    assert reasons(proposal) == ["model_refusal"]
    reason = proposal.reasons[0]  # type: ignore[union-attr]
    assert (reason.category, reason.provider_stop) == (
        "guardrail_intervened",
        "guardrail_intervened",
    )
    assert reason.explanation == "Sorry, the model cannot answer this question."


def test_a_converse_server_tool_use_is_provider_executed_even_beside_a_client_call():
    raw = load("bedrock-converse", "recorded_nova_code_interpreter")
    proposal = bedrock_adapter.parse(raw, KINDS)
    assert reasons(proposal) == ["provider_executed_tool"]
    assert proposal.detail == "toolResult, toolUse (server_tool_use)"  # type: ignore[union-attr]


def test_a_boto3_success_response_is_read_not_taken_for_an_error():
    raw = bedrock_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    raw["ResponseMetadata"] = {"RequestId": "r-1", "HTTPStatusCode": 200, "RetryAttempts": 0}
    raw["$metadata"] = {"httpStatusCode": 200}
    assert bedrock_adapter.parse(raw, KINDS) == READ


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {
                "Error": {"Code": "ValidationException", "Message": "bad"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "client_error",
        ),
        # An unknown code falls back to the HTTP status.
        (
            {
                "Error": {"Code": "SomethingNewException", "Message": "?"},
                "ResponseMetadata": {"HTTPStatusCode": 429},
            },
            "rate_limited",
        ),
        (
            {"__type": "com.amazon.coral#ServiceUnavailableException", "message": "busy"},
            "overloaded",
        ),
        (
            {"__type": "ThrottlingException:http://internal.amazon.com/coral/", "message": "x"},
            "rate_limited",
        ),
        (
            {
                "name": "ModelNotReadyException",
                "$metadata": {"httpStatusCode": 429},
                "message": "The model is not ready",
            },
            "overloaded",
        ),
        ({"message": "The provided model identifier is invalid."}, "unclassified"),
    ],
)
def test_each_aws_error_shape_is_a_classified_provider_error(raw, expected):
    proposal = bedrock_adapter.parse(raw, KINDS)
    assert reasons(proposal) == [f"provider_error:{expected}"]
    assert proposal.detail  # type: ignore[union-attr]


def test_a_converse_tool_use_without_input_is_not_read_as_empty_arguments():
    raw = bedrock_adapter.render_call("read_equipment", {}, "c")
    del raw["output"]["message"]["content"][0]["toolUse"]["input"]
    assert reasons(bedrock_adapter.parse(raw, KINDS)) == ["malformed_arguments"]


@pytest.mark.parametrize("vocabulary", ["gemini", "bedrock-converse"])
def test_every_fixture_of_the_other_vocabularies_is_a_typed_reading_here(vocabulary):
    # Recordings brought to the wrong adapter: never a crash, never a call.
    read = gemini_adapter.read if vocabulary == "gemini" else bedrock_adapter.read
    for path in sorted(FIXTURES.glob("*/*.json")):
        if path.parent.name == vocabulary or path.stem == "unknown_shape_gemini_response":
            continue  # its own fixtures, and the Gemini body kept to be wrong for Converse
        reading = read(json.loads(path.read_text()), KINDS)
        proposal = reading.proposal
        assert isinstance(proposal, InvalidProposal), path
        assert proposal.reason_code != Reject.ADAPTER_ERROR, path
