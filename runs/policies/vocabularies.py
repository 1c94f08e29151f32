"""Provider vocabularies: how raw output is rendered (by the double) and parsed (by the
adapter). Adding a provider means adding one entry here with its adapter module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import openai_adapter


@dataclass(frozen=True)
class Vocabulary:
    name: str
    adapter_version: str
    parse: Callable[[Mapping[str, Any], Mapping[str, str]], Proposal]
    call: Callable[[str, Mapping[str, Any], str], dict[str, Any]]
    text: Callable[[str], dict[str, Any]]


VOCABULARIES: dict[str, Vocabulary] = {
    "openai": Vocabulary(
        "openai",
        openai_adapter.VERSION,
        openai_adapter.parse,
        openai_adapter.render_call,
        openai_adapter.render_text,
    ),
}


def get(name: str) -> Vocabulary:
    try:
        return VOCABULARIES[name]
    except KeyError:
        raise ValueError(f"unknown provider vocabulary {name!r}") from None


def renderer(name: str) -> Vocabulary:
    return get(name)
