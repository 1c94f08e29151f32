"""Provider vocabularies: how raw output is rendered (by the double) and read (by the
adapter). Adding a provider means adding one entry here with its adapter module."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import anthropic_adapter, openai_adapter, openai_responses_adapter
from runs.policies.parsing import Reading, Stop

RenderedCall = tuple[str, Mapping[str, Any], str]


@dataclass(frozen=True)
class Vocabulary:
    name: str
    adapter_version: str
    # The adapter: one raw output -> one proposal and the model's commentary. Never raises.
    read: Callable[[Any, Mapping[str, str]], Reading]
    call: Callable[[str, Mapping[str, Any], str], dict[str, Any]]
    text: Callable[[str], dict[str, Any]]
    # One assistant turn with text and any number of calls, ended for tool use or as an
    # answer (used to render preambles and the outputs adapters must reject).
    message: Callable[[str, Sequence[RenderedCall], Stop], dict[str, Any]]

    def parse(self, raw: Any, kinds: Mapping[str, str]) -> Proposal:
        """The proposal ``raw`` makes (``read`` without the commentary)."""
        return self.read(raw, kinds).proposal


VOCABULARIES: dict[str, Vocabulary] = {
    "openai": Vocabulary(
        "openai",
        openai_adapter.VERSION,
        openai_adapter.read,
        openai_adapter.render_call,
        openai_adapter.render_text,
        openai_adapter.render_message,
    ),
    "openai-responses": Vocabulary(
        "openai-responses",
        openai_responses_adapter.VERSION,
        openai_responses_adapter.read,
        openai_responses_adapter.render_call,
        openai_responses_adapter.render_text,
        openai_responses_adapter.render_message,
    ),
    "anthropic": Vocabulary(
        "anthropic",
        anthropic_adapter.VERSION,
        anthropic_adapter.read,
        anthropic_adapter.render_call,
        anthropic_adapter.render_text,
        anthropic_adapter.render_message,
    ),
}


def get(name: str) -> Vocabulary:
    try:
        return VOCABULARIES[name]
    except KeyError:
        raise ValueError(f"unknown provider vocabulary {name!r}") from None


def renderer(name: str) -> Vocabulary:
    return get(name)
