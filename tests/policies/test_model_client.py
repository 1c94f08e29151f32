"""The model client policy against a fake OpenAI-compatible server on 127.0.0.1.

A successful answer is parsed like any recorded output; every provider failure maps to a
stable local class, still counts a turn, and the API key never leaves the request header.
"""

from __future__ import annotations

import json
import logging
import socket

import pytest
from django.test import override_settings

from runs import context
from runs.models import Event, Evidence, Run
from runs.policies import double, model_client, policy_for, provider_errors
from runs.policies.model_client import ModelClientPolicy, ModelConfig
from runs.services import RunInputError
from tests.helpers import approve, make_run
from tests.policies.fake_model import FakeModel, serve

KEY = "sk-test-fieldops-0123456789abcdef"


def model_settings(url: str, timeout: float = 5.0) -> override_settings:
    return override_settings(
        FIELDOPS_MODEL_BASE_URL=url,
        FIELDOPS_MODEL_NAME="fake-model",
        FIELDOPS_MODEL_API_KEY=KEY,
        FIELDOPS_MODEL_TIMEOUT_SECONDS=timeout,
    )


def stored_text(run: Run) -> str:
    evidence = list(Evidence.objects.filter(run=run).values_list("content", flat=True))
    events = list(Event.objects.filter(run=run).values_list("payload", "refs", "reason_code"))
    return json.dumps([evidence, events], default=str)


def decisions(run: Run) -> list[dict]:
    ordered = Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    return [Evidence.objects.get(pk=e.refs["proposal"]).content for e in ordered]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_model_run_reaches_the_same_approval_as_the_double(world, approver):
    with serve(FakeModel("double:reservation")) as fake, model_settings(fake.url):
        run = make_run(model_client.SCENARIO)
        assert run.state == "WAITING_HUMAN"
        reference = make_run("reservation")
        assert [d["kind"] for d in decisions(run)] == [d["kind"] for d in decisions(reference)]
        assert [d.get("capability") for d in decisions(run)] == [
            "read_equipment",
            "search_manual",
            "check_inventory",
            "propose_reservation",
            "reserve_part",
        ]
        approve(run, approver)
        assert (run.state, run.terminal_reason) == ("COMPLETED", "all_predicates_pass")
    assert len(fake.received) == 5  # one request per decision; verification asks no model
    raw = Evidence.objects.filter(run=run, kind="raw_output").order_by("created_at").first()
    assert raw is not None
    assert raw.content["model"] == "fake-model-2025-01-01"  # the version the provider reported
    assert raw.content["policy_version"] == model_client.VERSION
    assert raw.content["usage"]["prompt_tokens"] == 700
    assert raw.content["raw"]["object"] == "chat.completion"  # verbatim


def test_each_request_is_the_projection_and_the_tools_never_a_chat_history(world):
    with serve(FakeModel("double:reservation")) as fake, model_settings(fake.url):
        run = make_run(model_client.SCENARIO)
    stored = [
        Evidence.objects.get(pk=e.refs["observation"]).content
        for e in Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence")
    ]
    assert len(fake.received) == len(stored) == 5
    for request, projection in zip(fake.received, stored, strict=True):
        assert request.path == "/v1/chat/completions"
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        body = request.body
        assert body["model"] == "fake-model"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        sent = json.loads(body["messages"][1]["content"])
        assert sent == {k: v for k, v in projection.items() if k != "capabilities"}
        assert [t["function"]["name"] for t in body["tools"]] == [
            c["name"] for c in projection["capabilities"]
        ]
        assert context.projection_hash(projection)  # the same projection the event hashed
    # The last request knows what happened only through admitted observations.
    assert len(json.loads(fake.received[-1].body["messages"][1]["content"])["observations"]) == 5


