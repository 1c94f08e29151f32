"""What a model endpoint sends can be anything: a run survives it and keeps it as evidence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs import services
from runs.domain.proposals import InvalidProposal
from runs.models import Event, Evidence, Run
from runs.policies import model_client
from tests.runs.policies.fake_model import FakeModel, serve

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["nul", "nul-arguments"])
def test_nul_characters_in_a_models_answer_are_kept_visible_and_the_run_goes_on(
    world: None, settings: Any, mode: str
) -> None:
    # PostgreSQL stores no NUL: an answer carrying one must not fail the run's save.
    settings.FIELDOPS_MODEL_API_KEY = "sk-test-hostile"
    settings.FIELDOPS_MODEL_NAME = "fake-model"
    settings.FIELDOPS_MODEL_TIMEOUT_SECONDS = 5.0
    with serve(FakeModel(mode)) as fake:
        settings.FIELDOPS_MODEL_BASE_URL = fake.url
        run = services.run_create(
            scenario=model_client.SCENARIO,
            tenant="north",
            principal_ref="user:operator",
            limits={"corrections": 2, "actions": 3},
        )
    run = Run.objects.get(pk=run.pk)
    # Each answer is refused as a whole (a typed rejection charged to corrections) instead
    # of failing the save and leaving the run in DECIDING, asking the model again forever.
    assert (run.state, run.terminal_reason) == ("FAILED", "correction_budget_exhausted")
    denied = Event.objects.filter(run=run, type="proposal.denied").values_list(
        "reason_code", flat=True
    )
    assert set(denied) == {"invalid_proposal:unstorable_output"}
    raw = [e.content["raw"] for e in Evidence.objects.filter(run=run, kind="raw_output")]
    assert raw, "the raw answers are kept as evidence"
    message = raw[0]["choices"][0]["message"]
    if mode == "nul":
        assert message["content"] == "Reading it\\u0000 now."  # visible, not dropped
    # The arguments are JSON text: their escape is kept as sent.
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
        "equipment_id": "EQ-17\x00"
    }


@pytest.mark.postgres
def test_a_huge_stop_word_keeps_the_typed_reason_in_the_proposal_evidence(
    world: None, settings: Any
) -> None:
    # A finish_reason of 600,000 characters (well inside the 2 MB output limit) was copied
    # whole into the reason's provider_stop: the proposal evidence passed its 512 KB limit
    # and was stored as a digest placeholder, losing every typed reason of the decision.
    settings.FIELDOPS_MODEL_API_KEY = "sk-test-hostile"
    settings.FIELDOPS_MODEL_NAME = "fake-model"
    settings.FIELDOPS_MODEL_TIMEOUT_SECONDS = 5.0
    with serve(FakeModel("huge-finish")) as fake:
        settings.FIELDOPS_MODEL_BASE_URL = fake.url
        run = services.run_create(
            scenario=model_client.SCENARIO,
            tenant="north",
            principal_ref="user:operator",
            limits={"corrections": 1, "actions": 3},
        )
    run = Run.objects.get(pk=run.pk)
    assert (run.state, run.terminal_reason) == ("FAILED", "correction_budget_exhausted")
    proposals = [e.content for e in Evidence.objects.filter(run=run, kind="proposal")]
    assert proposals
    for content in proposals:
        assert "truncated" not in content
        assert content["reason_code"] == "unknown_shape"
        (reason,) = content["reasons"]
        assert reason["code"] == "unknown_shape"
        assert reason["provider_stop"].startswith("xxx")
        assert len(reason["provider_stop"]) <= 100
    # Decision replay reads the recorded raw output again to the same, bounded reading.
    from runs.replay.decision import decision_replay

    replay = decision_replay(run, "recorded")
    assert replay.rows and replay.matched == len(replay.rows), [r.differences for r in replay.rows]


@pytest.mark.parametrize("vocabulary", ["openai", "openai-responses", "anthropic"])
def test_the_boundary_cuts_a_reasons_stop_word_and_tool_name_in_every_vocabulary(vocabulary):
    from capabilities.registry import ALL_CONTRACTS
    from runs.domain.proposals import to_dict
    from runs.policies import boundary, vocabularies
    from runs.policies.base import PolicyOutput

    kinds = {cid: c.kind.value for cid, c in ALL_CONTRACTS.items()}
    speaker = vocabularies.get(vocabulary)
    huge = "x" * 600_000
    stop = {
        "openai": lambda raw: raw["choices"][0].update(finish_reason=huge),
        "openai-responses": lambda raw: raw.update(status=huge),
        "anthropic": lambda raw: raw.update(stop_reason=huge),
    }
    text = speaker.text("The part is reserved.")
    stop[vocabulary](text)
    handoff = speaker.call("transfer_to_" + huge, {}, "c1")  # a handoff names its tool
    for raw in (text, handoff):
        for version in [v for v, a in vocabularies.ADAPTERS.items() if a.name == vocabulary]:
            output = PolicyOutput(provider=vocabulary, model="m", raw=raw)
            proposal = boundary.read_output(vocabularies.for_version(version), output, kinds)
            proposal = proposal.proposal
            # (Versions before the unknown-stop rule read the text as the answer.)
            assert len(json.dumps(to_dict(proposal))) < 5_000, version
            if isinstance(proposal, InvalidProposal):
                reason = proposal.reasons[0]
                assert reason.provider_stop.startswith("x") or reason.tool.startswith("transfer")
