"""Provider vocabularies: how raw output is rendered (by the double) and parsed (by the
adapter). Adding a provider means adding one entry here with its adapter module."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import anthropic_adapter, openai_adapter

RenderedCall = tuple[str, Mapping[str, Any], str]


@dataclass(frozen=True)
class Vocabulary:
    name: str
    adapter_version: str
    parse: Callable[[Mapping[str, Any], Mapping[str, str]], Proposal]
    call: Callable[[str, Mapping[str, Any], str], dict[str, Any]]
    text: Callable[[str], dict[str, Any]]
    # One assistant message with text and any number of calls (used to render the
    # outputs adapters must reject, such as mixed text and a tool call).
    message: Callable[[str, Sequence[RenderedCall]], dict[str, Any]]


VOCABULARIES: dict[str, Vocabulary] = {
    "openai": Vocabulary(
        "openai",
        openai_adapter.VERSION,
        openai_adapter.parse,
        openai_adapter.render_call,
        openai_adapter.render_text,
        openai_adapter.render_message,
    ),
    "anthropic": Vocabulary(
        "anthropic",
        anthropic_adapter.VERSION,
        anthropic_adapter.parse,
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
