from __future__ import annotations

import pytest

from runs.domain.budgets import (
    DEFAULT_LIMITS,
    Budget,
    Budgets,
    exhausted_reason,
    validate_limits,
)


def test_exhaustion_reasons_are_precise_and_stable():
    assert exhausted_reason("actions") == "action_budget_exhausted"
    assert exhausted_reason(Budget.TURNS) == "turn_budget_exhausted"
    assert exhausted_reason(Budget.CORRECTIONS) == "correction_budget_exhausted"
    assert exhausted_reason(Budget.EFFECTS) == "effect_budget_exhausted"
    assert len({exhausted_reason(b) for b in Budget}) == len(Budget)


def test_counters_only_grow():
    budgets = Budgets(limits=DEFAULT_LIMITS)
    grown = budgets.charged({"actions": 2})
    assert grown.counters["actions"] == 2 and budgets.counters["actions"] == 0
    with pytest.raises(ValueError, match="monotonic"):
        grown.charged({"actions": -1})


def test_available_and_first_exceeded():
    budgets = Budgets(limits={**DEFAULT_LIMITS, "effects": 1})
    assert budgets.available("effects")
    used = budgets.charged({"effects": 1})
    assert not used.available("effects")
    assert used.first_exceeded() is None
    assert used.charged({"effects": 1}).first_exceeded() == "effects"


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({**DEFAULT_LIMITS, "turns": 0}, "budget_limit_invalid:turns"),
        (
            {k: v for k, v in DEFAULT_LIMITS.items() if k != "actions"},
            "budget_limit_missing:actions",
        ),
        ({**DEFAULT_LIMITS, "actions": "3"}, "budget_limit_missing:actions"),
        ({**DEFAULT_LIMITS, "coffee": 1}, "budget_limit_unknown:coffee"),
        ({**DEFAULT_LIMITS, "effects": -1}, "budget_limit_invalid:effects"),
    ],
)
def test_invalid_limits_are_named(limits, reason):
    assert validate_limits(limits) == reason


def test_default_limits_are_valid_and_allow_zero_effects():
    assert validate_limits(DEFAULT_LIMITS) is None
    assert validate_limits({**DEFAULT_LIMITS, "effects": 0}) is None
