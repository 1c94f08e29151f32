"""Routing evaluation (SPEC §9): labelled cases, routing records and their metrics.

A case says what should have happened (acceptable and forbidden capabilities); a record
says what did (registry, exposed, retrieved, visible, selected). Each routing stage is
measured given the previous one succeeded, and a failure is attributed to the first
stage that failed: a capability the registry lacks is never a selection error.

Pure module: standard library only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from capabilities.exposure import Candidate, lexical_scores

ABSTAIN = "no_applicable_tool"
CONTROL_OUTCOMES = frozenset({"ask_user", "wait_for_event", ABSTAIN})


class RoutingStage(StrEnum):
    COVERAGE = "coverage"
    EXPOSURE = "exposure"
    RETRIEVAL = "retrieval"
    SELECTION = "selection"


STAGES: tuple[RoutingStage, ...] = tuple(RoutingStage)


class Category(StrEnum):
    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEAR_NEIGHBOUR = "near_neighbour"
    ABSTENTION = "abstention"
    FORBIDDEN = "forbidden"
    GAP = "gap"  # a known coverage gap: no registered capability can serve it


@dataclass(frozen=True)
class RoutingCase:
    """A labelled decision. ``acceptable`` is a set: equivalent answers are all right."""

    case_id: str
    goal: str
    acceptable: frozenset[str]
    forbidden: frozenset[str] = frozenset()
    capability: str = ""
    category: Category = Category.POSITIVE
    situation: str = "fresh"
    phase: str | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if not self.acceptable:
            raise ValueError(f"{self.case_id}: the acceptable set cannot be empty")
        both = self.acceptable & self.forbidden
        if both:
            raise ValueError(f"{self.case_id}: both acceptable and forbidden: {sorted(both)}")

    @property
    def expects_abstention(self) -> bool:
        """True when no ordinary capability is acceptable (the right move is a control)."""
        return self.acceptable <= CONTROL_OUTCOMES


@dataclass(frozen=True)
class RoutingRecord:
    """What happened for one case. ``retrieved`` holds ordinary capabilities only (k);
    ``controls`` the trusted control outcomes that were visible without consuming k."""

    case: RoutingCase
    registry: frozenset[str]
    exposed: frozenset[str]
    retrieved: frozenset[str]
    controls: frozenset[str]
    selected: str | None
    k: int | None = None
    arguments_valid: bool | None = None

    @property
    def visible(self) -> frozenset[str]:
        return self.retrieved | self.controls

    @property
    def failed_stage(self) -> RoutingStage | None:
        """The first stage at which no acceptable capability survived, or a bad choice."""
        acceptable = self.case.acceptable
        if not acceptable & self.registry:
            return RoutingStage.COVERAGE
        if not acceptable & (self.exposed | self.controls):
            return RoutingStage.EXPOSURE
        if not acceptable & self.visible:
            return RoutingStage.RETRIEVAL
        if self.selected not in acceptable:
            return RoutingStage.SELECTION
        return None

    @property
    def correct(self) -> bool:
        return self.failed_stage is None

    @property
    def violated(self) -> bool:
        return self.selected is not None and self.selected in self.case.forbidden

    @property
    def selected_outside_visible(self) -> bool:
        """The selector named something it was not shown (hiding is not enforcement)."""
        return self.selected is not None and self.selected not in self.visible


@dataclass(frozen=True)
class Rate:
    """A rate with its denominator; ``value`` is None when nothing was measured."""

    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def as_dict(self) -> dict[str, Any]:
        value = self.value
        return {
            "hits": self.hits,
            "total": self.total,
            "value": None if value is None else round(value, 4),
        }

    def __str__(self) -> str:
        value = self.value
        return "n/a (0 cases)" if value is None else f"{value:.3f} ({self.hits}/{self.total})"


def _rate(
    records: Iterable[RoutingRecord],
    measured: Callable[[RoutingRecord], bool],
    hit: Callable[[RoutingRecord], bool],
) -> Rate:
    hits = total = 0
    for r in records:
        if measured(r):
            total += 1
            hits += int(hit(r))
    return Rate(hits, total)


def _always(r: RoutingRecord) -> bool:
    return True


def capability_coverage(records: Sequence[RoutingRecord]) -> Rate:
    """Cases for which the registry holds at least one acceptable capability."""
    return _rate(records, _always, lambda r: bool(r.case.acceptable & r.registry))


def exposure_recall(records: Sequence[RoutingRecord]) -> Rate:
    """Given coverage: an acceptable capability was eligible (or a visible control)."""
    return _rate(
        records,
        lambda r: bool(r.case.acceptable & r.registry),
        lambda r: bool(r.case.acceptable & (r.exposed | r.controls)),
    )


def recall_at_k(records: Sequence[RoutingRecord], k: int | None = None) -> Rate:
    """Given an acceptable *ordinary* capability was exposed: one was retrieved in top k.

    Only records retrieved with ``k`` count when ``k`` is given; controls never count,
    because they do not compete for the retrieval budget.
    """
    return _rate(
        records,
        lambda r: (k is None or r.k == k) and bool(r.case.acceptable & r.exposed),
        lambda r: bool(r.case.acceptable & r.retrieved),
    )


def selection_accuracy(records: Sequence[RoutingRecord]) -> Rate:
    """Given an acceptable capability was visible: the selector chose an acceptable one."""
    return _rate(
        records,
        lambda r: bool(r.case.acceptable & r.visible),
        lambda r: r.selected in r.case.acceptable,
    )


def abstention_accuracy(records: Sequence[RoutingRecord]) -> Rate:
    """Cases whose right move is a control outcome: the selector chose an acceptable one."""
    return _rate(
        records, lambda r: r.case.expects_abstention, lambda r: r.selected in r.case.acceptable
    )


def violation_rate(records: Sequence[RoutingRecord]) -> Rate:
    """All cases: the selector chose a capability the case forbids."""
    return _rate(records, _always, lambda r: r.violated)


def end_to_end_accuracy(records: Sequence[RoutingRecord]) -> Rate:
    return _rate(records, _always, lambda r: r.correct)


def arguments_validity(records: Sequence[RoutingRecord]) -> Rate:
    """Of selections whose arguments were checked: model-owned arguments were valid."""
    return _rate(
        records, lambda r: r.arguments_valid is not None, lambda r: bool(r.arguments_valid)
    )


def failure_profile(records: Sequence[RoutingRecord]) -> dict[str, int]:
    """Failures counted by their first failed stage (every stage listed, in order)."""
    counts = Counter(r.failed_stage for r in records if r.failed_stage is not None)
    return {stage.value: counts.get(stage, 0) for stage in STAGES}


def selection_confusions(records: Sequence[RoutingRecord]) -> list[tuple[str, str, int]]:
    """(acceptable set, selected, count) of genuine selection failures, most frequent first."""
    counts = Counter(
        (" | ".join(sorted(r.case.acceptable)), r.selected or "(nothing)")
        for r in records
        if r.failed_stage is RoutingStage.SELECTION
    )
    return [(a, s, n) for (a, s), n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))]


def funnel_counts(records: Sequence[RoutingRecord]) -> list[tuple[str, int]]:
    """How many cases survive each stage, starting from all cases."""
    out = [("cases", len(records))]
    alive = list(records)
    for stage in STAGES:
        alive = [r for r in alive if r.failed_stage != stage]
        out.append((stage.value, len(alive)))
    return out


@dataclass(frozen=True)
class Report:
    """Every metric of one evaluation, with denominators."""

    name: str
    records: tuple[RoutingRecord, ...]
    k: int | None
    notes: tuple[str, ...] = ()
    extra_recall: Mapping[int, Rate] = field(default_factory=dict)

    def metrics(self) -> dict[str, Rate]:
        r = self.records
        return {
            "capability_coverage": capability_coverage(r),
            "exposure_recall": exposure_recall(r),
            "recall_at_k": recall_at_k(r, self.k),
            "selection_accuracy": selection_accuracy(r),
            "abstention_accuracy": abstention_accuracy(r),
            "violation_rate": violation_rate(r),
            "end_to_end_accuracy": end_to_end_accuracy(r),
            "arguments_validity": arguments_validity(r),
            "selected_outside_visible": _rate(r, _always, lambda x: x.selected_outside_visible),
        }

    def by_category(self) -> dict[str, Rate]:
        out: dict[str, Rate] = {}
        for cat in sorted({rec.case.category.value for rec in self.records}):
            members = [rec for rec in self.records if rec.case.category.value == cat]
            out[cat] = Rate(sum(1 for rec in members if rec.correct), len(members))
        return out

    def failures(self) -> list[RoutingRecord]:
        return [r for r in self.records if not r.correct or r.violated]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "k": self.k,
            "cases": len(self.records),
            "metrics": {name: rate.as_dict() for name, rate in self.metrics().items()},
            "recall_at": {str(k): rate.as_dict() for k, rate in sorted(self.extra_recall.items())},
            "failure_profile": failure_profile(self.records),
            "selection_confusions": [
                {"acceptable": a, "selected": s, "count": n}
                for a, s, n in selection_confusions(self.records)
            ],
            "funnel": [{"stage": s, "count": n} for s, n in funnel_counts(self.records)],
            "by_category": {c: rate.as_dict() for c, rate in self.by_category().items()},
            "failures": [
                {
                    "case": r.case.case_id,
                    "stage": r.failed_stage.value if r.failed_stage else None,
                    "selected": r.selected,
                    "acceptable": sorted(r.case.acceptable),
                    "violation": r.violated,
                }
                for r in self.failures()
            ],
            "notes": list(self.notes),
        }


def lexical_select(
    goal: str, visible: Sequence[Candidate], *, threshold: float = 1.0
) -> str | None:
    """A simple selector over descriptions: the best lexical match, else abstain.

    Ties go to the alphabetically first id, which is exactly how an overlapping,
    vaguely described catalog turns a choice into a guess.
    """
    if not visible:
        return None
    scores = lexical_scores(goal, visible)
    best = max(scores.values())
    if best < threshold:
        return ABSTAIN if any(c.id == ABSTAIN for c in visible) else None
    return min(c.id for c in visible if scores[c.id] == best)
