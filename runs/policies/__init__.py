"""Policies a run can be driven by. The deterministic double is the default; a run created
with the scenario ``model`` asks an OpenAI-compatible chat-completions endpoint instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.domain.proposals import InvalidProposal, Proposal
from runs.models import Run
from runs.policies import model_client, vocabularies
from runs.policies.base import Policy, PolicyOutput
from runs.policies.double import SCENARIOS, PolicyDouble

MODEL_SCENARIO = model_client.SCENARIO


def vocabulary_for(adapter_version: str) -> vocabularies.Vocabulary:
    for vocabulary in vocabularies.VOCABULARIES.values():
        if vocabulary.adapter_version == adapter_version:
            return vocabulary
    raise ValueError(f"no adapter {adapter_version!r}")


def scenario_names() -> list[str]:
    """Every scenario a run can be created with: the double's scenarios, then the model."""
    return [*sorted(SCENARIOS), MODEL_SCENARIO]


def scenario_problem(scenario: str, vocabulary: str) -> str | None:
    """Return why a run cannot be created with ``scenario`` and ``vocabulary`` (or None)."""
    if scenario == MODEL_SCENARIO:
        if vocabulary != model_client.VOCABULARY:
            return f"the model policy speaks the {model_client.VOCABULARY!r} vocabulary only"
        return None
    if scenario not in SCENARIOS:
        return f"unknown scenario {scenario!r}"
    return None


def policy_for(scenario: str, vocabulary: str) -> Policy:
    """Return the policy named by ``scenario`` speaking ``vocabulary``."""
    if scenario == MODEL_SCENARIO:
        return model_client.ModelClientPolicy()
    return PolicyDouble(scenario, vocabulary)


def resolve(run: Run) -> tuple[Policy, vocabularies.Vocabulary]:
    """Return the policy pinned by ``run`` and the vocabulary its adapter parses.

    A run pinned to an adapter version this code no longer has is never parsed by another
    version: every decision becomes ``InvalidProposal("adapter_unavailable")`` and the
    run ends by its correction budget instead of silently changing its mapping.
    """
    try:
        vocabulary = vocabulary_for(run.model_adapter_version)
    except ValueError:
        return _Unavailable(run.model_adapter_version), _unavailable(run.model_adapter_version)
    return policy_for(run.scenario, vocabulary.name), vocabulary


class _Unavailable:
    version = "unavailable"

    def __init__(self, pinned: str) -> None:
        self.name = f"unavailable:{pinned}"
        self.pinned = pinned

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput:
        return PolicyOutput(provider="none", model="none", raw={"pinned_adapter": self.pinned})


def _unavailable(pinned: str) -> vocabularies.Vocabulary:
    def parse(raw: Mapping[str, Any], kinds: Mapping[str, str]) -> Proposal:
        return InvalidProposal("adapter_unavailable", f"pinned adapter {pinned} is not installed")

    def refuse(*args: Any) -> dict[str, Any]:
        raise ValueError(f"adapter {pinned} is not installed")

    return vocabularies.Vocabulary("unavailable", pinned, parse, refuse, refuse, refuse)
