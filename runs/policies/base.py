"""What a policy is: something that, given a context projection, produces raw output in
some provider's vocabulary. An adapter turns that output into one local proposal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class PolicyOutput:
    """Raw output of one policy call, kept verbatim as evidence."""

    provider: str  # vocabulary: "openai" | "anthropic"
    model: str
    raw: Mapping[str, Any]
    # A stable local class when the provider call failed ("" when it answered).
    error: str = ""
    usage: Mapping[str, int] = field(default_factory=dict)


class Policy(Protocol):
    name: str
    version: str

    def decide(self, context: Mapping[str, Any]) -> PolicyOutput: ...
