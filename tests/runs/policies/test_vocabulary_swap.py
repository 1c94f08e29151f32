"""Swapping the provider vocabulary changes the raw output, never the local proposals or
the disposition: the same scenario spoken in Chat Completions, Responses, Anthropic
Messages, Gemini generateContent and Bedrock Converse terms is the same run.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from approvals import services as approvals
from approvals.models import Checkpoint
from runs.engine import runner
from runs.models import Event, Evidence, Run
from runs.policies import (
    anthropic_adapter,
    bedrock_adapter,
    gemini_adapter,
    openai_adapter,
    openai_responses_adapter,
)
from tests.helpers import approve, make_run

REF = re.compile(r"\b(?:ev|rq)-[0-9a-f]{20}\b")
VOCABULARIES = ("openai", "openai-responses", "anthropic", "gemini", "bedrock-converse")
ADAPTERS = {
    "openai": openai_adapter.VERSION,
    "openai-responses": openai_responses_adapter.VERSION,
    "anthropic": anthropic_adapter.VERSION,
    "gemini": gemini_adapter.VERSION,
    "bedrock-converse": bedrock_adapter.VERSION,
}


def shape(raw: dict[str, Any]) -> str:
    """Which provider's wire shape a raw output is in."""
    if raw.get("object") == "chat.completion" and isinstance(raw.get("choices"), list):
        return "openai"
    if raw.get("object") == "response" and isinstance(raw.get("output"), list):
        return "openai-responses"
    if raw.get("type") == "message" and isinstance(raw.get("content"), list):
        return "anthropic"
    if isinstance(raw.get("candidates"), list):
        return "gemini"
    if isinstance(raw.get("output"), dict) and "stopReason" in raw:
        return "bedrock-converse"
    return "unknown"