@pytest.mark.parametrize(
    ("mode", "error_class"),
    [
        ("status:400", provider_errors.CLIENT_ERROR),
        ("status:401", provider_errors.AUTH_REJECTED),
        ("status:404", provider_errors.CLIENT_ERROR),
        ("status:429", provider_errors.RATE_LIMITED),
        ("status:500", provider_errors.SERVER_ERROR),
        ("status:503", provider_errors.SERVER_ERROR),
        ("malformed", provider_errors.MALFORMED_RESPONSE),
    ],
)
def test_a_provider_error_maps_to_a_stable_class_and_still_counts_a_turn(
    world, caplog, mode, error_class
):
    caplog.set_level(logging.DEBUG)
    with serve(FakeModel(mode)) as fake, model_settings(fake.url):
        run = make_run(model_client.SCENARIO)
    assert (run.state, run.terminal_reason) == ("FAILED", "correction_budget_exhausted")
    calls = len(fake.received)
    assert calls == run.budget_limits["corrections"] + 1
    assert run.counters["turns"] == calls  # every failed call was charged as a turn
    assert {d["reason_code"] for d in decisions(run)} == {f"provider_error:{error_class}"}
    denials = set(
        Event.objects.filter(run=run, type="proposal.denied").values_list("reason_code", flat=True)
    )
    assert denials == {f"invalid_proposal:provider_error:{error_class}"}
    raw = Evidence.objects.filter(run=run, kind="raw_output").first()
    assert raw is not None
    assert raw.content["error"] == error_class
    # The 4xx bodies echo the key back; it is stored nowhere and logged nowhere.
    assert KEY not in stored_text(run)
    assert KEY not in caplog.text


def test_a_timeout_maps_to_timeout_and_still_counts_a_turn(world):
    with serve(FakeModel("sleep", delay=1.0)) as fake, model_settings(fake.url, timeout=0.2):
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert run.terminal_reason == "correction_budget_exhausted"
    assert run.counters["turns"] == 2 == len(fake.received)
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:timeout"}


def test_a_refused_connection_maps_to_connection_failed(world):
    with model_settings(f"http://127.0.0.1:{closed_port()}/v1"):
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert run.terminal_reason == "correction_budget_exhausted"
    assert run.counters["turns"] == 2
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:connection_failed"}


def test_an_unconfigured_model_is_a_stable_class_too(world):
    with override_settings(FIELDOPS_MODEL_BASE_URL="", FIELDOPS_MODEL_NAME=""):
        run = make_run(model_client.SCENARIO, limits={"corrections": 1})
    assert run.terminal_reason == "correction_budget_exhausted"
    assert run.counters["turns"] == 2
    assert {d["reason_code"] for d in decisions(run)} == {"provider_error:not_configured"}


@pytest.mark.parametrize(
    ("base_url", "problem"),
    [
        ("", "must be set"),
        ("file:///etc/passwd", "http(s) URL"),
        ("ftp://models.example/v1", "http(s) URL"),
        ("https://user:sk-secret@models.example/v1", "not in the URL"),
        ("https://models.example/v1", ""),
        ("http://127.0.0.1:11434/v1/", ""),
    ],
)
def test_only_http_endpoints_without_credentials_in_the_url_are_used(base_url, problem):
    config = ModelConfig(base_url=base_url, model="m", api_key=KEY)
    if problem:
        assert problem in config.problem()
    else:
        assert config.problem() == ""
        assert config.endpoint.endswith("/v1/chat/completions")
        assert "//chat" not in config.endpoint
    assert KEY not in repr(config)


def test_the_double_stays_the_default_and_model_needs_the_openai_vocabulary(world):
    assert isinstance(policy_for("reservation", "openai"), double.PolicyDouble)
    assert isinstance(policy_for(model_client.SCENARIO, "openai"), ModelClientPolicy)
    with pytest.raises(RunInputError) as info:
        make_run(model_client.SCENARIO, vocabulary="anthropic", advance=False)
    assert info.value.field == "scenario"
    with pytest.raises(RunInputError):
        make_run("no-such-scenario", advance=False)


def test_a_run_pinned_to_an_adapter_this_code_lacks_is_never_parsed_by_another(world):
    run = make_run(advance=False)
    Run.objects.filter(pk=run.pk).update(model_adapter_version="openai-tool-calls-adapter@0.9")
    from runs import runner

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
