"""Scenarios a run can be driven by, registered by whoever provides the policies.

Governed code never imports a policy implementation it does not own: the deterministic
policy double (``sim/double.py``) registers its scripted scenarios when the ``sim`` app is
ready; the live model client is the ``model`` scenario of ``runs.policies``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runs.policies.base import Policy


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    # (vocabulary name) -> a policy that plays this scenario speaking that vocabulary
    policy: Callable[[str], Policy]


_SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> None:
    _SCENARIOS[scenario.name] = scenario


def scenarios() -> dict[str, Scenario]:
    """Every registered scenario, by name (a copy)."""
    return dict(_SCENARIOS)


def get(name: str) -> Scenario | None:
    return _SCENARIOS.get(name)
