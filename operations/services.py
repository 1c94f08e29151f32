"""Operation writes: preview, start (materialise the items), process a batch, pause, resume,
cancel, and the sweep that re-hands a running operation whose worker died.

Every item is one ordinary run service call (``run_cancel`` through the transition
authority, or the recovery page's single reconcile), made in the same transaction that
records the item's result: a worker killed mid-batch leaves each item either processed with
its result or untouched, and the next claimant (``FOR UPDATE SKIP LOCKED``) takes only the
untouched ones. So every item is acted on exactly once, whatever crashes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count

from fieldops import points
from kernel import clock
from operations.models import (
    ItemResult,
    Kind,
    Operation,
    OperationEvent,
    OperationItem,
    Status,
)
from runs import services as run_services
from runs.console import runs_selectors
from runs.console.filters import ID_SEARCH_ERROR
from runs.domain.states import is_terminal
from runs.models import Run

BATCH_SIZE = 50
SAMPLE_SIZE = 10
# The most items one operation may hold (materialised in one transaction at start).
MAX_ITEMS = 200_000
ITEM_POINT = "operation.item_applied"


class OperationInputError(ValueError):
    """Bad input to an operation service: nothing was written. ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


# -- preview and start -----------------------------------------------------------------
@dataclass(frozen=True)
class Preview:
    filters: runs_selectors.RunFilters
    count: int
    sample: list[Run] = field(default_factory=list)


def _matching(*, tenant: str, filters: runs_selectors.RunFilters) -> Any:
    qs = runs_selectors.runs_matching(tenant=tenant, filters=filters)
    if qs is None:
        raise OperationInputError("q", ID_SEARCH_ERROR)
    return qs


def cancel_preview(*, tenant: str, query: Mapping[str, str]) -> Preview:
    """How many of the tenant's runs the runs-list filter ``query`` selects, and a sample
    (newest first). Raise OperationInputError for an id search that is not hexadecimal."""
    filters = runs_selectors.RunFilters.from_query(query)
    qs = _matching(tenant=tenant, filters=filters)
    sample = list(
        qs.order_by("-created_at", "-id").only("id", "scenario", "state", "created_at")[
            :SAMPLE_SIZE
        ]
    )
    return Preview(filters, qs.count(), sample)


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise OperationInputError("reason", "an operation needs a reason")
    return reason[:500]


def _confirmed(confirm: str | int) -> int:
    try:
        return int(str(confirm).strip())
    except ValueError:
        raise OperationInputError(
            "confirm", "type the number of runs the preview showed to confirm"
        ) from None


def operation_start_cancel(
    *, tenant: str, by_ref: str, query: Mapping[str, str], reason: str, confirm: str | int
) -> Operation:
    """Start a bulk cancel of the tenant's runs the filter ``query`` selects.

    The items are materialised now, in the transaction that records the operation, from the
    filter within ``tenant``; ``confirm`` must equal their number (what the preview showed),
    otherwise nothing is written. Raise OperationInputError on bad input or a changed count.
    """
    reason = _clean_reason(reason)
    confirmed = _confirmed(confirm)
    filters = runs_selectors.RunFilters.from_query(query)
    qs = _matching(tenant=tenant, filters=filters)
    run_ids = qs.order_by("created_at", "id").values_list("pk", flat=True)
    return _start(
        tenant=tenant,
        by_ref=by_ref,
        kind=Kind.CANCEL,
        filter_record={"page": "runs", "query": vars(filters)},
        reason=reason,
        confirmed=confirmed,
        rows=((run_id, "") for run_id in run_ids.iterator(chunk_size=2000)),
    )


