"""The provider adapters over provider outputs (tests/fixtures/provider_outputs).

Each fixture is one response body of one API: ``recorded_*`` files are real responses from
the public source named in the folder's ``sources.toml``, the others are constructed in
the provider's documented shape for FieldOps's own tools. Every one maps onto exactly one
local proposal or a typed rejection; every rejection class has at least one fixture in each
vocabulary whose API can produce it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import (
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    RejectionReason,
    WaitIntent,
    from_dict,
    to_dict,
)
from runs.policies import (
    anthropic_adapter,
    bedrock_adapter,
    gemini_adapter,
    limits,
    openai_adapter,
    openai_responses_adapter,
    parsing,
    provider_errors,
    vocabularies,
)
from runs.policies.parsing import UNKNOWN_TOOL, Reject
from sim import double

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "provider_outputs"
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
CHECK = ObserveIntent("check_inventory", {"part_id": "A17", "location_id": "LOC-N1"})
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


def unknown(name: str, args: dict[str, Any]) -> ActionIntent:
    """A real recorded call to the recording's own tool: unknown to FieldOps."""
    return ActionIntent(name, args)


def recorded_text(vocabulary: str, name: str) -> str:
    """The text blocks of a recorded Messages response, as the model wrote them."""
    raw = json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())
    return "".join(b["text"] for b in raw["content"] if b["type"] == "text")


def recorded_choice_text(vocabulary: str, name: str) -> str:
    """The message text of a recorded Chat Completions response (an answer is stripped)."""
    raw = json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())
    return str(raw["choices"][0]["message"]["content"]).strip()


def recorded_gemini_text(name: str) -> str:
    """The answer text (not the thoughts) of a recorded generateContent response."""
    raw = json.loads((FIXTURES / "gemini" / f"{name}.json").read_text())
    parts = raw["candidates"][0]["content"]["parts"]
    return "".join(p["text"] for p in parts if "text" in p and not p.get("thought")).strip()


