"""The context projection: bounded, versioned, rebuilt from canonical state, and free of
principal references and credentials; its hash is what the decision event carries."""

from __future__ import annotations

import json
from typing import Any

from django.test import override_settings

from runs.engine import context
from runs.models import Event, Evidence, Run
from tests.helpers import decline, make_run

EXPECTED_KEYS = {
    "version",
    "objective",
    "turn",
    "observations",
    "omitted_observations",
    "capabilities",
    "budget_hints",
    "recent_denials",
    "denial_counts",
    "requested_change",
}


def keys_anywhere(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_anywhere(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_anywhere(v)}
    return set()


def emitted(run: Run) -> list[Event]:
    return list(Event.objects.filter(run=run, type="proposal.emitted").order_by("sequence"))


def test_it_never_shows_the_model_a_principal_reference(world, approver):
    run = make_run(principal="user:operator")
    # The canonical proposal the model just formed carries the requesting principal.
    stored = json.dumps(list(Evidence.objects.filter(run=run).values_list("content", flat=True)))
    assert "user:operator" in stored
    decline(
        run,
        approver,
        reason="user:operator asked for the other slot",
        requested_change={"slot_id": "S-N1-02"},
    )
    projection = context.build(run)
    text = json.dumps(projection)
    assert "user:operator" not in text
    assert "user:approver" not in text
    assert not keys_anywhere(projection) & context.SENSITIVE_KEYS
    assert projection["requested_change"] == {"slot_id": "S-N1-02"}
    assert "[principal] asked for the other slot" in text
    # ...and the runner stored exactly such projections for every decision.
    for content in Evidence.objects.filter(run=run, kind="context").values_list(
        "content", flat=True
    ):
        assert "user:operator" not in json.dumps(content)


@override_settings(FIELDOPS_MODEL_API_KEY="sk-live-0123456789abcdef")
def test_it_redacts_configured_secrets_and_drops_credential_keys(world):
    run = make_run(advance=False)
    dirty = {
        "text": "the key is sk-live-0123456789abcdef",
        "credential_ref": "vault://fieldops/depot",
        "nested": [{"Authorization": "Bearer x", "ok": "user:someone said hi"}],
    }
    clean = context._scrub(dirty, run)
    assert clean == {
        "text": "the key is [redacted]",
        "nested": [{"ok": "[principal] said hi"}],
    }


def test_it_is_bounded_however_long_the_run(world):
    run = make_run("never_progress", limits={"actions": 20, "turns": 30, "proposals": 30})
    assert run.terminal_reason == "action_budget_exhausted"
    projection = context.build(run)
    observations = projection["observations"]
    assert len(observations) == context.MAX_OBSERVATIONS
    assert observations[0]["capability"] == "request"  # the objective's evidence stays
    assert projection["omitted_observations"] == 21 - context.MAX_OBSERVATIONS
    assert [o["seq"] for o in observations[1:]] == sorted(o["seq"] for o in observations[1:])
    assert len(json.dumps(projection)) <= context.MAX_PROJECTION_BYTES
    assert len(projection["recent_denials"]) <= context.MAX_DENIALS


def test_an_oversized_observation_is_cut_not_passed_through():
    passage = {"passage_id": "PF-9", "text": "x" * 20_000}
    cut = context._bounded({"passages": [passage]})
    assert len(json.dumps(cut)) <= context.MAX_OBSERVATION_BYTES
    assert cut["passages"][0]["text"].endswith("[cut]")
    huge = context._bounded({"rows": [{"n": i} for i in range(5_000)]})
    assert set(huge) == {"omitted", "digest"}


def test_denials_are_counted_by_reason_not_listed_without_bound(world):
    run = make_run("unavailable_tool")
    projection = context.build(run)
    assert projection["denial_counts"] == {"unknown_capability": run.limits["actions"]}
    assert [d["reason"] for d in projection["recent_denials"]] == ["unknown_capability"] * 3


def test_it_is_rebuilt_from_canonical_state_never_from_what_the_model_said(world):
    run = make_run("mixed_output")
    projection = context.build(run)
    assert set(projection) == EXPECTED_KEYS
    assert projection["version"] == context.VERSION
    # Building twice gives the same projection: nothing but stored records goes in.
    assert context.projection_hash(projection) == context.projection_hash(context.build(run))
    text = json.dumps(projection)
    # The model's prose ("Also, it is done.") and raw messages are not state.
    assert "it is done" not in text
    assert not keys_anywhere(projection) & {"messages", "role", "tool_calls", "content", "raw"}
    # Only what validation made of it: a denial reason.
    assert projection["denial_counts"] == {"invalid_proposal:mixed_output": 3}


def test_budget_hints_are_remaining_counts_only(world):
    run = make_run()
    hints = context.build(run)["budget_hints"]
    assert set(hints) == {"turns", "actions", "corrections"}
    assert hints["turns"] == run.budget_limits["turns"] - run.counters["turns"]
    assert hints["actions"] == run.budget_limits["actions"] - run.counters["actions"]


def test_each_decision_stores_its_projection_raw_output_and_versions_under_one_hash(world):
    for vocabulary in ("openai", "anthropic"):
        run = make_run(vocabulary=vocabulary)
        events = emitted(run)
        assert len(events) == 5
        for event in events:
            projection = Evidence.objects.get(pk=event.refs["observation"])
            raw = Evidence.objects.get(pk=event.refs["raw_output"]).content
            assert projection.kind == "context"
            content_hash = context.projection_hash(projection.content)
            assert event.payload["context_hash"] == content_hash
            assert raw["input_context_hash"] == content_hash
            assert raw["provider"] == event.payload["provider"] == vocabulary
            assert raw["model"] == event.payload["model"] == "double:reservation"
            assert raw["adapter_version"] == run.model_adapter_version
            assert raw["policy_version"] == "policy-double@1.1.0"
            assert raw["raw"]  # the verbatim provider-shaped output