def _start(
    *,
    tenant: str,
    by_ref: str,
    kind: str,
    filter_record: dict[str, Any],
    reason: str,
    confirmed: int,
    rows: Any,
    before_commit: Callable[[Operation], None] | None = None,
) -> Operation:
    now = clock.now()
    with transaction.atomic():
        operation = Operation.objects.create(
            tenant=tenant,
            kind=kind,
            created_by=by_ref,
            created_at=now,
            filter=filter_record,
            reason=reason,
            kicked_at=now,
        )
        total = 0
        chunk: list[OperationItem] = []
        for run_id, target in rows:
            chunk.append(
                OperationItem(operation=operation, position=total, run_id=run_id, target=target)
            )
            total += 1
            if total > MAX_ITEMS:
                raise OperationInputError(
                    "filter", f"an operation acts on at most {MAX_ITEMS} items; narrow the filter"
                )
            if len(chunk) >= 2000:
                OperationItem.objects.bulk_create(chunk)
                chunk = []
        OperationItem.objects.bulk_create(chunk)
        if total != confirmed:
            # The filter matches a different set now: act on nothing the operator did not see.
            transaction.set_rollback(True)
            raise OperationInputError(
                "confirm",
                f"the filter now matches {total} item(s), not {confirmed}: "
                "preview again and confirm the new count",
            )
        if total == 0:
            transaction.set_rollback(True)
            raise OperationInputError("filter", "the filter matches nothing to act on")
        operation.total = total
        operation.save(update_fields=["total"])
        _log(operation, "started", by_ref, {"total": total, "filter": filter_record})
        if before_commit is not None:
            before_commit(operation)
        _kick_on_commit(operation.pk)
    return operation


def _log(operation: Operation, type: str, by: str, detail: dict[str, Any] | None = None) -> None:
    OperationEvent.objects.create(
        operation=operation, type=type, by=by, at=clock.now(), detail=detail or {}
    )


# -- pause, resume, cancel -------------------------------------------------------------
MOVES: Mapping[str, tuple[frozenset[str], str]] = {
    # action: (statuses it applies to, status it leads to)
    "pause": (frozenset({Status.RUNNING}), Status.PAUSED),
    "resume": (frozenset({Status.PAUSED}), Status.RUNNING),
    "cancel": (frozenset({Status.RUNNING, Status.PAUSED}), Status.CANCELLED),
}


