"""Provider vocabularies: how raw output is rendered (by the double) and read (by the
adapter). Adding a provider means adding one entry here with its adapter module."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.domain.proposals import Proposal
from runs.policies import (
    anthropic_adapter,
    bedrock_adapter,
    gemini_adapter,
    openai_adapter,
    openai_responses_adapter,
)
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
    "gemini": Vocabulary(
        "gemini",
        gemini_adapter.VERSION,
        gemini_adapter.read,
        gemini_adapter.render_call,
        gemini_adapter.render_text,
        gemini_adapter.render_message,
    ),
    "bedrock-converse": Vocabulary(
        "bedrock-converse",
        bedrock_adapter.VERSION,
        bedrock_adapter.read,
        bedrock_adapter.render_call,
        bedrock_adapter.render_text,
        bedrock_adapter.render_message,
    ),
}


def _earlier(current: Vocabulary, readers: Mapping[str, Any]) -> dict[str, Vocabulary]:
    return {
        version: dataclasses.replace(current, adapter_version=version, read=read)
        for version, read in readers.items()
    }


# Every installed adapter version, by version: the current one of each vocabulary (what a
# new run pins) and the earlier ones each adapter module keeps, unchanged, so a run recorded
# under one is still read by it (the runner, decision replay, execution simulation).
ADAPTERS: dict[str, Vocabulary] = {
    **{v.adapter_version: v for v in VOCABULARIES.values()},
    **_earlier(VOCABULARIES["openai"], openai_adapter.EARLIER),
    **_earlier(VOCABULARIES["openai-responses"], openai_responses_adapter.EARLIER),
    **_earlier(VOCABULARIES["anthropic"], anthropic_adapter.EARLIER),
    **_earlier(VOCABULARIES["gemini"], gemini_adapter.EARLIER),
    **_earlier(VOCABULARIES["bedrock-converse"], bedrock_adapter.EARLIER),
}


def get(name: str) -> Vocabulary:
    """The vocabulary ``name`` with its current adapter (what a new run pins)."""
    try:
        return VOCABULARIES[name]
    except KeyError:
        raise ValueError(f"unknown provider vocabulary {name!r}") from None


def for_version(adapter_version: str) -> Vocabulary:
    """The vocabulary whose adapter is exactly ``adapter_version`` (current or earlier).

    Raise ValueError when this code does not have that version: a run is never read by
    another version than the one it pinned.
    """
    try:
        return ADAPTERS[adapter_version]
    except KeyError:
        raise ValueError(f"no adapter {adapter_version!r}") from None


def renderer(name: str) -> Vocabulary:
    return get(name)
