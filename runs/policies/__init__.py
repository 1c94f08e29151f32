"""Policies a run can be driven by: the scenarios registered in ``runs.policies.registry``
(the deterministic double's, by the ``sim`` app) and ``model``; a run created with
the scenario ``model`` asks the configured model API instead (``FIELDOPS_MODEL_API``:
Chat Completions, Responses or Anthropic Messages, through the official SDKs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel.text import quoted_shortly
from runs.models import Run
from runs.policies import model_client, parsing, registry, vocabularies
from runs.policies.base import Policy, PolicyOutput
from runs.policies.parsing import Reading

MODEL_SCENARIO = model_client.SCENARIO
# What a run is created with when nobody says: the product's own flow, a reservation that
# waits for an approval (the console's start form and the API's default).
DEFAULT_SCENARIO = "reservation"


def vocabulary_for(adapter_version: str) -> vocabularies.Vocabulary:
    """The vocabulary read by exactly ``adapter_version``; raise ValueError if not installed."""
    return vocabularies.for_version(adapter_version)


def scenario_names() -> list[str]:
    """Every scenario a run can be created with: the double's scenarios, then the model."""
    return [*sorted(registry.scenarios()), MODEL_SCENARIO]


def scenario_problem(scenario: str, vocabulary: str) -> str | None:
    """Return why a run cannot be created with ``scenario`` and ``vocabulary`` (or None)."""
    if scenario == MODEL_SCENARIO:
        config = model_client.ModelConfig.from_settings()
        spoken = config.vocabulary or model_client.VOCABULARY
        if vocabulary != spoken:
            return (
                f"the configured model API ({config.api}) speaks the {spoken!r} vocabulary; "
                f"create the run with vocabulary {spoken!r}"
            )
        return None
    if registry.get(scenario) is None:
        return f"unknown scenario {quoted_shortly(scenario)}"
    return None


def policy_for(scenario: str, vocabulary: str) -> Policy:
    """Return the policy named by ``scenario`` speaking ``vocabulary``.

    A model run whose pinned vocabulary is no longer the configured API's (the settings
    changed mid-run) gets a policy that reports ``not_configured`` on every call, rather
    than output its pinned adapter would read in another vocabulary's terms.
    """
    if scenario == MODEL_SCENARIO:
        policy = model_client.ModelClientPolicy()
        if policy.vocabulary != vocabulary:
            return _Mismatch(policy, vocabulary)
        return policy
    registered = registry.get(scenario)
    if registered is None:
        raise ValueError(f"unknown scenario {scenario!r}")
    return registered.policy(vocabulary)


def resolve(run: Run) -> tuple[Policy, vocabularies.Vocabulary]:
    """Return the policy pinned by ``run`` and the vocabulary its adapter parses.

    A run pinned to an adapter version this code no longer has is never parsed by another
    version: every decision becomes ``InvalidProposal("adapter_unavailable")`` and the
    run ends by its correction budget instead of silently changing its mapping.
    """
    try:
        vocabulary = vocabulary_for(run.model_adapter_version)
    except ValueError:
        pinned = run.model_adapter_version
        return _Unavailable(pinned), unavailable_vocabulary(pinned)
    return policy_for(run.scenario, vocabulary.name), vocabulary


class _Mismatch:
    version = model_client.VERSION

    def __init__(self, policy: model_client.ModelClientPolicy, pinned: str) -> None:
        self.name = policy.name
        self.policy = policy
        self.pinned = pinned

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput:
        from runs.policies import provider_errors

        detail = (
            f"the run speaks {self.pinned!r}; the configured model API "
            f"({self.policy.config.api}) speaks {self.policy.vocabulary!r}"
        )
        return PolicyOutput(
            provider=self.pinned,
            model=self.policy.config.model or "unconfigured",
            raw={"error": {"class": provider_errors.NOT_CONFIGURED, "message": detail}},
            error=provider_errors.NOT_CONFIGURED,
        )


class _Unavailable:
    version = "unavailable"

    def __init__(self, pinned: str) -> None:
        self.name = f"unavailable:{pinned}"
        self.pinned = pinned

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput:
        return PolicyOutput(provider="none", model="none", raw={"pinned_adapter": self.pinned})


def unavailable_vocabulary(pinned: str) -> vocabularies.Vocabulary:
    """A vocabulary whose adapter answers ``adapter_unavailable`` for ``pinned``."""

    def read(raw: Any, kinds: Mapping[str, str]) -> Reading:
        return Reading(
            parsing.invalid("adapter_unavailable", f"pinned adapter {pinned} is not installed")
        )

    def refuse(*args: Any) -> dict[str, Any]:
        raise ValueError(f"adapter {pinned} is not installed")

    return vocabularies.Vocabulary("unavailable", pinned, read, refuse, refuse, refuse)