def recorded_converse_text(name: str) -> str:
    """The text blocks of a recorded Converse response (an answer is stripped)."""
    raw = json.loads((FIXTURES / "bedrock-converse" / f"{name}.json").read_text())
    return "".join(b["text"] for b in raw["output"]["message"]["content"] if "text" in b).strip()


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
        # finish_reason tool_calls: the text is a preamble (commentary), the call proposes.
        "mixed_text_and_tool_call": READ,
        "preamble_one_call": READ,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "final_answer_with_tool_call": Reject.MIXED_OUTPUT,
        "parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "preamble_parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "parallel_two_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "malformed_arguments_truncated_json": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_duplicate_keys": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_not_object": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_empty_string": Reject.MALFORMED_ARGUMENTS,
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
        "unknown_finish_reason": Reject.UNKNOWN_SHAPE,
        "error_rate_limit": "provider_error:rate_limited",
        "error_invalid_api_key": "provider_error:auth_rejected",
        "error_server": "provider_error:server_error",
        # Recorded (see openai/sources.toml).
        "recorded_openai_tool_call": unknown("get_file", {}),
        "recorded_openai_parallel_tool_calls": Reject.TWO_EFFECT_CALLS,
        # OpenRouter -> Claude: preamble + one call without any `arguments`.
        "recorded_openrouter_claude_preamble_no_arguments": Reject.MALFORMED_ARGUMENTS,
        "recorded_openrouter_claude_length": Reject.TRUNCATED,
        # Gemini's compatible endpoint: an empty call id and extra_content.
        "recorded_gemini_compat_call_without_id": unknown("get_current_time", {}),
        # Mistral: calls without `type`, content "".
        "recorded_mistral_call_without_type": unknown("get_weather", {"city": "Paris"}),
        "recorded_deepseek_reasoning_preamble_one_call": unknown(
            "load_capability", {"id": "DICE_ROLL"}
        ),
        # Snowflake Cortex -> Claude: empty placeholder function_call, finish_reason "".
        "recorded_snowflake_claude_empty_placeholders": unknown(
            "get_weather", {"city": "Mexico City"}
        ),
        "recorded_error_model_not_found": "provider_error:client_error",
        # Mistral's reasoning models: content is a list of `thinking` and `text` parts.
        "recorded_mistral_thinking_parts_final": FinalCandidate({"text": "4"}),
        "recorded_mistral_magistral_thinking_final": FinalCandidate({"text": "2 + 2 = 4"}),
        # OpenRouter names the HTTP status as the error's integer `code`.
        "recorded_openrouter_error_status_code": "provider_error:rate_limited",
        # Snowflake -> Claude: a preamble beside one call with finish_reason "": no stated
        # finish reason, so the text is not commentary.
        "recorded_snowflake_claude_preamble_empty_finish": Reject.MIXED_OUTPUT,
        # From 2.2.0 (test_adapter_versions.py: 2.1.0 read them as answers).
        "final_json_duplicate_keys": Reject.MALFORMED_FINAL,
        "azure_content_filter_blocked": Reject.REFUSAL,
        # From 2.4.0 (test_adapter_versions.py: 2.3.0 and earlier read them otherwise).
        # Groq's compound system ran a web search server-side (message.executed_tools).
        "recorded_groq_compound_executed_tools": Reject.PROVIDER_EXECUTED_TOOL,
        # OpenRouter's server-side web search: url_citation annotations, a search counted.
        "recorded_openrouter_web_search_annotations": Reject.PROVIDER_EXECUTED_TOOL,
        # Azure On Your Data: the answer written from documents Azure retrieved itself.
        "azure_on_your_data_citations": Reject.PROVIDER_EXECUTED_TOOL,
        # OpenAI's search model answers from a search even when it cites nothing.
        "recorded_openai_search_preview_no_annotations": Reject.PROVIDER_EXECUTED_TOOL,
        # Ollama's /api/chat body: done_reason / done are its finish reason.
        "ollama_native_done_length": Reject.TRUNCATED,
        "ollama_native_not_done": Reject.TRUNCATED,
        "ollama_native_preamble_tool_call": READ,
        # Recorded Ollama /api/chat bodies: thinking beside a call with object arguments,
        # and Ollama's bare-string error body (no type or code to classify it by).
        "recorded_ollama_native_thinking_tool_call": unknown("add_two_numbers", {"a": 2, "b": 3}),
        "recorded_ollama_native_error_string": "provider_error:unclassified",
        # From 2.5.0 (test_adapter_versions.py: 2.4.0 and earlier read them otherwise).
        # Together's documented finish_reason eos (end of sequence) ends an answer.
        "recorded_together_eos_final": FinalCandidate(
            {"text": recorded_choice_text("openai", "recorded_together_eos_final")}
        ),
        # Azure filtered the completion: content_filter, and no message at all.
        "recorded_azure_content_filter_without_message": Reject.REFUSAL,
        # Azure refused the prompt: an error body with code content_filter.
        "recorded_azure_prompt_content_filter_error": Reject.REFUSAL,
        # Azure names the HTTP status as a string code ("404").
        "recorded_azure_error_string_status_code": "provider_error:client_error",
        # Compatible endpoints read as they should: Anthropic's, vLLM's, Together's.
        "recorded_anthropic_openai_compat_final": FinalCandidate({"text": "4200 + 42 = 4242"}),
        "recorded_vllm_length_empty_tool_calls": Reject.TRUNCATED,
        "recorded_together_tool_call": unknown("get_current_weather", {"city": "Paris"}),
        # OpenRouter -> Nebius: a choice without any finish_reason (none stated).
        # finish_reason null: a chunk's unfinished choice (from 2.7.0).
        "finish_reason_null_text": Reject.TRUNCATED,
        "recorded_openrouter_nebius_no_finish_reason": FinalCandidate(
            {"text": recorded_choice_text("openai", "recorded_openrouter_nebius_no_finish_reason")}
        ),
    },
    "openai-responses": {
        "function_call_read_equipment": READ,
        "function_call_search_manual": SEARCH,
        "function_call_propose_reservation": PROPOSE,
        "function_call_reserve_part": RESERVE,
        "function_call_ask_user": ASK,
        "function_call_wait_for_event": WAIT,
        "function_call_no_applicable_tool": ABSTAIN,
        "reasoning_then_function_call": READ,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "final_answer_with_function_call": Reject.MIXED_OUTPUT,
        "parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "parallel_two_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "malformed_arguments_empty_string": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_truncated_json": Reject.MALFORMED_ARGUMENTS,
        "malformed_arguments_duplicate_keys": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "function_call_without_name": Reject.MALFORMED_TOOL_CALL,
        "custom_tool_call": Reject.MALFORMED_TOOL_CALL,
        "unknown_tool_lookup_stock": LOOKUP,
        "refusal": Reject.REFUSAL,
        "incomplete_content_filter": Reject.REFUSAL,
        "incomplete_max_output_tokens": Reject.TRUNCATED,
        "function_call_programmatic_caller": Reject.PROVIDER_EXECUTED_TOOL,
        "empty_output": Reject.EMPTY_OUTPUT,
        "unknown_item": Reject.UNKNOWN_SHAPE,
        "unknown_shape_chat_completion": Reject.UNKNOWN_SHAPE,
        "failed_server_error": "provider_error:server_error",
        "error_rate_limit": "provider_error:rate_limited",
        "error_invalid_api_key": "provider_error:auth_rejected",
        # Recorded (see openai-responses/sources.toml).
        "recorded_function_call": unknown("get_user_country", {}),
        "recorded_parallel_function_calls": Reject.TWO_EFFECT_CALLS,
        "recorded_reasoning_commentary_function_call": unknown(
            "get_capital", {"country": "PotatoLand"}
        ),
        "recorded_final_answer_text": FinalCandidate(
            {"text": "The capital of PotatoLand is **Potato City**."}
        ),
        "recorded_web_search_call": Reject.PROVIDER_EXECUTED_TOOL,
        "recorded_background_queued": Reject.TRUNCATED,
        "recorded_deepseek_reasoning_function_call": unknown("get_temperature", {"city": "Tokyo"}),
        "recorded_error_model_not_found": "provider_error:client_error",
        # xAI's hosted X search (an `x_search_call` item) ran at the provider.
        "recorded_xai_x_search_call": Reject.PROVIDER_EXECUTED_TOOL,
        # A tool search the client is asked to run: a call, but not a function call.
        "recorded_tool_search_call_client_execution": Reject.MALFORMED_TOOL_CALL,
        # Azure's content_filters (none blocked) beside the answer.
        "recorded_azure_content_filters_final_answer": FinalCandidate({"text": "Paris"}),
        # From 1.2.0 (test_adapter_versions.py: 1.1.0 read them as answers).
        "final_json_duplicate_keys": Reject.MALFORMED_FINAL,
        "unknown_status": Reject.UNKNOWN_SHAPE,
        "azure_content_filters_blocked": Reject.REFUSAL,
        # From 1.3.0: OpenAI ran the shell in its container (hosted shell).
        "recorded_hosted_shell_call_output": Reject.PROVIDER_EXECUTED_TOOL,
        # A hosted file search (OpenAI searched a vector store) beside the answer.
        "recorded_file_search_call": Reject.PROVIDER_EXECUTED_TOOL,
        # The remote MCP tool: mcp_list_tools and an mcp_call OpenAI made itself.
        "recorded_mcp_call": Reject.PROVIDER_EXECUTED_TOOL,
        # A Responses-compatible API that searched without a search item: url_citations.
        "url_citation_without_search_item": Reject.PROVIDER_EXECUTED_TOOL,
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
        # stop_reason tool_use: the text (even one claiming success) is commentary.
        "text_and_tool_use": CHECK,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "final_answer_with_tool_use": Reject.MIXED_OUTPUT,
        "two_tool_use_effects": Reject.TWO_EFFECT_CALLS,
        "two_calls_one_malformed": Reject.TWO_EFFECT_CALLS,
        "two_tool_use_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "input_not_object": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "tool_use_without_name": Reject.MALFORMED_TOOL_CALL,
        "unknown_tool_lookup_stock": LOOKUP,
        "refusal": Reject.REFUSAL,
        "refusal_with_stop_details": Reject.REFUSAL,
        "refusal_null_stop_details": Reject.REFUSAL,
        "max_tokens": Reject.TRUNCATED,
        "pause_turn": Reject.PROVIDER_EXECUTED_TOOL,
        "server_tool_use_web_search": Reject.PROVIDER_EXECUTED_TOOL,
        "tool_use_called_by_code_execution": Reject.PROVIDER_EXECUTED_TOOL,
        "unknown_block": Reject.UNKNOWN_SHAPE,
        # stop_reason null: a stream's message, not finished (from 2.5.0).
        "stream_snapshot_null_stop_text": Reject.TRUNCATED,
        "stream_snapshot_null_stop_tool_use": Reject.TRUNCATED,
        "unknown_stop_reason": Reject.UNKNOWN_SHAPE,
        "unknown_shape_openai_completion": Reject.UNKNOWN_SHAPE,
        "empty_content": Reject.EMPTY_OUTPUT,
        "error_overloaded": "provider_error:overloaded",
        "error_rate_limit": "provider_error:rate_limited",
        "error_authentication": "provider_error:auth_rejected",
        "error_billing": "provider_error:client_error",
        "error_api": "provider_error:server_error",
        # Recorded (see anthropic/sources.toml).
        "recorded_preamble_one_call_empty_input": unknown("get_user_country", {}),
        "recorded_preamble_one_call_cookbook": unknown("calculator", {"num1": 4, "num2": 2}),
        "recorded_preamble_parallel_calls": Reject.TWO_EFFECT_CALLS,
        "recorded_thinking_text_then_call": unknown("get_customer_info", {"customer_id": "C1"}),
        "recorded_thinking_text_nested_input": unknown(
            "save_note",
            {
                "note": "Remember to buy milk and eggs.",
                "author": {"name": "John Doe", "email": "johndoe@gmail.com"},
                "is_public": False,
                "priority": 4,
            },
        ),
        "recorded_nested_input_caller_direct": unknown(
            "final_result",
            {"address": {"city": "London", "street": "12 Baker Street"}, "name": "Ada Lovelace"},
        ),
        "recorded_tool_use_stop_without_call": Reject.TRUNCATED,
        "recorded_error_not_found": "provider_error:client_error",
        # A `compaction` block (the provider's summary of earlier turns), then the answer.
        "recorded_compaction_then_text": FinalCandidate(
            {"text": recorded_text("anthropic", "recorded_compaction_then_text")}
        ),
        # A real pause_turn: the provider paused its own web searches.
        "recorded_pause_turn_web_search": Reject.PROVIDER_EXECUTED_TOOL,
        # The advisor server tool (another model answered at the provider).
        "recorded_advisor_tool_result": Reject.PROVIDER_EXECUTED_TOOL,
        # From 2.2.0 (test_adapter_versions.py: 2.1.0 read it as an answer).
        "final_json_duplicate_keys": Reject.MALFORMED_FINAL,
        # The tool search tool ran at the provider before the client's own call.
        "recorded_tool_search_then_call": Reject.PROVIDER_EXECUTED_TOOL,
        # The MCP connector: Anthropic called the remote MCP server itself.
        "recorded_mcp_connector_tool_use": Reject.PROVIDER_EXECUTED_TOOL,
        # Encrypted reasoning (redacted_thinking), then prose: a candidate validation judges.
        "recorded_redacted_thinking_then_text": FinalCandidate(
            {"text": recorded_text("anthropic", "recorded_redacted_thinking_then_text")}
        ),
    },
    "gemini": {
        "function_call_read_equipment": READ,
        "function_call_search_manual": SEARCH,
        "function_call_propose_reservation": PROPOSE,
        "function_call_reserve_part": RESERVE,
        "function_call_ask_user": ASK,
        "function_call_wait_for_event": WAIT,
        "function_call_no_applicable_tool": ABSTAIN,
        "unknown_tool_lookup_stock": LOOKUP,
        "thought_then_function_call": READ,
        # Gemini finishes a call STOP like an answer: text before the one call is a preamble.
        "preamble_one_call": CHECK,
        "text_after_function_call": Reject.MIXED_OUTPUT,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "final_json_duplicate_keys": Reject.MALFORMED_FINAL,
        "parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "parallel_two_reads": Reject.MULTIPLE_TOOL_CALLS,
        "multiple_candidates": Reject.MULTIPLE_CHOICES,
        "handoff": Reject.HANDOFF,
        "args_not_object": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "function_call_without_name": Reject.MALFORMED_TOOL_CALL,
        "malformed_function_call": Reject.MALFORMED_TOOL_CALL,
        "unexpected_tool_call": Reject.MALFORMED_TOOL_CALL,
        "recitation": Reject.REFUSAL,
        "stop_without_parts": Reject.EMPTY_OUTPUT,
        "unknown_finish_reason": Reject.UNKNOWN_SHAPE,
        "unknown_shape_anthropic_message": Reject.UNKNOWN_SHAPE,
        "function_response_part": Reject.UNKNOWN_SHAPE,
        "code_execution_parts": Reject.PROVIDER_EXECUTED_TOOL,
        "error_unauthenticated": "provider_error:auth_rejected",
        "error_overloaded": "provider_error:overloaded",
        "error_internal": "provider_error:server_error",
        # Recorded (see gemini/sources.toml).
        "recorded_function_call_thought_signature": unknown("get_capital", {"country": "France"}),
        "recorded_function_call_empty_args": unknown("bar", {}),
        # A streamed chunk without finishReason: the model had not stopped (from 1.3.0;
        # 1.2.0 read the call, whose args Vertex AI leaves out, as a call without arguments).
        "recorded_vertex_call_without_args": Reject.TRUNCATED,
        "stream_chunk_text_without_finish": Reject.TRUNCATED,
        "recorded_vertex_call_still_streaming": Reject.TRUNCATED,
        "recorded_parallel_function_calls": Reject.TWO_EFFECT_CALLS,
        "recorded_thought_then_text": FinalCandidate(
            {"text": recorded_gemini_text("recorded_thought_then_text")[: parsing.MAX_FINAL_TEXT]}
        ),
        "recorded_text_answer": FinalCandidate({"text": "Hello! How can I help you today?"}),
        "recorded_max_tokens": Reject.TRUNCATED,
        "recorded_max_tokens_thinking_no_parts": Reject.TRUNCATED,
        "recorded_safety_blocked": Reject.REFUSAL,
        "recorded_prompt_blocked_prohibited_content": Reject.REFUSAL,
        "recorded_vertex_model_armor_prompt_block": Reject.REFUSAL,
        "recorded_vertex_model_armor_finish": Reject.REFUSAL,
        "recorded_file_search_tool_call_response": Reject.PROVIDER_EXECUTED_TOOL,
        # Grounding with Google Search, and URL context: Google searched / fetched itself.
        "recorded_google_search_grounding": Reject.PROVIDER_EXECUTED_TOOL,
        "recorded_url_context_grounding": Reject.PROVIDER_EXECUTED_TOOL,
        "recorded_image_part": Reject.UNKNOWN_SHAPE,
        "recorded_error_invalid_argument": "provider_error:client_error",
        "recorded_error_quota_retry_info": "provider_error:rate_limited",
    },
    "bedrock-converse": {
        "tool_use_read_equipment": READ,
        "tool_use_search_manual": SEARCH,
        "tool_use_propose_reservation": PROPOSE,
        "tool_use_reserve_part": RESERVE,
        "tool_use_ask_user": ASK,
        "tool_use_wait_for_event": WAIT,
        "tool_use_no_applicable_tool": ABSTAIN,
        "unknown_tool_lookup_stock": LOOKUP,
        "reasoning_then_tool_use": READ,
        # stopReason tool_use: the text is a preamble (commentary), the call proposes.
        "preamble_one_call": CHECK,
        "final_answer_with_tool_use": Reject.MIXED_OUTPUT,
        "final_json": FINAL,
        "final_text": FINAL_TEXT,
        "citations_content_answer": FINAL_TEXT,
        "final_malformed": Reject.MALFORMED_FINAL,
        "final_json_duplicate_keys": Reject.MALFORMED_FINAL,
        "parallel_two_effects": Reject.TWO_EFFECT_CALLS,
        "parallel_two_reads": Reject.MULTIPLE_TOOL_CALLS,
        "handoff": Reject.HANDOFF,
        "input_not_object": Reject.MALFORMED_ARGUMENTS,
        "tool_use_without_input": Reject.MALFORMED_ARGUMENTS,
        "control_extra_field": Reject.MALFORMED_ARGUMENTS,
        "tool_use_without_name": Reject.MALFORMED_TOOL_CALL,
        "malformed_tool_use": Reject.MALFORMED_TOOL_CALL,
        "guardrail_intervened": Reject.REFUSAL,
        "content_filtered": Reject.REFUSAL,
        "model_context_window_exceeded": Reject.TRUNCATED,
        "tool_use_stop_without_call": Reject.TRUNCATED,
        "empty_content": Reject.EMPTY_OUTPUT,
        "malformed_model_output": Reject.UNKNOWN_SHAPE,
        "unknown_stop_reason": Reject.UNKNOWN_SHAPE,
        "unknown_shape_gemini_response": Reject.UNKNOWN_SHAPE,
        "image_block": Reject.UNKNOWN_SHAPE,
        "error_throttling_boto3": "provider_error:rate_limited",
        "error_access_denied_js_sdk": "provider_error:auth_rejected",
        "error_model_timeout_aws_json": "provider_error:timeout",
        # Recorded (see bedrock-converse/sources.toml).
        "recorded_nova_thinking_preamble_call": unknown("get_capital", {"country": "France"}),
        "recorded_claude_reasoning_preamble_call": unknown("get_user_country", {}),
        "recorded_kimi_reasoning_call": unknown("get_temperature", {"city": "London"}),
        "recorded_preamble_parallel_calls": Reject.TWO_EFFECT_CALLS,
        "recorded_reasoning_then_text": FinalCandidate(
            {"text": recorded_converse_text("recorded_reasoning_then_text")}
        ),
        "recorded_redacted_reasoning_then_text": FinalCandidate(
            {"text": recorded_converse_text("recorded_redacted_reasoning_then_text")}
        ),
        "recorded_deepseek_text_then_reasoning": FinalCandidate(
            {"text": recorded_converse_text("recorded_deepseek_text_then_reasoning")}
        ),
        "recorded_guardrail_no_action": FinalCandidate(
            {"text": recorded_converse_text("recorded_guardrail_no_action")}
        ),
        # Only reasoning, no answer: nothing to propose.
        "recorded_qwen_reasoning_only": Reject.EMPTY_OUTPUT,
        "recorded_max_tokens": Reject.TRUNCATED,
        "recorded_nova_code_interpreter": Reject.PROVIDER_EXECUTED_TOOL,
        # The bare HTTP body of a 400: its class was in a header.
        "recorded_error_invalid_model": "provider_error:unclassified",
    },
}

