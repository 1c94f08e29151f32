"""Reads for the operations pages: the list, one operation's progress and its results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from kernel import clock
from operations.models import ItemResult, Operation, OperationItem

RESULT_FILTERS = ("all", "pending", "done", "refused", "already_terminal")
RESULTS_PAGE = 200


def operation_list(*, tenant: str, limit: int = 100) -> list[Operation]:
    return list(Operation.objects.filter(tenant=tenant).order_by("-created_at")[:limit])


@dataclass(frozen=True)
class Progress:
    operation: Operation
    processed: int
    remaining: int
    percent: int
    rate: float  # items per second since the operation started
    eta_seconds: float | None


def operation_progress(operation: Operation) -> Progress:
    """Done / refused / remaining, the rate since the start and the time left at that rate."""
    processed = operation.processed
    until = operation.finished_at or operation.progressed_at or clock.now()
    seconds = max((until - operation.created_at).total_seconds(), 1e-3)
    rate = processed / seconds if processed else 0.0
    remaining = operation.remaining
    eta = remaining / rate if rate and remaining and operation.is_open else None
    return Progress(operation, processed, remaining, operation.percent, rate, eta)


def result_from_query(value: str | None) -> str:
    return value if value in RESULT_FILTERS else "all"


def operation_items(*, operation: Operation, result: str = "all") -> QuerySet[OperationItem]:
    """The operation's items in order, narrowed to one result ("pending" for unprocessed)."""
    qs = OperationItem.objects.filter(operation=operation)
    if result == "pending":
        qs = qs.filter(result=ItemResult.PENDING)
    elif result != "all":
        qs = qs.filter(result=result)
    return qs.order_by("position")


def item_row(item: Any) -> dict[str, Any]:
    """One result as the exports write it (``item`` is a values() row)."""
    return {
        "position": item["position"],
        "run_id": str(item["run_id"]),
        "target": item["target"],
        "result": item["result"] or "pending",
        "detail": item["detail"],
        "processed_at": clock.iso(item["processed_at"]) if item["processed_at"] else "",
    }


# The live counts cover at most this many runs: the newest of those the filter selects.
# An exact count reads every one (9M at 10M runs: 6 s, polled every 5 s by each open runs
# list), and a per-state cap does not bound it either: proving that a state has no run of
# the filter reads the whole state (9.5 s for disposition=FAILED at 10M).
COUNT_CAP = 1000


@dataclass(frozen=True)
class StateCounts:
    """Runs per state (table order, zeros left out) among the newest ``COUNT_CAP`` runs the
    filter selects; ``capped``: it selects more (the counts are of the newest only)."""

    counts: list[tuple[str, int]]
    capped: bool


def state_counts(*, tenant: str, filters: Any) -> StateCounts:
    """Runs per state among those the runs list's ``filters`` select, ignoring its state
    filter (so every state shows), counted over the newest COUNT_CAP of them: one query
    that reads them through the list's own index, like a page of COUNT_CAP rows."""
    from collections import Counter
    from dataclasses import replace

    from runs.console import runs_selectors
    from runs.domain.states import State

    qs = runs_selectors.runs_matching(tenant=tenant, filters=replace(filters, state=""))
    if qs is None:
        return StateCounts([], False)
    states = list(
        qs.order_by("-created_at", "-id").values_list("state", flat=True)[: COUNT_CAP + 1]
    )
    found = Counter(states[:COUNT_CAP])
    return StateCounts(
        [(s.value, found[s.value]) for s in State if found[s.value]], len(states) > COUNT_CAP
    )