def operation_move(*, operation_id: Any, tenant: str, action: str, by_ref: str) -> Operation:
    """Pause, resume or cancel the tenant's operation (compare-and-set on its status).

    A pause or cancel takes effect before the next item; items already processed keep
    their results. Raise Operation.DoesNotExist for another tenant's operation and
    OperationInputError for an action its status does not allow.
    """
    if action not in MOVES:
        raise OperationInputError("action", f"unknown action {action!r}")
    allowed, target = MOVES[action]
    with transaction.atomic():
        operation = Operation.objects.select_for_update().get(pk=operation_id, tenant=tenant)
        if operation.status not in allowed:
            raise OperationInputError(
                "action", f"the operation is {operation.status}: cannot {action}"
            )
        operation.status = target
        fields = ["status"]
        if target == Status.CANCELLED:
            operation.finished_at = clock.now()
            fields.append("finished_at")
        if target == Status.RUNNING:
            operation.kicked_at = clock.now()
            fields.append("kicked_at")
            _kick_on_commit(operation.pk)
        operation.save(update_fields=fields)
        _log(
            operation,
            {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[action],
            by_ref,
        )
    return operation


# -- processing ------------------------------------------------------------------------
Outcome = tuple[str, str]  # (ItemResult, detail)


def _apply_cancel(operation: Operation, item: OperationItem) -> Outcome:
    run = item.run  # read with the claim (not locked: run_cancel locks what it changes)
    if run.tenant != operation.tenant:
        return ItemResult.REFUSED, "other_tenant"
    if is_terminal(run.state):
        return ItemResult.ALREADY_TERMINAL, run.state
    result = run_services.run_cancel(
        run_id=str(run.pk),
        by_ref=operation.created_by,
        reason=f"{operation.reason} (operation {operation.short_id})",
    )
    if result.applied:
        return ItemResult.DONE, result.qualification
    if is_terminal(result.run.state) and result.refusal != "busy":
        return ItemResult.ALREADY_TERMINAL, result.run.state
    return ItemResult.REFUSED, result.refusal or "refused"


def _apply_reconcile(operation: Operation, item: OperationItem) -> Outcome:
    from runs.console import operations as console_operations
    from runs.models import EffectAttempt

    try:
        outcome = console_operations.effect_attempt_reconcile(
            attempt_id=item.target, tenant=operation.tenant, by_ref=operation.created_by
        )
    except EffectAttempt.DoesNotExist:
        return ItemResult.REFUSED, "not_found"
    if outcome.action == "refused":
        return ItemResult.REFUSED, outcome.detail[:300]
    return ItemResult.DONE, f"{outcome.action}: {outcome.attempt.status}"[:300]


APPLY: Mapping[str, Callable[[Operation, OperationItem], Outcome]] = {
    Kind.CANCEL: _apply_cancel,
    Kind.INCIDENT: _apply_cancel,
    Kind.RECONCILE: _apply_reconcile,
}


def _process_one(operation: Operation) -> bool:
    """Claim one pending item (skipping those another worker holds), act on it and record
    its result in one transaction; return False when none is left to claim."""
    with transaction.atomic():
        item = (
            OperationItem.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("run")
            .only("id", "position", "target", "run__id", "run__tenant", "run__state")
            .filter(operation=operation, result=ItemResult.PENDING)
            .order_by("position")
            .first()
        )
        if item is None:
            return False
        result, detail = APPLY[operation.kind](operation, item)
        # Drills only: a worker killed here loses this item's transaction, never half of it.
        points.reach(ITEM_POINT, str(operation.pk))
        OperationItem.objects.filter(pk=item.pk, result=ItemResult.PENDING).update(
            result=result, detail=detail[:300], processed_at=clock.now()
        )
    return True


def operation_advance(*, operation_id: Any, batch_size: int = BATCH_SIZE) -> str:
    """Process up to ``batch_size`` items of a running operation; return its status after.

    Refresh the counters from the items and finish the operation when nothing is pending.
    A paused, cancelled or finished operation (or an unknown id) is left as it is.
    """
    operation = Operation.objects.filter(pk=operation_id).first()
    if operation is None or operation.status != Status.RUNNING:
        return operation.status if operation else "missing"
    Operation.objects.filter(pk=operation.pk).update(kicked_at=clock.now())
    more = True
    for _ in range(batch_size):
        more = _process_one(operation)
        if not more:
            break
    return _settle(operation, exhausted=not more)


def _settle(operation: Operation, *, exhausted: bool) -> str:
    counts = dict(
        OperationItem.objects.filter(operation=operation)
        .values("result")
        .annotate(n=Count("id"))
        .values_list("result", "n")
    )
    now = clock.now()
    changes = {
        "done": counts.get(ItemResult.DONE, 0),
        "refused": counts.get(ItemResult.REFUSED, 0),
        "already_terminal": counts.get(ItemResult.ALREADY_TERMINAL, 0),
        "progressed_at": now,
    }
    Operation.objects.filter(pk=operation.pk).update(**changes)
    if exhausted and not counts.get(ItemResult.PENDING, 0):
        with transaction.atomic():
            finished = Operation.objects.filter(pk=operation.pk, status=Status.RUNNING).update(
                status=Status.FINISHED, finished_at=now
            )
            if finished:
                _log(
                    operation,
                    "finished",
                    "system",
                    {k: v for k, v in changes.items() if k != "progressed_at"},
                )
    return Operation.objects.values_list("status", flat=True).get(pk=operation.pk)


def operation_drain(*, operation_id: Any, batch_size: int = BATCH_SIZE) -> str:
    """Process batches until the operation is no longer running (finished, paused, cancelled)."""
    while True:
        status = operation_advance(operation_id=operation_id, batch_size=batch_size)
        if status != Status.RUNNING:
            return status


# -- hand-over and sweep ---------------------------------------------------------------
Handover = Callable[[str], None]
_handover: Handover | None = None


def register_handover(handover: Handover) -> None:
    """The one function that hands an operation to a worker (``operations.executor.kick``,
    registered when the app is ready); these services know nothing of who executes."""
    global _handover
    _handover = handover


def handover(operation_id: Any) -> None:
    """Hand ``operation_id`` over now (a nudge: the running operation is the work)."""
    if _handover is not None:
        _handover(str(operation_id))


def _kick_on_commit(operation_id: Any) -> None:
    op = str(operation_id)
    transaction.on_commit(lambda: handover(op))


def stale_after() -> dt.timedelta:
    return dt.timedelta(seconds=float(getattr(settings, "FIELDOPS_OPERATION_STALE_SECONDS", 30)))


def operation_sweep(*, now: dt.datetime | None = None) -> list[str]:
    """Re-hand every running operation nobody progressed for ``stale_after()`` (its worker
    died, or its hand-over was lost); return their ids."""
    now = now or clock.now()
    cutoff = now - stale_after()
    stale = [
        str(pk)
        for pk in Operation.objects.filter(status=Status.RUNNING, kicked_at__lt=cutoff)
        .exclude(progressed_at__gte=cutoff)
        .values_list("pk", flat=True)[:100]
    ]
    for op in stale:
        Operation.objects.filter(pk=op).update(kicked_at=now)
        handover(op)
    return stale


# -- bulk reconcile (recovery page) ------------------------------------------------------
@dataclass(frozen=True)
class VersionFilter:
    """A capability version (``capability_id`` at ``version``), or none chosen."""

    capability_id: str = ""
    version: str = ""

    @classmethod
    def from_query(cls, data: Mapping[str, str]) -> VersionFilter:
        """``capability=<id>@<version>`` naming a catalog version, or none when empty.
        Raise OperationInputError for a value that names no catalog version."""
        from catalog.models import CapabilityVersion

        raw = (data.get("capability") or "").strip()
        if not raw:
            return cls()
        capability_id, _, version = raw.partition("@")
        if not CapabilityVersion.objects.filter(
            capability_id=capability_id, version=version
        ).exists():
            # A bulk action must not widen a mistyped version to every version.
            raise OperationInputError("capability", f"no capability version {raw[:80]!r}")
        return cls(capability_id, version)

    @property
    def ref(self) -> str:
        return f"{self.capability_id}@{self.version}" if self.capability_id else ""

    def pinned_by_run(self, prefix: str = "") -> dict[str, str]:
        """The lookup that selects runs (or, with ``prefix="run__"``, their attempts) that
        pin this version (the runs' pins read ``<version>#<digest>``)."""
        if not self.capability_id:
            return {}
        return {f"{prefix}components__{self.capability_id}__startswith": f"{self.version}#"}


@dataclass(frozen=True)
class ReconcileFilters:
    version: VersionFilter = VersionFilter()
    age: str = ""

    @classmethod
    def from_query(cls, data: Mapping[str, str]) -> ReconcileFilters:
        from runs.console.filters import AGES

        age = data.get("age", "")
        return cls(VersionFilter.from_query(data), age if age in AGES else "")

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in {"capability": self.version.ref, "age": self.age}.items() if v}


