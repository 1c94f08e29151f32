"""What a model endpoint sends can be anything: a run survives it and keeps it as evidence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs import services
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
