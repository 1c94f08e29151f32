"""Separate, monotonic budgets (SPEC §1 Budgets).

A counter only grows. Each budget is checked before the governed action it limits, and
exhaustion gives a precise reason code (``action_budget_exhausted``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum


class Budget(StrEnum):
    TURNS = "turns"
    PROPOSALS = "proposals"
    ACTIONS = "actions"
    EFFECTS = "effects"
    CORRECTIONS = "corrections"
    ELAPSED_MS = "elapsed_ms"


@dataclass(frozen=True)
class BudgetInfo:
    unit: str
    counts: str
    charged_at: str
    owner: str


BUDGET_INFO: Mapping[Budget, BudgetInfo] = {
    Budget.TURNS: BudgetInfo(
        "model calls",
        "every policy call, including calls whose provider failed and calls whose worker "
        "died before the proposal was recorded",
        "at dispatch: the call's context is stored before the call; proposal.emitted charges "
        "it (a failed call emits an invalid proposal), plus any earlier call no event charged "
        "(payload uncharged_turns)",
        "task contract",
    ),
    Budget.PROPOSALS: BudgetInfo(
        "proposals",
        "every local proposal the adapter produced",
        "proposal.emitted",
        "task contract",
    ),
    Budget.ACTIONS: BudgetInfo(
        "action requests",
        "well-formed capability requests decided by policy: admitted, or denied at steps "
        "3-8 (so probing unavailable or forbidden tools is not free)",
        "proposal.allowed / proposal.denied",
        "task contract",
    ),
    Budget.EFFECTS: BudgetInfo(
        "semantic effects",
        "authoritative effects in the ledger (not dispatch attempts)",
        "effect.recorded / reconciliation.matched",
        "task contract",
    ),
    Budget.CORRECTIONS: BudgetInfo(
        "invalid proposals",
        "malformed proposals (step 2) and rejected completion claims",
        "proposal.denied (step 2) / completion.rejected",
        "task contract",
    ),
    Budget.ELAPSED_MS: BudgetInfo(
        "milliseconds",
        "wall time since the run was created, including waits",
        "every event carries the elapsed time at append",
        "task contract",
    ),
}

DEFAULT_LIMITS: Mapping[str, int] = {
    Budget.TURNS: 24,
    Budget.PROPOSALS: 24,
    Budget.ACTIONS: 12,
    Budget.EFFECTS: 1,
    Budget.CORRECTIONS: 3,
    Budget.ELAPSED_MS: 2 * 60 * 60 * 1000,
}


EXHAUSTED_REASONS: Mapping[Budget, str] = {
    Budget.TURNS: "turn_budget_exhausted",
    Budget.PROPOSALS: "proposal_budget_exhausted",
    Budget.ACTIONS: "action_budget_exhausted",
    Budget.EFFECTS: "effect_budget_exhausted",
    Budget.CORRECTIONS: "correction_budget_exhausted",
    Budget.ELAPSED_MS: "elapsed_budget_exhausted",
}


def exhausted_reason(budget: Budget | str) -> str:
    """The precise terminal reason when ``budget`` is exhausted."""
    return EXHAUSTED_REASONS[Budget(budget)]


def zero_counters() -> dict[str, int]:
    return {b.value: 0 for b in Budget}


@dataclass(frozen=True)
class Budgets:
    limits: Mapping[str, int]
    counters: Mapping[str, int] = field(default_factory=zero_counters)

    def remaining(self, budget: Budget | str) -> int:
        key = Budget(budget).value
        return self.limits[key] - self.counters.get(key, 0)

    def available(self, budget: Budget | str, amount: int = 1) -> bool:
        return self.remaining(budget) >= amount

    def charged(self, delta: Mapping[str, int]) -> Budgets:
        """Return budgets with ``delta`` added. Raise ValueError on a negative delta."""
        counters = dict(self.counters)
        for key, amount in delta.items():
            if amount < 0:
                raise ValueError(f"budget.counter.monotonic: negative delta for {key}")
            counters[Budget(key).value] = counters.get(key, 0) + amount
        return replace(self, counters=counters)

    def first_exceeded(self) -> str | None:
        for budget in Budget:
            if self.counters.get(budget.value, 0) > self.limits[budget.value]:
                return budget.value
        return None


def validate_limits(limits: Mapping[str, int]) -> str | None:
    """Return a reason code if ``limits`` is not a complete, positive set of budgets."""
    for budget in Budget:
        value = limits.get(budget.value)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"budget_limit_missing:{budget.value}"
        if value < 0 or (value == 0 and budget is not Budget.EFFECTS):
            return f"budget_limit_invalid:{budget.value}"
    extra = set(limits) - {b.value for b in Budget}
    if extra:
        return f"budget_limit_unknown:{sorted(extra)[0]}"
    return None