def unknown_effects_matching(*, tenant: str, filters: ReconcileFilters) -> Any:
    """The tenant's attempts with an unknown or conflicting outcome the filter selects."""
    from runs.console.filters import AGES
    from runs.domain import effects
    from runs.models import EffectAttempt

    qs = EffectAttempt.objects.filter(run__tenant=tenant, status__in=effects.UNRESOLVED)
    qs = qs.filter(**filters.version.pinned_by_run("run__"))
    if filters.age:
        _, span, newer = AGES[filters.age]
        since = clock.now() - span
        qs = qs.filter(created_at__gte=since) if newer else qs.filter(created_at__lt=since)
    return qs


@dataclass(frozen=True)
class ReconcilePreview:
    filters: ReconcileFilters
    count: int
    sample: list[Any] = field(default_factory=list)


def reconcile_preview(*, tenant: str, query: Mapping[str, str]) -> ReconcilePreview:
    filters = ReconcileFilters.from_query(query)
    qs = unknown_effects_matching(tenant=tenant, filters=filters)
    sample = list(qs.select_related("run").order_by("-created_at", "-id")[:SAMPLE_SIZE])
    return ReconcilePreview(filters, qs.count(), sample)


def operation_start_reconcile(
    *, tenant: str, by_ref: str, query: Mapping[str, str], reason: str, confirm: str | int
) -> Operation:
    """Start a bulk reconcile: one item per unknown effect the filter selects, each later
    reconciled by its own key exactly as the recovery page's single action does."""
    reason = _clean_reason(reason)
    confirmed = _confirmed(confirm)
    filters = ReconcileFilters.from_query(query)
    qs = unknown_effects_matching(tenant=tenant, filters=filters)
    rows = qs.order_by("created_at", "id").values_list("run_id", "pk")
    return _start(
        tenant=tenant,
        by_ref=by_ref,
        kind=Kind.RECONCILE,
        filter_record={"page": "recovery", "query": filters.as_query()},
        reason=reason,
        confirmed=confirmed,
        rows=rows.iterator(chunk_size=2000),
    )


