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


# The live counts stop at this many runs per state (shown as "1000+"): an exact count
# reads every run the filter selects (9M at 10M runs: 6 s, and the list polls it every
# 5 s), a capped one at most this many per state, whatever the tenant's size.
COUNT_CAP = 1000


def state_counts(*, tenant: str, filters: Any) -> list[tuple[str, int]]:
    """Runs per state among those the runs list's ``filters`` select, ignoring its state
    filter (so every state shows); states in the table's order, zeros left out. A count
    above COUNT_CAP is COUNT_CAP + 1 (one query per state, each reading at most that many
    runs through the (tenant, state) index or the filter's own)."""
    from dataclasses import replace

    from runs.console import runs_selectors
    from runs.domain.states import State

    qs = runs_selectors.runs_matching(tenant=tenant, filters=replace(filters, state=""))
    if qs is None:
        return []
    counted = (
        (s.value, qs.filter(state=s.value).order_by().values("pk")[: COUNT_CAP + 1].count())
        for s in State
    )
    return [(state, n) for state, n in counted if n]
