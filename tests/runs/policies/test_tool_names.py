"""A capability whose id a provider would refuse as a tool name (an imported MCP tool such
as ``files.read_text``, or an id longer than 64 characters) reaches a live model under a
name the provider accepts, over real HTTP, and the model's call to that name is read as
exactly that capability, in the runner's reading and in decision replay's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from capabilities.registry import ALL_CONTRACTS
from runs.domain.proposals import ObserveIntent
from runs.engine import context, visibility
from runs.models import Event
from runs.policies import boundary, model_client, tool_names, vocabularies
from runs.policies.model_client import APIS, ModelClientPolicy, ModelConfig
from runs.replay.decision import RECORDED, decision_replay
from tests.helpers import make_run
from tests.runs.policies.replay_server import ReplayServer, Reply, serve
from tests.runs.policies.test_model_client import decisions, model_settings

# OpenAI Chat/Responses, Anthropic (64 in earlier API versions, 128 now) and Bedrock
# Converse: ^[a-zA-Z0-9_-]{1,64}$; Gemini: a letter or underscore first, at most 64.
ACCEPTED = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
IMPORTED = "files.read_text"
LONG = "inventory." + "x" * 90
KINDS = {**{cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}, IMPORTED: "observe"}


def imported(capability_id: str) -> dict[str, Any]:
    """The model projection an admitted imported tool would have."""
    return {
        "name": capability_id,
        "description": "Read one text file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    }


@pytest.fixture
def projection(world, monkeypatch) -> dict[str, Any]:
    """A run's context projection whose visible capabilities include two imported tools."""
    run = make_run(advance=False)
    shown = visibility.visible_projections

    def with_imported(r: Any) -> list[dict[str, Any]]:
        return sorted([*shown(r), imported(IMPORTED), imported(LONG)], key=lambda c: c["name"])

    monkeypatch.setattr(visibility, "visible_projections", with_imported)
    return context.build(run)


def offered(projection: dict[str, Any], capability_id: str) -> str:
    (found,) = [c for c in projection["capabilities"] if c["name"] == capability_id]
    return str(found.get("tool_name", found["name"]))


def request_names(api: str, body: dict[str, Any]) -> list[str]:
    if api == "openai-chat":
        return [t["function"]["name"] for t in body["tools"]]
    return [t["name"] for t in body["tools"]]


@pytest.mark.parametrize("api", sorted(APIS))
def test_every_tool_name_sent_is_one_the_provider_accepts_and_reads_back(api, projection):
    vocabulary = vocabularies.get(APIS[api])
    name = offered(projection, IMPORTED)
    reply = Reply(200, vocabulary.call(name, {"path": "notes/a.txt"}, "call_1"))
    with serve(ReplayServer(api, [reply])) as server:
        config = ModelConfig(
            api=api, base_url=server.base_url, model="replayed-model", max_retries=0
        )
        output = ModelClientPolicy(config).decide(projection)
    assert output.error == ""
    names = request_names(api, server.received[0].body)
    assert len(names) == len(projection["capabilities"]) == len(set(names))
    assert [n for n in names if not ACCEPTED.match(n)] == []
    assert "read_equipment" in names  # a portable id is sent as it is
    proposal = boundary.read_output(vocabulary, output, KINDS, projection).proposal
    assert isinstance(proposal, ObserveIntent)
    assert (proposal.capability, dict(proposal.args)) == (IMPORTED, {"path": "notes/a.txt"})


def test_the_names_are_recorded_on_the_projection_only_where_they_differ(projection):
    named = {c["name"]: c.get("tool_name") for c in projection["capabilities"]}
    assert ACCEPTED.match(named[IMPORTED] or "") and ACCEPTED.match(named[LONG] or "")
    assert {k for k, v in named.items() if v} == {IMPORTED, LONG}
    body = model_client.request_body(projection, "m")
    assert offered(projection, LONG) in [t["function"]["name"] for t in body["tools"]]


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_model_run_records_and_replays_the_call_to_the_offered_name_as_the_capability(
    world, monkeypatch, api
):
    shown = visibility.visible_projections
    monkeypatch.setattr(
        visibility, "visible_projections", lambda r: [*shown(r), imported(IMPORTED)]
    )
    name = tool_names.provider_names([IMPORTED])[IMPORTED]
    vocabulary = vocabularies.get(APIS[api])
    reply = Reply(200, vocabulary.call(name, {"path": "notes/a.txt"}, "call_1"))
    with serve(ReplayServer(api, [reply])) as server, model_settings(server):
        run = make_run(model_client.SCENARIO, vocabulary=APIS[api], limits={"actions": 1})
    assert [t for t in request_names(api, server.received[0].body) if not ACCEPTED.match(t)] == []
    assert name in request_names(api, server.received[0].body)
    first = decisions(run)[0]
    # Read as the capability it was offered for; validation then judges that capability
    # (no contract admits this one here: unknown, never a parse failure).
    assert (first["kind"], first["capability"]) == ("action", IMPORTED)
    denial = Event.objects.filter(run=run, type="proposal.denied").order_by("sequence").first()
    assert denial is not None and not denial.reason_code.startswith("invalid_proposal")
    # Decision replay reads the recorded calls by the names their projections recorded.
    replay = decision_replay(run, RECORDED)
    assert replay.rows and replay.first_divergence is None
    assert replay.matched == len(replay.rows)
