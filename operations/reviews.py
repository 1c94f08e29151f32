"""Reviews of conflicting effects (``services.conflict_review``): which attempts an operator
marked reviewed, and by whom. Read by the run pages and the recovery lists as well as by
the operations app, so it imports only the operations models (``selectors`` reads runs'
own selectors)."""

from __future__ import annotations

from typing import Any

from operations.models import ItemResult, Kind, OperationItem


def reviewed_conflict_ids() -> Any:
    """The attempt ids of the conflicts an operator marked reviewed (a subquery)."""
    return OperationItem.objects.filter(operation__kind=Kind.REVIEW, result=ItemResult.DONE).values(
        "target"
    )


def conflict_reviews(*, attempt_ids: list[str]) -> dict[str, OperationItem]:
    """The review item of each of these attempts that has one (with its operation: who,
    when, why)."""
    # ``exclude(target="")`` selects nothing less (an attempt id is never empty): it is
    # the condition of the partial index on targets, which SQLite uses only when the query
    # states it (PostgreSQL infers it from the ids).
    items = (
        OperationItem.objects.filter(
            operation__kind=Kind.REVIEW, result=ItemResult.DONE, target__in=attempt_ids
        )
        .exclude(target="")
        .select_related("operation")
    )
    return {item.target: item for item in items}


def reviewed_conflicts(*, tenant: str, limit: int = 100) -> list[OperationItem]:
    """The tenant's reviewed conflicts, newest review first (the recovery page's history)."""
    return list(
        OperationItem.objects.filter(
            operation__tenant=tenant, operation__kind=Kind.REVIEW, result=ItemResult.DONE
        )
        .select_related("operation", "run")
        .order_by("-operation__created_at", "-id")[:limit]
    )