# Rejection classes a provider's API cannot produce (so no fixture can record them), and
# the two no API produces: limits are tested on generated outputs (no one publishes a
# 10,000-deep response), adapter_error is an adapter bug.
NOT_PRODUCIBLE = {
    # Chat Completions can: Groq's compound systems report the tools they ran server-side.
    "openai": set(),
    "openai-responses": {Reject.MULTIPLE_CHOICES},  # one response per request
    "anthropic": {Reject.MULTIPLE_CHOICES},  # the Messages API returns one message
    "gemini": set(),  # candidateCount > 1 gives several candidates
    "bedrock-converse": {Reject.MULTIPLE_CHOICES},  # Converse returns one message
}
GENERATED_ONLY = {Reject.LIMIT_EXCEEDED, Reject.ADAPTER_ERROR}
# Given by the runner's boundary after any adapter (test_hostile_model_output.py).
BOUNDARY_ONLY = {Reject.UNSTORABLE}
READ_ADAPTER = {v: vocabularies.get(v).read for v in EXPECTED}
# The cases the issue requires real recordings of, per vocabulary.
RECORDED_CASES = {
    "anthropic": {
        "preamble + one call": "recorded_preamble_one_call_empty_input",
        "preamble + parallel calls": "recorded_preamble_parallel_calls",
        "<thinking> text + call": "recorded_thinking_text_then_call",
        "call with empty input": "recorded_preamble_one_call_empty_input",
        "nested input with a caller field": "recorded_nested_input_caller_direct",
    },
    "openai": {
        "preamble through a compatible gateway": "recorded_openrouter_claude_preamble_no_arguments",
        "length truncation": "recorded_openrouter_claude_length",
        "Gemini compatible quirk": "recorded_gemini_compat_call_without_id",
        "Mistral compatible quirk": "recorded_mistral_call_without_type",
    },
    "gemini": {
        "function call": "recorded_function_call_thought_signature",
        "streamed chunk: call without args": "recorded_vertex_call_without_args",
        "thought + text": "recorded_thought_then_text",
        "parallel calls": "recorded_parallel_function_calls",
        "SAFETY finish": "recorded_safety_blocked",
        "prompt blocked": "recorded_prompt_blocked_prohibited_content",
        "MAX_TOKENS": "recorded_max_tokens",
        "error body": "recorded_error_quota_retry_info",
    },
    "bedrock-converse": {
        "preamble + one call": "recorded_nova_thinking_preamble_call",
        "reasoning + preamble + call": "recorded_claude_reasoning_preamble_call",
        "preamble + parallel calls": "recorded_preamble_parallel_calls",
        "reasoning + text": "recorded_reasoning_then_text",
        "max_tokens": "recorded_max_tokens",
        "server tool use": "recorded_nova_code_interpreter",
        "error body": "recorded_error_invalid_model",
    },
    "openai-responses": {
        "function call": "recorded_function_call",
        "text": "recorded_final_answer_text",
        "reasoning + commentary + call": "recorded_reasoning_commentary_function_call",
    },
}


