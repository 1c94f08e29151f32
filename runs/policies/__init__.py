"""Policies a run can be driven by. The deterministic double is the default."""

from __future__ import annotations

from runs.models import Run
from runs.policies import vocabularies
from runs.policies.base import Policy
from runs.policies.double import PolicyDouble


def vocabulary_for(adapter_version: str) -> vocabularies.Vocabulary:
    for vocabulary in vocabularies.VOCABULARIES.values():
        if vocabulary.adapter_version == adapter_version:
            return vocabulary
    raise ValueError(f"no adapter {adapter_version!r}")


def resolve(run: Run) -> tuple[Policy, vocabularies.Vocabulary]:
    """Return the policy pinned by ``run`` and the vocabulary its adapter parses."""
    vocabulary = vocabulary_for(run.model_adapter_version)
    return PolicyDouble(run.scenario, vocabulary.name), vocabulary
