"""The model clients (the official ``openai`` and ``anthropic`` SDKs) against a local HTTP
server on 127.0.0.1 that replays recorded wire responses of each API.

Every answer is kept verbatim and read by its vocabulary's adapter; every failure maps to a
stable local class; the SDK's retries are bounded and one call is one turn however many
attempts it took; the API key never leaves the SDK.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import logging
import socket
import time
import tracemalloc
import zlib
from typing import Any

import httpx2
import pytest
from django.test import override_settings

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import ActionIntent, InvalidProposal
from runs.engine import context, runner
from runs.models import Event, Evidence, Run
from runs.policies import model_client, policy_for, provider_errors, vocabularies
from runs.policies.model_client import APIS, ModelClientPolicy, ModelConfig
from runs.services import RunInputError
from sim import double
from tests.helpers import approve, make_run
from tests.runs.policies.replay_server import ReplayServer, Reply, fixture, serve

KEY = "sk-test-fieldops-0123456789abcdef"
KINDS = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}
API_NAMES = sorted(APIS)
PROJECTION = {
    "version": "context-projection@2",
    "objective": "reserve the seal kit for EQ-17",
    "turn": 1,
    "observations": [],
    "capabilities": [
        {
            "name": "read_equipment",
            "description": "Read one equipment record.",
            "input_schema": {
                "type": "object",
                "properties": {"equipment_id": {"type": "string"}},
                "required": ["equipment_id"],
            },
        }
    ],
}
# Recorded answers per API (tests/fixtures/provider_outputs/*/sources.toml).
TOOL_CALL = {
    "openai-chat": ("openai", "recorded_mistral_call_without_type"),
    "openai-responses": ("openai-responses", "recorded_reasoning_commentary_function_call"),
    "anthropic-messages": ("anthropic", "recorded_preamble_one_call_empty_input"),
}
TEXT = {
    "openai-chat": ("openai", "final_text"),
    "openai-responses": ("openai-responses", "recorded_final_answer_text"),
    "anthropic-messages": ("anthropic", "final_text"),
}
REFUSAL = {
    "openai-chat": ("openai", "refusal"),
    "openai-responses": ("openai-responses", "refusal"),
    "anthropic-messages": ("anthropic", "refusal_with_stop_details"),
}
RATE_LIMIT = {
    "openai-chat": ("openai", "error_rate_limit"),
    "openai-responses": ("openai-responses", "error_rate_limit"),
    "anthropic-messages": ("anthropic", "error_rate_limit"),
}
SERVER_ERROR = {
    "openai-chat": ("openai", "error_server"),
    "openai-responses": ("openai", "error_server"),
    "anthropic-messages": ("anthropic", "error_api"),
}
NOT_FOUND = {
    "openai-chat": ("openai", "recorded_error_model_not_found", 404),
    "openai-responses": ("openai-responses", "recorded_error_model_not_found", 400),
    "anthropic-messages": ("anthropic", "recorded_error_not_found", 404),
}


def config(server: ReplayServer, **kw: Any) -> ModelConfig:
    values: dict[str, Any] = {
        "api": server.api,
        "base_url": server.base_url,
        "model": "replayed-model",
        "api_key": KEY,
        "timeout_seconds": 5.0,
        "max_retries": 0,
    }
    values.update(kw)
    return ModelConfig(**values)


def ask(server: ReplayServer, **kw: Any) -> Any:
    return ModelClientPolicy(config(server, **kw)).decide(PROJECTION)


def read(api: str, raw: Any) -> Any:
    return vocabularies.get(APIS[api]).read(raw, KINDS)


# -- answers -------------------------------------------------------------------------------
@pytest.mark.parametrize("api", API_NAMES)
def test_a_recorded_tool_call_comes_back_verbatim_and_parses(api):
    body = fixture(*TOOL_CALL[api])
    with serve(ReplayServer(api, [Reply(200, body)])) as server:
        output = ask(server)
    assert output.error == ""
    assert output.raw == body  # the provider's bytes, not a re-serialisation
    assert output.provider == APIS[api]
    assert output.usage["attempts"] == 1
    (request,) = server.received
    assert (
        request.path
        == {
            "openai-chat": "/v1/chat/completions",
            "openai-responses": "/v1/responses",
            "anthropic-messages": "/v1/messages",
        }[api]
    )
    reading = read(api, output.raw)
    assert isinstance(reading.proposal, ActionIntent)


@pytest.mark.parametrize("api", API_NAMES)
def test_each_request_is_the_projection_and_the_tools_never_a_history(api):
    with serve(ReplayServer(api, [Reply(200, fixture(*TEXT[api]))])) as server:
        ask(server)
    body = server.received[0].body
    state = {k: v for k, v in PROJECTION.items() if k != "capabilities"}
    if api == "openai-chat":
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert json.loads(body["messages"][1]["content"]) == state
        assert [t["function"]["name"] for t in body["tools"]] == ["read_equipment"]
        assert body["parallel_tool_calls"] is False
    elif api == "openai-responses":
        assert body["instructions"] == model_client.SYSTEM_PROMPT
        assert json.loads(body["input"][0]["content"]) == state
        assert [t["name"] for t in body["tools"]] == ["read_equipment"]
        assert (body["store"], body["parallel_tool_calls"]) == (False, False)
    else:
        assert body["system"] == model_client.SYSTEM_PROMPT
        assert json.loads(body["messages"][0]["content"]) == state
        assert [t["name"] for t in body["tools"]] == ["read_equipment"]
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
        assert body["max_tokens"] == 1024


@pytest.mark.parametrize("api", API_NAMES)
def test_a_recorded_text_answer_is_a_final_candidate(api):
    with serve(ReplayServer(api, [Reply(200, fixture(*TEXT[api]))])) as server:
        output = ask(server)
    assert read(api, output.raw).proposal.kind == "final"


@pytest.mark.parametrize("api", API_NAMES)
def test_a_refusal_is_a_typed_rejection(api):
    with serve(ReplayServer(api, [Reply(200, fixture(*REFUSAL[api]))])) as server:
        output = ask(server)
    proposal = read(api, output.raw).proposal
    assert isinstance(proposal, InvalidProposal)
    assert proposal.reason_code == "model_refusal"
    if api == "anthropic-messages":
        assert proposal.reasons[0].category == "cyber"


# -- failures --------------------------------------------------------------------------------
@pytest.mark.parametrize("api", API_NAMES)
def test_a_429_with_retry_after_is_retried_by_the_sdk_and_still_one_call(api):
    replies = [
        Reply(429, fixture(*RATE_LIMIT[api]), headers={"retry-after-ms": "20"}),
        Reply(200, fixture(*TOOL_CALL[api])),
    ]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server, max_retries=2)
    assert output.error == ""
    assert len(server.received) == 2
    assert output.usage["attempts"] == 2


@pytest.mark.parametrize("api", API_NAMES)
def test_a_persistent_429_is_rate_limited_after_the_configured_retries(api):
    replies = [Reply(429, fixture(*RATE_LIMIT[api]), headers={"retry-after-ms": "10"})]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server, max_retries=2)
    assert output.error == provider_errors.RATE_LIMITED
    assert len(server.received) == 3 == output.usage["attempts"]


@pytest.mark.parametrize("api", API_NAMES)
def test_a_retry_the_provider_asks_to_wait_for_past_the_lease_is_not_made(api):
    replies = [Reply(429, fixture(*RATE_LIMIT[api]), headers={"retry-after": "50"})]
    with serve(ReplayServer(api, replies)) as server:
        started = time.monotonic()
        output = ask(server, max_retries=2, timeout_seconds=5.0, lease_seconds=30.0)
    assert output.error == provider_errors.RATE_LIMITED
    assert len(server.received) == 1
    assert time.monotonic() - started < 5


def later(seconds: float) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


@pytest.mark.parametrize(
    "headers",
    [
        # Waits the SDKs honour that the budget check read as a short backoff: past its
        # own 60 s cap (the OpenAI SDK honours up to 120 s, the Anthropic SDK any), in
        # milliseconds, and as an HTTP-date (RFC 9110 allows either form).
        {"retry-after": "70"},
        {"retry-after-ms": "70000"},
        {"retry-after": "3600"},
        {"retry-after": "later"},
    ],
    ids=["seconds-70", "ms-70000", "seconds-3600", "http-date-50"],
)
def test_every_form_of_a_wait_past_the_budget_stops_the_retry(headers):
    headers = {k: later(50) if v == "later" else v for k, v in headers.items()}
    attempts = model_client._Attempts(budget_seconds=54.0, timeout_seconds=5.0)
    response = httpx2.Response(429, headers=headers)
    attempts.on_response(response)
    assert response.headers.get("x-should-retry") == "false"
    # A short wait in any form is left to the SDK.
    short = httpx2.Response(429, headers={"retry-after": later(3)})
    attempts.on_response(short)
    assert "x-should-retry" not in short.headers


@pytest.mark.parametrize("status", [400, 404, 422])
def test_a_server_asking_to_retry_any_error_is_held_to_the_budget_too(status):
    # Both SDKs obey the server's own x-should-retry: true on any error status.
    attempts = model_client._Attempts(budget_seconds=54.0, timeout_seconds=5.0)
    response = httpx2.Response(status, headers={"x-should-retry": "true", "retry-after": "3600"})
    attempts.on_response(response)
    assert response.headers.get("x-should-retry") == "false"


@pytest.mark.parametrize("api", API_NAMES)
def test_a_retry_a_4xx_asks_for_past_the_lease_is_not_waited_for(api):
    vocabulary, name, status = NOT_FOUND[api]
    headers = {"x-should-retry": "true", "retry-after": "100"}
    replies = [Reply(status, fixture(vocabulary, name), headers=headers)]
    with serve(ReplayServer(api, replies)) as server:
        started = time.monotonic()
        output = ask(server, max_retries=1, timeout_seconds=2.0, lease_seconds=20.0)
    assert output.error == provider_errors.CLIENT_ERROR
    assert len(server.received) == 1
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("api", API_NAMES)
def test_a_retry_after_http_date_past_the_lease_is_not_waited_for(api):
    replies = [Reply(429, fixture(*RATE_LIMIT[api]), headers={"retry-after": later(20)})]
    with serve(ReplayServer(api, replies)) as server:
        started = time.monotonic()
        output = ask(server, max_retries=1, timeout_seconds=2.0, lease_seconds=20.0)
    assert output.error == provider_errors.RATE_LIMITED
    assert len(server.received) == 1
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("api", API_NAMES)
def test_a_body_trickled_past_the_timeout_is_a_timeout_within_the_lease(api):
    # Each byte comes well within the per-read timeout, the whole body never does.
    replies = [Reply(200, fixture(*TEXT[api]), trickle=0.05)]
    with serve(ReplayServer(api, replies)) as server:
        started = time.monotonic()
        output = ask(server, timeout_seconds=0.5, lease_seconds=5.0)
    assert output.error == provider_errors.TIMEOUT
    assert time.monotonic() - started < 5.0 * 0.9
    assert output.usage["attempts"] == 1


@pytest.mark.parametrize("api", API_NAMES)
def test_a_slow_answer_within_the_timeout_is_read_whatever_the_lease_left(api):
    # One attempt of 3 s in a 5 s lease: an answer that takes 2.2 s is an answer.
    replies = [Reply(200, fixture(*TOOL_CALL[api]), delay=2.2)]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server, timeout_seconds=3.0, lease_seconds=5.0)
    assert output.error == ""
    assert output.raw == fixture(*TOOL_CALL[api])


def gzip_bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    parts = [packer.compress(b"{")]
    parts += [packer.compress(block) for _ in range(size >> 20)]
    return b"".join([*parts, packer.compress(b"}"), packer.flush()])


@pytest.mark.parametrize("api", API_NAMES)
def test_a_compressed_body_is_read_and_a_decompression_bomb_is_refused_unread(api):
    body = json.dumps(fixture(*TOOL_CALL[api])).encode()
    gzipped = [Reply(200, gzip.compress(body), headers={"Content-Encoding": "gzip"})]
    with serve(ReplayServer(api, gzipped)) as server:
        output = ask(server)
    assert output.error == ""
    assert output.raw == json.loads(body)
    bomb = gzip_bomb(64 << 20)  # 64 MB of JSON in 64 KB on the wire
    assert len(bomb) < 100_000
    bombed = [Reply(200, bomb, headers={"Content-Encoding": "gzip"})]
    with serve(ReplayServer(api, bombed)) as server:
        tracemalloc.start()
        try:
            output = ask(server)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert output.error == provider_errors.MALFORMED_RESPONSE
    assert "too large" in output.raw["error"]["message"]
    # Refused once past the 2 MB bound, not after inflating all of it.
    assert peak < 16 * 1024 * 1024


@pytest.mark.parametrize("api", API_NAMES)
def test_a_500_is_a_server_error(api):
    replies = [Reply(500, fixture(*SERVER_ERROR[api]))]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server, max_retries=1)
    assert output.error == provider_errors.SERVER_ERROR
    assert len(server.received) == 2  # one SDK retry, as configured


@pytest.mark.parametrize("api", API_NAMES)
def test_a_recorded_model_not_found_is_a_client_error(api):
    vocabulary, name, status = NOT_FOUND[api]
    with serve(ReplayServer(api, [Reply(status, fixture(vocabulary, name))])) as server:
        output = ask(server, max_retries=2)
    assert output.error == provider_errors.CLIENT_ERROR
    assert len(server.received) == 1  # a 4xx other than 408/409/429 is never retried


def test_an_anthropic_billing_error_reads_the_same_live_and_replayed():
    """HTTP 402 ``billing_error``: a live call is a client error by its status; the same body
    replayed from a recording is read by the adapter a new run pins, and must agree (it was
    ``unclassified`` before anthropic-tool-use-adapter@2.4.0)."""
    body = fixture("anthropic", "error_billing")
    with serve(ReplayServer("anthropic-messages", [Reply(402, body)])) as server:
        output = ask(server, max_retries=2)
    assert output.error == provider_errors.CLIENT_ERROR
    assert len(server.received) == 1  # a 402 is never retried
    replayed = read("anthropic-messages", body).proposal
    assert isinstance(replayed, InvalidProposal)
    assert replayed.reason_code == provider_errors.reason(output.error)


@pytest.mark.parametrize("api", API_NAMES)
def test_a_timeout_is_a_timeout(api):
    replies = [Reply(200, fixture(*TEXT[api]), delay=1.0)]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server, timeout_seconds=0.2)
    assert output.error == provider_errors.TIMEOUT
    assert output.usage["attempts"] == 1


@pytest.mark.parametrize("api", API_NAMES)
def test_malformed_json_is_a_malformed_response(api):
    replies = [Reply(200, b"<html>502 Bad Gateway</html>")]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server)
    assert output.error == provider_errors.MALFORMED_RESPONSE
    assert "not JSON" in output.raw["error"]["message"]


@pytest.mark.parametrize("api", API_NAMES)
def test_a_body_with_duplicate_keys_is_a_malformed_response(api):
    # As with a call's arguments, the decoder would pick which value counts (the last),
    # and the evidence would keep only that one.
    recorded = fixture(*TOOL_CALL[api])
    key = next(iter(recorded))
    body = (
        json.dumps({key: recorded[key]})[:-1].encode() + b", " + json.dumps(recorded)[1:].encode()
    )
    with serve(ReplayServer(api, [Reply(200, body)])) as server:
        output = ask(server)
    assert output.error == provider_errors.MALFORMED_RESPONSE
    assert f"duplicate keys: {key}" in output.raw["error"]["message"]


@pytest.mark.parametrize("api", API_NAMES)
def test_a_truncated_body_is_a_malformed_response(api):
    replies = [Reply(200, fixture(*TEXT[api]), truncate=True)]
    with serve(ReplayServer(api, replies)) as server:
        output = ask(server)
    assert output.error == provider_errors.MALFORMED_RESPONSE
    assert "not an HTTP response" in output.raw["error"]["message"]


@pytest.mark.parametrize("api", API_NAMES)
def test_a_body_nested_past_the_limit_is_refused_before_it_is_decoded(api):
    deep = b'{"a": ' * 5000 + b"1" + b"}" * 5000
    with serve(ReplayServer(api, [Reply(200, deep)])) as server:
        output = ask(server)
    assert output.error == provider_errors.MALFORMED_RESPONSE
    assert "depth" in output.raw["error"]["message"]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_a_connection_failure():
    cfg = ModelConfig(
        api="openai-chat", base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", max_retries=0
    )
    assert ModelClientPolicy(cfg).decide(PROJECTION).error == provider_errors.CONNECTION_FAILED


@pytest.mark.parametrize("api", API_NAMES)
def test_the_key_is_sent_to_the_provider_and_stored_nowhere(api, caplog):
    caplog.set_level(logging.DEBUG)
    echo = {
        "error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}
    }
    with serve(ReplayServer(api, [Reply(401, echo)])) as server:
        output = ask(server)
    assert output.error == provider_errors.AUTH_REJECTED
    headers = {k.lower(): v for k, v in server.received[0].headers.items()}
    assert KEY in headers.get("authorization", "") + headers.get("x-api-key", "")
    assert KEY not in json.dumps(output.raw)
    assert KEY not in caplog.text
    assert KEY not in repr(config(server))


# -- configuration -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"api": "gemini"}, "FIELDOPS_MODEL_API must be one of"),
        ({"model": ""}, "FIELDOPS_MODEL_NAME must be set"),
        ({"base_url": "", "api_key": ""}, "FIELDOPS_MODEL_BASE_URL"),
        ({"base_url": "file:///etc/passwd"}, "http(s) URL"),
        ({"base_url": "https://user:sk-secret@models.example/v1"}, "not in the URL"),
        ({"timeout_seconds": 0}, "must be positive"),
        ({"max_retries": 9}, "between 0 and 5"),
        ({"timeout_seconds": 20, "max_retries": 2}, "longer than the run lease"),
        ({"api_key": "sk-one\nsk-two"}, "one line"),
        ({}, ""),
        ({"base_url": ""}, ""),  # the provider's own endpoint, with a key
    ],
)
def test_only_usable_configurations_are_used(changes, problem):
    values = {
        "api": "openai-chat",
        "base_url": "http://127.0.0.1:11434/v1",
        "model": "m",
        "api_key": KEY,
        "timeout_seconds": 15.0,
        "max_retries": 2,
        "lease_seconds": 60.0,
    }
    values.update(changes)
    found = ModelConfig(**values).problem()
    assert (problem in found) if problem else found == ""


def test_the_default_retry_configuration_fits_the_default_lease():
    cfg = ModelConfig.from_settings()
    assert (cfg.max_retries, cfg.timeout_seconds) == (2, 15.0)
    assert cfg.worst_case_seconds() < cfg.lease_seconds


# -- runs ------------------------------------------------------------------------------------
def model_settings(server: ReplayServer, **kw: Any) -> override_settings:
    values = {
        "FIELDOPS_MODEL_API": server.api,
        "FIELDOPS_MODEL_BASE_URL": server.base_url,
        "FIELDOPS_MODEL_NAME": "replayed-model",
        "FIELDOPS_MODEL_API_KEY": KEY,
        "FIELDOPS_MODEL_TIMEOUT_SECONDS": 5.0,
        "FIELDOPS_MODEL_MAX_RETRIES": 0,
    }
    values.update(kw)
    return override_settings(**values)


def decisions(run: Run) -> list[dict[str, Any]]:
    ordered = Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    return [Evidence.objects.get(pk=e.refs["proposal"]).content for e in ordered]


@pytest.mark.parametrize("api", API_NAMES)
@pytest.mark.parametrize("preamble", [False, True])
def test_a_model_run_completes_the_reservation_through_each_api(world, approver, api, preamble):
    server = ReplayServer(api, scenario="reservation", preamble=preamble)
    with serve(server), model_settings(server):
        run = make_run(model_client.SCENARIO, vocabulary=APIS[api])
        assert run.state == "WAITING_HUMAN", decisions(run)
        approve(run, approver)  # the scripted approver
    assert (run.state, run.terminal_reason) == ("COMPLETED", "all_predicates_pass")
    assert [d.get("capability") for d in decisions(run)] == [
        "read_equipment",
        "search_manual",
        "check_inventory",
        "propose_reservation",
        "reserve_part",
    ]
    assert len(server.received) == 5 == run.counters["turns"]
    raw = Evidence.objects.filter(run=run, kind="raw_output").order_by("created_at").first()
    assert raw is not None
    assert raw.content["provider"] == APIS[api]
    assert raw.content["policy_version"] == model_client.VERSION
    assert raw.content["usage"]["attempts"] == 1
    notes = Evidence.objects.filter(run=run, kind="commentary").count()
    assert notes == (5 if preamble else 0)
    # Each request is the projection the decision event hashed, never a history.
    contexts = [
        Evidence.objects.get(pk=e.refs["observation"]).content
        for e in Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    ]
    for request, projection in zip(server.received, contexts, strict=True):
        assert json.loads(server.projection(request.body)) == {
            k: v for k, v in projection.items() if k != "capabilities"
        }
        assert context.projection_hash(projection)


@pytest.mark.parametrize("api", API_NAMES)
def test_retried_attempts_are_one_turn_and_failures_still_count_turns(world, api):
    replies = [Reply(429, fixture(*RATE_LIMIT[api]), headers={"retry-after-ms": "5"})]
    with (
        serve(ReplayServer(api, replies)) as server,
        model_settings(server, FIELDOPS_MODEL_MAX_RETRIES=1),
    ):
        run = make_run(model_client.SCENARIO, vocabulary=APIS[api], limits={"corrections": 1})
    assert run.terminal_reason == "correction_budget_exhausted"
    assert run.counters["turns"] == 2  # two decisions...
    assert len(server.received) == 4  # ...of two attempts each
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:rate_limited"}


def test_deeply_nested_model_arguments_end_in_a_recorded_rejection_not_a_stuck_run(world):
    # Issue 14 item 8: before, json.loads raised RecursionError inside the adapter, it
    # escaped runner.advance, the run stayed in DECIDING and the raw output was lost.
    body = fixture("openai", "tool_call_read_equipment")
    depth = 3000
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"equipment_id": ' + "[" * depth + "]" * depth + "}"
    )
    with serve(ReplayServer("openai-chat", [Reply(200, body)])) as server, model_settings(server):
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert run.state == "FAILED"
    assert run.terminal_reason == "correction_budget_exhausted"
    denials = set(
        Event.objects.filter(run=run, type="proposal.denied").values_list("reason_code", flat=True)
    )
    assert denials == {"invalid_proposal:output_limit_exceeded"}
    (first, *_) = decisions(run)
    assert first["reasons"][0]["limit"] == "depth"
    raws = Evidence.objects.filter(run=run, kind="raw_output")
    assert raws.count() == run.counters["turns"] == 2
    stored = raws.first()
    assert stored is not None
    assert stored.content["raw"]["object"] == "chat.completion"  # the raw output, kept


@pytest.mark.parametrize(
    ("api", "recorded"),
    [
        # OpenRouter's web search: url_citation annotations, the search counted in usage.
        ("openai-chat", ("openai", "recorded_openrouter_web_search_annotations")),
        # OpenAI's remote MCP tool: mcp_list_tools and an mcp_call OpenAI made itself.
        ("openai-responses", ("openai-responses", "recorded_mcp_call")),
        # Anthropic's MCP connector: mcp_tool_use / mcp_tool_result blocks.
        ("anthropic-messages", ("anthropic", "recorded_mcp_connector_tool_use")),
    ],
)
def test_an_answer_resting_on_a_tool_the_provider_ran_never_completes_a_run(world, api, recorded):
    """A real answer whose provider searched the web or called an MCP server itself, over
    HTTP through the real SDK, every turn: each turn is a recorded ``provider_executed_tool``
    rejection and the run ends by its correction budget; the answer is never the run's
    final output (before Chat Completions 2.6.0 the web-searched answer was a final
    candidate)."""
    body = fixture(*recorded)
    with serve(ReplayServer(api, [Reply(200, body)])) as server, model_settings(server):
        run = make_run(model_client.SCENARIO, vocabulary=APIS[api], limits={"corrections": 1})
    assert (run.state, run.terminal_reason) == ("FAILED", "correction_budget_exhausted")
    denials = set(
        Event.objects.filter(run=run, type="proposal.denied").values_list("reason_code", flat=True)
    )
    assert denials == {"invalid_proposal:provider_executed_tool"}
    assert {d["reason_code"] for d in decisions(run)} == {"provider_executed_tool"}
    assert Evidence.objects.filter(run=run, kind="raw_output").count() == run.counters["turns"]


class Raising:
    name = "raising"
    version = "raising@1"

    def decide(self, context: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")


class RaisingVocabulary:
    adapter_version = "raising-adapter@1"

    def read(self, raw: Any, kinds: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")


def test_a_raising_policy_or_adapter_is_a_typed_rejection_and_raw_is_stored_bounded(world):
    from runs import evidence
    from runs.policies import boundary
    from runs.policies.base import PolicyOutput

    output = boundary.call_policy(Raising(), PROJECTION)
    assert output.error == provider_errors.UNCLASSIFIED
    assert boundary.read_output(RaisingVocabulary(), output, KINDS).proposal.reason_code == (
        "provider_error:unclassified"
    )
    deep: Any = "leaf"
    for _ in range(20_000):
        deep = {"a": [deep]}
    answered = PolicyOutput(provider="openai", model="m", raw={"choices": [deep]})
    reading = boundary.read_output(RaisingVocabulary(), answered, KINDS)
    assert reading.proposal.reason_code == "adapter_error"
    run = make_run(advance=False)
    content = boundary.raw_evidence(
        answered, adapter_version="a", policy_version="p", input_context_hash="h"
    )
    stored = evidence.get(evidence.store(run_id=str(run.pk), kind="raw_output", content=content))
    assert stored is not None
    assert stored.content["raw_bounded"]["depth_at_least"] > 64
    assert "$fieldops_truncated" in json.dumps(stored.content)


def test_the_double_stays_the_default_and_model_needs_the_configured_vocabulary(world):
    assert isinstance(policy_for("reservation", "openai"), double.PolicyDouble)
    assert isinstance(policy_for(model_client.SCENARIO, "openai"), ModelClientPolicy)
    with pytest.raises(RunInputError) as info:
        make_run(model_client.SCENARIO, vocabulary="anthropic", advance=False)
    assert info.value.field == "scenario"
    assert "create the run with vocabulary 'openai'" in str(info.value)
    with override_settings(FIELDOPS_MODEL_API="anthropic-messages"):
        run = make_run(model_client.SCENARIO, vocabulary="anthropic", advance=False)
        assert isinstance(policy_for(model_client.SCENARIO, "anthropic"), ModelClientPolicy)
    # The settings changed under a pinned run: its calls are not_configured, never parsed
    # by the other API's terms.
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:not_configured"}


def test_an_unconfigured_model_is_a_stable_class_and_still_counts_turns(world):
    with override_settings(FIELDOPS_MODEL_BASE_URL="", FIELDOPS_MODEL_NAME=""):
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert run.terminal_reason == "correction_budget_exhausted"
    assert run.counters["turns"] == 2
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:not_configured"}


def test_a_run_pinned_to_an_adapter_this_code_lacks_is_never_parsed_by_another(world):
    run = make_run(advance=False)
    Run.objects.filter(pk=run.pk).update(model_adapter_version="openai-tool-calls-adapter@0.9")
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert run.terminal_reason == "correction_budget_exhausted"
    assert {d["reason_code"] for d in decisions(run)} == {"adapter_unavailable"}


def test_scenario_names_offer_every_double_and_the_model():
    from runs.policies import scenario_names, scenario_problem

    names = scenario_names()
    assert names[-1] == model_client.SCENARIO
    assert set(names[:-1]) == set(double.SCENARIOS)
    assert all(scenario_problem(n, "openai") is None for n in names)