def load(vocabulary: str, name: str) -> Any:
    return json.loads((FIXTURES / vocabulary / f"{name}.json").read_text())


def sources(vocabulary: str) -> dict[str, Any]:
    return tomllib.loads((FIXTURES / vocabulary / "sources.toml").read_text())


CASES = [(v, name) for v, table in EXPECTED.items() for name in sorted(table)]


@pytest.mark.parametrize(("vocabulary", "name"), CASES, ids=[f"{v}/{n}" for v, n in CASES])
def test_it_maps_each_provider_output_onto_one_proposal_or_a_typed_rejection(vocabulary, name):
    expected = EXPECTED[vocabulary][name]
    proposal = READ_ADAPTER[vocabulary](load(vocabulary, name), KINDS).proposal
    if isinstance(expected, str):
        assert isinstance(proposal, InvalidProposal), proposal
        assert proposal.reason_code == expected
        assert parsing.classify(proposal, KINDS) == expected
        # Typed, not only prose: the primary reason leads the list.
        assert proposal.reasons and proposal.reasons[0].code == expected
    else:
        assert proposal == expected
        in_catalog = not isinstance(expected, ActionIntent) or expected.capability in KINDS
        assert parsing.classify(proposal, KINDS) == ("" if in_catalog else UNKNOWN_TOOL)
    # The stored form round-trips, reasons included.
    assert from_dict(to_dict(proposal)) == proposal


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
def test_every_fixture_has_an_expectation_and_a_source(vocabulary):
    on_disk = {p.stem for p in (FIXTURES / vocabulary).glob("*.json")}
    assert on_disk == set(EXPECTED[vocabulary])
    listed = sources(vocabulary)
    assert set(listed) == on_disk
    for name, entry in listed.items():
        assert entry["origin"] in ("recorded", "constructed"), name
        # A file is called recorded exactly when it has a public source.
        assert name.startswith("recorded_") == (entry["origin"] == "recorded"), name
        if entry["origin"] == "recorded":
            assert entry["source"].startswith("github:"), name
            assert entry["endpoint"].startswith("https://"), name
        else:
            assert entry["shape"], name


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
def test_the_cases_the_issue_lists_are_real_recordings(vocabulary):
    listed = sources(vocabulary)
    for case, name in RECORDED_CASES[vocabulary].items():
        assert listed[name]["origin"] == "recorded", case


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
def test_every_rejection_class_has_a_fixture(vocabulary):
    classes = {e for e in EXPECTED[vocabulary].values() if isinstance(e, str)}
    wanted = {r.value for r in Reject} - {r.value for r in NOT_PRODUCIBLE[vocabulary]}
    wanted -= {r.value for r in GENERATED_ONLY | BOUNDARY_ONLY}
    assert wanted <= classes
    assert any(c.startswith("provider_error:") for c in classes)
    assert LOOKUP in EXPECTED[vocabulary].values()  # the unknown_tool class