# -- incident: close a version's gate and cancel the runs waiting to dispatch it ---------
def runs_waiting_on_version(*, tenant: str, version: VersionFilter) -> Any:
    """The tenant's runs that pin ``version``, have not ended and recorded no dispatch yet
    (runs with an attempt keep their reconciliation obligation: the recovery page's)."""
    from runs.models import EffectAttempt

    if not version.capability_id:
        return Run.objects.none()
    return (
        Run.objects.filter(tenant=tenant, disposition="")
        .filter(**version.pinned_by_run())
        .exclude(pk__in=EffectAttempt.objects.values("run_id"))
    )


def _incident_version(query: Mapping[str, str]) -> VersionFilter:
    """The version an incident action names: a catalog version with an approval-gated
    effect (the only kind a gate stops)."""
    from catalog.models import CapabilityVersion

    version = VersionFilter.from_query(query)
    if not version.capability_id:
        raise OperationInputError("capability", "choose a capability version of the catalog")
    row = CapabilityVersion.objects.get(
        capability_id=version.capability_id, version=version.version
    )
    if not row.is_effect:
        raise OperationInputError(
            "capability", f"{row.ref} has no approval-gated effect; its gate would change nothing"
        )
    return version


def incident_preview(*, tenant: str, query: Mapping[str, str]) -> Preview:
    version = _incident_version(query)
    qs = runs_waiting_on_version(tenant=tenant, version=version)
    sample = list(qs.order_by("-created_at", "-id")[:SAMPLE_SIZE])
    return Preview(runs_selectors.RunFilters(world="all"), qs.count(), sample)


def operation_start_incident(
    *,
    tenant: str,
    user: Any,
    by_ref: str,
    query: Mapping[str, str],
    reason: str,
    confirm: str | int,
) -> Operation:
    """One audited step: close the tenant's effect gate of the version and, in the same
    transaction, start cancelling every run of the tenant waiting to dispatch it (typed count
    confirmed). The deployment-wide gate is the catalog admins' (issue 16): an operator's
    incident action stops their own tenant only."""
    from catalog import services as catalog_services

    reason = _clean_reason(reason)
    confirmed = _confirmed(confirm)
    version = _incident_version(query)
    qs = runs_waiting_on_version(tenant=tenant, version=version)

    def close_gate(operation: Operation) -> None:
        catalog_services.tenant_gate_set(
            capability_id=version.capability_id,
            version=version.version,
            tenant=tenant,
            open_gate=False,
            reviewer=user,
            reason=f"{reason} (operation {operation.short_id})",
        )
        _log(operation, "gate_closed", by_ref, {"capability": version.ref})

    return _start(
        tenant=tenant,
        by_ref=by_ref,
        kind=Kind.INCIDENT,
        filter_record={"page": "runbook", "query": {"capability": version.ref}},
        reason=reason,
        confirmed=confirmed,
        rows=((pk, "") for pk in qs.order_by("created_at", "id").values_list("pk", flat=True)),
        before_commit=close_gate,
    )