def proposals(run: Run) -> list[dict[str, Any]]:
    """The run's local proposals in decision order, evidence ids renamed by first use."""
    ordered = list(Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence"))
    found = dict(
        Evidence.objects.filter(pk__in=[e.refs["proposal"] for e in ordered]).values_list(
            "pk", "content"
        )
    )
    stored = [found[e.refs["proposal"]] for e in ordered]
    for proposal in stored:
        # The provider's own stop word (``stop``, ``end_turn``, ``completed``) is the one
        # field of a rejection that names the vocabulary; everything else must be equal.
        for reason in proposal.get("reasons", []):
            reason.pop("provider_stop", None)
    text = json.dumps(stored, sort_keys=True)
    names: dict[str, str] = {}
    text = REF.sub(lambda m: names.setdefault(m.group(0), f"ref{len(names) + 1}"), text)
    return json.loads(text)


def raw_outputs(run: Run) -> list[dict[str, Any]]:
    return list(
        Evidence.objects.filter(run=run, kind="raw_output")
        .order_by("created_at")
        .values_list("content", flat=True)
    )


def outcome(run: Run) -> tuple[str, str, str, list[str]]:
    run.refresh_from_db()
    denials = list(
        Event.objects.filter(run=run, type="proposal.denied")
        .order_by("sequence")
        .values_list("reason_code", flat=True)
    )
    return run.state, run.disposition, run.terminal_reason, denials


def drive(scenario: str, vocabulary: str, approver: Any, operator: Any) -> Run:
    run = make_run(scenario, vocabulary=vocabulary)
    for _ in range(3):
        run.refresh_from_db()
        checkpoint = Checkpoint.objects.filter(pk=run.waiting_checkpoint).first()
        if checkpoint is None:
            break
        if checkpoint.kind == Checkpoint.Kind.APPROVAL:
            approve(run, approver)
        else:
            approvals.clarification_answer(
                checkpoint_id=checkpoint.pk, user=operator, answer="LOC-N1"
            )
            runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    return run


@pytest.mark.parametrize(
    ("scenario", "state"),
    [
        ("reservation", "COMPLETED"),
        ("clarify", "COMPLETED"),
        ("early_success", "FAILED"),
        ("premature_artifact", "FAILED"),
        ("unavailable_tool", "FAILED"),
        ("invalid_arguments", "FAILED"),
        ("mixed_output", "FAILED"),
        ("preamble", "COMPLETED"),
        ("injection", "COMPLETED"),
        ("abstain", "ESCALATED"),
    ],
)
def test_the_same_scenario_in_every_vocabulary_is_the_same_run(
    world, approver, operator, scenario, state
):
    spoken = {v: drive(scenario, v, approver, operator) for v in VOCABULARIES}
    reference = spoken["openai"]
    assert outcome(reference)[0] == state
    assert len(proposals(reference)) >= 1
    for vocabulary, run in spoken.items():
        assert outcome(run) == outcome(reference), vocabulary
        assert proposals(run) == proposals(reference), vocabulary
        # The swap was real: the raw outputs are in the provider's own shape, each parsed
        # by its own pinned adapter.
        assert run.model_adapter_version == ADAPTERS[vocabulary]
        assert {shape(r["raw"]) for r in raw_outputs(run)} == {vocabulary}
        assert commentary(run) == commentary(reference), vocabulary


def commentary(run: Run) -> list[str]:
    return list(
        Evidence.objects.filter(run=run, kind="commentary")
        .order_by("created_at")
        .values_list("content__text", flat=True)
    )


def test_a_preamble_is_commentary_on_the_timeline_and_never_a_proposal(world, approver, operator):
    for vocabulary in VOCABULARIES:
        run = drive("preamble", vocabulary, approver, operator)
        assert (run.state, run.terminal_reason) == ("COMPLETED", "all_predicates_pass")
        emitted = list(Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence"))
        assert emitted and all("commentary" in e.refs for e in emitted)
        assert all(e.reason_code != "invalid" for e in emitted)
        notes = Evidence.objects.filter(pk__in=[e.refs["commentary"] for e in emitted])
        assert {n.content["text"].split(" next;")[0] for n in notes} >= {
            "I'll call read_equipment",
            "I'll call reserve_part",
        }
        # The narration claims the reservation is done; nothing of it is in any proposal.
        assert "as good as done" not in json.dumps(proposals(run))
        assert not Event.objects.filter(run=run, type="proposal.denied").exists()


@pytest.mark.parametrize("vocabulary", VOCABULARIES)
def test_an_unknown_tool_is_denied_at_step_3_and_charged_to_the_action_budget(world, vocabulary):
    from sim.world.models import ServiceRequest

    run = make_run("unavailable_tool", vocabulary=vocabulary)
    assert (run.state, run.terminal_reason) == ("FAILED", "action_budget_exhausted")
    denied = list(Event.objects.filter(run=run, type="proposal.denied"))
    assert denied
    assert {(e.reason_code, e.payload["step"], e.payload["charge"]) for e in denied} == {
        ("unknown_capability", 3, "actions")
    }
    assert run.counters["actions"] == run.budget_limits["actions"]
    assert run.counters["corrections"] == 0  # not a parse failure: the call was well-formed
    assert not ServiceRequest.objects.filter(run_id=str(run.pk)).exists()


def test_a_run_cannot_be_created_in_an_unknown_vocabulary(world):
    from runs.services import RunInputError

    with pytest.raises(RunInputError) as info:
        make_run(vocabulary="cohere", advance=False)
    assert info.value.field == "vocabulary"


def test_the_run_timeline_links_each_decision_to_its_commentary(world, operator, client):
    from django.urls import reverse

    run = make_run("preamble", vocabulary="anthropic")
    client.force_login(operator)
    page = client.get(reverse("runs-detail", args=[run.pk])).content.decode()
    note = Evidence.objects.filter(run=run, kind="commentary").first()
    assert note is not None
    assert reverse("runs-evidence", args=[run.pk, note.pk]) in page
    assert ">commentary</a>" in page
    evidence_page = client.get(reverse("runs-evidence", args=[run.pk, note.pk]))
    assert evidence_page.status_code == 200
    assert "never read as authority" in evidence_page.content.decode()