# -- the preamble rule -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("vocabulary", "name", "text"),
    [
        ("anthropic", "recorded_preamble_one_call_empty_input", "I'll help find the largest city"),
        ("anthropic", "recorded_preamble_one_call_cookbook", "That's wonderful that you love"),
        ("anthropic", "recorded_thinking_text_then_call", "<thinking>The get_customer_info"),
        ("openai", "mixed_text_and_tool_call", "Reading the equipment now."),
        ("openai", "recorded_deepseek_reasoning_preamble_one_call", "Let me load the dice"),
        (
            "openai-responses",
            "recorded_reasoning_commentary_function_call",
            "I'll check the capital",
        ),
        ("gemini", "preamble_one_call", "I'll check the inventory for part A17"),
        ("bedrock-converse", "recorded_nova_thinking_preamble_call", "<thinking> To determine"),
        ("bedrock-converse", "recorded_claude_reasoning_preamble_call", "I'll need to check what"),
    ],
)
def test_text_before_one_call_in_a_turn_stopped_for_tool_use_is_commentary(vocabulary, name, text):
    reading = READ_ADAPTER[vocabulary](load(vocabulary, name), KINDS)
    assert not isinstance(reading.proposal, InvalidProposal)
    assert text in reading.commentary
    # Commentary is never part of what validation reads.
    assert text not in json.dumps(to_dict(reading.proposal))


@pytest.mark.parametrize(
    ("vocabulary", "name"),
    [
        ("openai", "final_answer_with_tool_call"),
        ("anthropic", "final_answer_with_tool_use"),
        ("openai-responses", "final_answer_with_function_call"),
        ("gemini", "text_after_function_call"),
        ("bedrock-converse", "final_answer_with_tool_use"),
    ],
)
def test_a_final_answer_with_a_call_stays_invalid(vocabulary, name):
    proposal = READ_ADAPTER[vocabulary](load(vocabulary, name), KINDS).proposal
    assert isinstance(proposal, InvalidProposal)
    assert [r.code for r in proposal.reasons] == ["mixed_output"]
    assert proposal.reasons[0].provider_stop in ("stop", "end_turn", "completed", "STOP")


def test_a_bare_message_without_a_finish_reason_is_not_a_preamble():
    message = {
        "role": "assistant",
        "content": "Done.",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "read_equipment", "arguments": "{}"},
            }
        ],
    }
    proposal = openai_adapter.parse(message, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "mixed_output"


# -- every reason, typed -----------------------------------------------------------------
def test_text_before_parallel_calls_reports_the_calls_not_mixed_output():
    proposal = anthropic_adapter.parse(load("anthropic", "recorded_preamble_parallel_calls"), KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert [r.code for r in proposal.reasons] == ["two_effect_calls"]
    assert proposal.reasons[0].detail == "get_weather, get_elevation"


def test_two_calls_where_one_is_malformed_name_both_problems():
    proposal = anthropic_adapter.parse(load("anthropic", "two_calls_one_malformed"), KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert [(r.code, r.call, r.tool) for r in proposal.reasons] == [
        ("two_effect_calls", None, ""),
        ("malformed_arguments", 1, "reserve_part"),
    ]
    assert "malformed_arguments@call 1 (reserve_part)" in proposal.detail


def test_a_final_answer_beside_malformed_parallel_calls_names_every_reason():
    raw = openai_adapter.render_message(
        "All done.",
        [("read_equipment", {"equipment_id": "EQ-17"}, "a"), ("ask_user", {"x": "y"}, "b")],
        parsing.Stop.ANSWER,
    )
    raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = ""
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert [(r.code, r.call) for r in proposal.reasons] == [
        ("mixed_output", None),
        ("multiple_tool_calls", None),
        ("malformed_arguments", 0),
        ("malformed_arguments", 1),
    ]


@pytest.mark.parametrize(
    ("name", "category", "explanation"),
    [
        ("refusal_with_stop_details", "cyber", "The request could enable cyber harm."),
        ("refusal_null_stop_details", "", ""),
        ("refusal", "", ""),
    ],
)
def test_an_anthropic_refusal_carries_its_stop_details_as_fields(name, category, explanation):
    proposal = anthropic_adapter.parse(load("anthropic", name), KINDS)
    assert isinstance(proposal, InvalidProposal)
    (reason,) = proposal.reasons
    assert (reason.code, reason.category, reason.explanation) == (
        "model_refusal",
        category,
        explanation,
    )
    assert reason.provider_stop == "refusal"
    assert reason.detail  # the explanation, the model's text, or "the model declined"


def test_an_openai_refusal_text_is_its_explanation():
    proposal = openai_adapter.parse(load("openai", "refusal"), KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reasons[0].explanation == proposal.reasons[0].detail != ""
    filtered = openai_adapter.parse(load("openai", "content_filter"), KINDS)
    assert isinstance(filtered, InvalidProposal)
    assert filtered.reasons[0].category == "content_filter"


# -- arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        ('{"part_id": "A17", "location_id": NaN}', "arguments are not valid JSON"),
        ('{"equipment_id": Infinity}', "arguments are not valid JSON"),
        ("null", "arguments are not a JSON object"),
        ('"EQ-17"', "arguments are not a JSON object"),
        ("", "arguments are empty, not a JSON object"),
        ("  \n", "arguments are empty, not a JSON object"),
        (None, "the call has no arguments"),
        ("1" * 5000, "arguments are not valid JSON"),
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
    assert isinstance(proposal, InvalidProposal)
    assert [(r.code, r.detail, r.call, r.tool) for r in proposal.reasons] == [
        ("malformed_arguments", detail, 0, "x")
    ]


def test_empty_string_arguments_are_never_read_as_an_empty_object():
    proposal = openai_adapter.parse(load("openai", "malformed_arguments_empty_string"), KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "malformed_arguments"
    assert proposal.reasons[0].tool == "read_equipment"


def test_it_rejects_non_finite_numbers_in_already_decoded_arguments():
    raw = anthropic_adapter.render_call("check_inventory", {"quantity": float("nan")}, "c")
    proposal = anthropic_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "malformed_arguments"


def test_control_arguments_must_be_text():
    raw = openai_adapter.render_call("ask_user", {"question": {"text": "which depot?"}}, "c")
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert (proposal.reason_code, proposal.detail) == (
        "malformed_arguments",
        "ask_user takes text arguments only",
    )


def test_whitespace_beside_a_tool_call_is_not_mixed_output():
    raw = openai_adapter.render_message(
        "\n  ", [("read_equipment", {"equipment_id": "EQ-17"}, "c")], parsing.Stop.ANSWER
    )
    assert openai_adapter.parse(raw, KINDS) == READ


def test_a_namespaced_responses_call_is_never_matched_by_its_short_name():
    raw = openai_responses_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    raw["output"][0]["namespace"] = "crm"
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert proposal == ActionIntent("crm.read_equipment", {"equipment_id": "EQ-17"})
    assert parsing.classify(proposal, KINDS) == UNKNOWN_TOOL


# -- limits before parsing ---------------------------------------------------------------
def nested(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth):
        value = {"a": [value]}
    return value


@pytest.mark.parametrize("vocabulary", sorted(EXPECTED))
@pytest.mark.parametrize("depth", [400, 5000])
def test_deeply_nested_arguments_are_a_typed_limit_rejection(vocabulary, depth):
    # As decoded arguments (Anthropic input, Gemini args, Converse input) and as argument
    # text (the OpenAI APIs).
    args = nested(depth)
    raw = vocabularies.get(vocabulary).call("check_inventory", {"part_id": "A17"}, "c")
    if vocabulary == "anthropic":
        raw["content"][0]["input"] = args
    elif vocabulary == "gemini":
        raw["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] = {"deep": args}
    elif vocabulary == "bedrock-converse":
        raw["output"]["message"]["content"][0]["toolUse"]["input"] = {"deep": args}
    elif vocabulary == "openai":
        fn = raw["choices"][0]["message"]["tool_calls"][0]["function"]
        fn["arguments"] = '{"a": ' * depth + "1" + "}" * depth
    else:
        raw["output"][0]["arguments"] = "[" * depth + "]" * depth
    proposal = vocabularies.get(vocabulary).parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    reason = proposal.reasons[0]
    assert (reason.code, reason.limit) == ("output_limit_exceeded", "depth")
    assert reason.measured is not None and reason.maximum is not None
    assert reason.measured > reason.maximum


def test_a_deep_output_is_rejected_before_it_is_read_anywhere():
    proposal = anthropic_adapter.parse(nested(100_000), KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reasons[0].limit == "depth"


def test_size_and_count_limits_are_typed_too():
    wide = anthropic_adapter.render_call("check_inventory", {"part_id": "A17"}, "c")
    wide["content"][0]["input"] = {"blob": ["x"] * (limits.MAX_NODES + 1)}
    proposal = anthropic_adapter.parse(wide, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reasons[0].limit == "values"
    big = anthropic_adapter.render_call("check_inventory", {"part_id": "A17"}, "c")
    big["content"][0]["input"] = {"blob": "x" * (limits.MAX_BYTES + 1)}
    assert anthropic_adapter.parse(big, KINDS).reasons[0].limit == "bytes"  # type: ignore[union-attr]
    many = openai_adapter.render_message(
        "", [("read_equipment", {"equipment_id": "EQ-17"}, f"c{i}") for i in range(40)]
    )
    proposal = openai_adapter.parse(many, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert (proposal.reasons[0].limit, proposal.reasons[0].measured) == ("calls", 40)


def test_long_argument_text_is_rejected_before_decoding():
    raw = openai_adapter.render_call("check_inventory", {"part_id": "A17"}, "c")
    fn = raw["choices"][0]["message"]["tool_calls"][0]["function"]
    fn["arguments"] = json.dumps({"part_id": "x" * (limits.MAX_ARGUMENT_BYTES + 10)})
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert (proposal.reasons[0].limit, proposal.reasons[0].tool) == ("bytes", "check_inventory")


def test_the_bounded_copy_of_any_output_is_serialisable_and_bounded():
    deep = nested(50_000)
    copy, cut = limits.bounded(deep)
    assert cut
    text = json.dumps(copy)  # would raise RecursionError on the original
    assert limits.MARKER in text
    assert limits.measure(copy).depth <= limits.STORED_DEPTH + 2
    odd, cut = limits.bounded({1: float("nan"), "s": "y" * 70_000, "o": object()})
    assert cut and odd["1"] == "nan" and odd["o"] == "<object>"
    assert len(odd["s"]) < 70_000
    plain = {"a": [1, 2, {"b": None}], "c": "d"}
    assert limits.bounded(plain) == (plain, False)


# -- vocabularies ------------------------------------------------------------------------
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


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("text", "unknown_shape"),
        ({"object": "response"}, "unknown_shape"),
        ({"object": "response", "output": "x"}, "unknown_shape"),
        ({"object": "response", "output": [{"type": "message", "content": "hi"}]}, "unknown_shape"),
        (
            {"object": "response", "output": [{"type": "message", "role": "user", "content": []}]},
            "unknown_shape",
        ),
        ({"object": "response", "status": "in_progress", "output": []}, "truncated_output"),
        ({"object": "response", "status": "failed", "output": []}, "provider_error:unclassified"),
    ],
)
def test_responses_shapes_it_does_not_recognise_are_typed_failures(raw, reason):
    proposal = openai_responses_adapter.parse(raw, KINDS)
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
        double.Preamble("narration", double.Call("read_equipment", {"equipment_id": "EQ-17"})),
    ],
    ids=lambda s: type(s).__name__ + ":" + getattr(s, "name", ""),
)
def test_every_vocabulary_reads_back_what_the_double_renders_in_it(vocabulary, step):
    reading = vocabularies.get(vocabulary).read(double.render(step, vocabulary, "c_1"), KINDS)
    for other in vocabularies.VOCABULARIES:
        again = vocabularies.get(other).read(double.render(step, other, "c_1"), KINDS)
        assert _local(again.proposal) == _local(reading.proposal), other
        assert again.commentary == reading.commentary
    parsed = reading.proposal
    if isinstance(step, (double.Call, double.Preamble)):
        assert not isinstance(parsed, InvalidProposal)
    else:
        assert isinstance(
            parsed, FinalCandidate if isinstance(step, double.Final) else InvalidProposal
        )
    assert reading.commentary == ("narration" if isinstance(step, double.Preamble) else "")


def _local(proposal: Any) -> Any:
    """A proposal without the provider's own stop word (the one vocabulary-specific field)."""
    if isinstance(proposal, InvalidProposal):
        return (
            proposal.reason_code,
            [RejectionReason(r.code, r.detail, r.call, r.tool) for r in proposal.reasons],
        )
    return proposal


def test_each_vocabulary_is_registered_with_its_own_adapter_version():
    versions = {v.adapter_version for v in vocabularies.VOCABULARIES.values()}
    assert len(versions) == len(vocabularies.VOCABULARIES) == 5
    assert vocabularies.get("openai-responses").adapter_version == openai_responses_adapter.VERSION
    assert vocabularies.get("gemini").adapter_version == gemini_adapter.VERSION
    assert vocabularies.get("bedrock-converse").adapter_version == bedrock_adapter.VERSION
    with pytest.raises(ValueError, match="unknown provider vocabulary"):
        vocabularies.get("cohere")


# -- recorded shapes found in other public recordings ------------------------------------
@pytest.mark.parametrize(
    ("name", "thinking"),
    [
        ("recorded_mistral_thinking_parts_final", "The user is asking for the result of 2+2."),
        ("recorded_mistral_magistral_thinking_final", "This is basic arithmetic."),
    ],
)
def test_mistral_thinking_parts_are_declared_reasoning_not_the_answer(name, thinking):
    reading = openai_adapter.read(load("openai", name), KINDS)
    assert isinstance(reading.proposal, FinalCandidate)
    assert thinking in reading.commentary
    assert thinking not in json.dumps(to_dict(reading.proposal))


def test_a_thinking_part_that_is_not_text_parts_is_an_unknown_shape():
    raw = load("openai", "recorded_mistral_thinking_parts_final")
    raw["choices"][0]["message"]["content"][0]["thinking"] = {"text": "2+2"}
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "unknown_shape"


def test_a_thinking_part_before_a_call_is_commentary_and_the_call_proposes():
    raw = openai_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    message = raw["choices"][0]["message"]
    message["content"] = [{"type": "thinking", "thinking": [{"type": "text", "text": "EQ-17?"}]}]
    reading = openai_adapter.read(raw, KINDS)
    assert reading.proposal == READ
    assert reading.commentary == "EQ-17?"


def test_an_anthropic_compaction_block_is_neither_the_answer_nor_an_unknown_shape():
    reading = anthropic_adapter.read(load("anthropic", "recorded_compaction_then_text"), KINDS)
    assert isinstance(reading.proposal, FinalCandidate)
    # The provider's summary of earlier turns is not what the model answered.
    assert "Summary of Conversation" not in json.dumps(to_dict(reading.proposal))


def test_a_compaction_block_beside_a_call_does_not_hide_the_call():
    raw = anthropic_adapter.render_call("read_equipment", {"equipment_id": "EQ-17"}, "c")
    raw["content"].insert(0, {"type": "compaction", "content": "## Summary"})
    assert anthropic_adapter.parse(raw, KINDS) == READ


def test_hosted_search_items_of_compatible_responses_apis_are_provider_executed():
    proposal = openai_responses_adapter.parse(
        load("openai-responses", "recorded_xai_x_search_call"), KINDS
    )
    assert isinstance(proposal, InvalidProposal)
    assert [(r.code, r.detail) for r in proposal.reasons] == [
        ("provider_executed_tool", "x_search_call")
    ]


def test_a_tool_search_the_client_must_run_is_not_called_provider_executed():
    raw = load("openai-responses", "recorded_tool_search_call_client_execution")
    proposal = openai_responses_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert [(r.code, r.detail) for r in proposal.reasons] == [
        ("malformed_tool_call", "unsupported call type 'tool_search_call'")
    ]
    # A hosted tool search (execution "server", or not stated) stays provider-executed.
    raw["output"][0]["execution"] = "server"
    hosted = openai_responses_adapter.parse(raw, KINDS)
    assert isinstance(hosted, InvalidProposal)
    assert hosted.reason_code == "provider_executed_tool"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (429, "rate_limited"),
        (401, "auth_rejected"),
        (400, "client_error"),
        (502, "server_error"),
        (529, "overloaded"),
        (200, "unclassified"),
        (True, "unclassified"),
    ],
)
def test_an_integer_error_code_is_read_as_the_http_status_it_names(code, expected):
    assert provider_errors.from_body({"code": code, "message": "Provider returned error"}) == (
        expected
    )


@pytest.mark.parametrize(
    ("content", "error", "expected"),
    [
        # OpenRouter: a 200 whose choice failed part way, with the text produced before it.
        ('{"events": [{"title": "partial', {"code": 502, "message": "upstream"}, "server_error"),
        ("", {"code": 429, "message": "rate-limited upstream"}, "rate_limited"),
        ("Sure, the part is", None, "unclassified"),
    ],
)
def test_a_choice_that_finished_with_an_error_is_a_provider_error_not_an_answer(
    content, error, expected
):
    raw = load("openai", "recorded_openrouter_claude_length")
    choice = raw["choices"][0]
    choice["message"]["content"] = content
    choice["finish_reason"] = "error"
    if error is not None:
        choice["error"] = error
    proposal = openai_adapter.parse(raw, KINDS)
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == f"provider_error:{expected}"
