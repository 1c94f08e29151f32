"""Operation writes: preview, start (materialise the items), process a batch, pause, resume,
cancel, and the sweep that re-hands a running operation whose worker died.

Every item is one ordinary authorized transition with its own result, and is acted on
exactly once whatever crashes:

- cancel items go in batches: one transaction claims up to ``BATCH_SIZE`` pending items
  (``FOR UPDATE SKIP LOCKED``), locks their runs, cancels them through the transition
  authority's own decision (``runs.services.run_cancel_many``, each run exactly as
  ``run_cancel`` cancels it) and records the items' results. A worker killed mid-batch
  leaves the batch untouched; the next claimant takes only unrecorded items.
- reconcile items are claimed one at a time by lease (claim token and deadline, committed),
  reconciled outside any transaction (a ledger lookup must not hold a lock), and recorded
  by compare-and-set on the claim; an expired claim is claimable again, and the
  reconciliation itself is idempotent on the attempt's status.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Count, Q

from fieldops import points
from fieldops.db import lock_wait_failed
from kernel import clock
from kernel.text import bidi_control_refusal, nothing_shown_note, shows_nothing
from operations import reviews
from operations.models import (
    REASON_MAX,
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

# Items per batch (FIELDOPS_OPERATION_BATCH_SIZE): a cancel batch is one transaction that
# holds its runs' rows until it commits (tens of milliseconds at this size); one Celery
# task per batch. A reconcile step takes at most RECONCILE_STEP items, each a ledger lookup,
# so a step stays well inside the task time limit.
BATCH_SIZE = 100
RECONCILE_STEP = 20
SAMPLE_SIZE = 10
# The most items one operation may hold (materialised in one transaction at start).
MAX_ITEMS = 200_000
# Drill points (sim/crashpoints.py): a reconcile item reconciled but not yet recorded; a
# cancel batch with every write done, before its commit; and just after that commit.
ITEM_POINT = "operation.item_applied"
BATCH_POINT = "operation.batch_written"
COMMITTED_POINT = "operation.batch_committed"
# PostgreSQL's SQLSTATE for a transaction aborted to break a deadlock.
DEADLOCK = "40P01"

log = logging.getLogger("fieldops.operations")


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


def _run_filters(query: Mapping[str, str]) -> runs_selectors.RunFilters:
    """The runs-list filter ``query`` for a bulk action. Raise OperationInputError for a
    value the list does not know: the list ignores it and shows more runs, a bulk action
    must not act on every run of the world because of a typo in a link."""
    filters = runs_selectors.RunFilters.from_query(query)
    kept = vars(filters)
    for key in runs_selectors.FILTER_KEYS:
        given = (query.get(key) or "").strip()
        if key != "q" and given and kept[key] != given:
            raise OperationInputError(
                key,
                f"unknown {key} {given[:40]!r}: the runs list ignores a value it does not "
                "know, a bulk action refuses it",
            )
    return filters


def cancel_preview(*, tenant: str, query: Mapping[str, str]) -> Preview:
    """How many of the tenant's runs the runs-list filter ``query`` selects, and a sample
    (newest first). Raise OperationInputError for an id search that is not hexadecimal or
    a filter value the list does not know."""
    filters = _run_filters(query)
    qs = _matching(tenant=tenant, filters=filters)
    sample = list(
        qs.order_by("-created_at", "-id").only("id", "scenario", "state", "created_at")[
            :SAMPLE_SIZE
        ]
    )
    return Preview(filters, qs.count(), sample)


def _clean_reason(reason: str) -> str:
    """The operation's reason as it will be recorded (stripped); raise OperationInputError
    when it is empty, longer than REASON_MAX (never cut: nothing is written then) or holds
    a bidirectional control character (``kernel.text``)."""
    reason = (reason or "").strip()
    if shows_nothing(reason):
        raise OperationInputError(
            "reason", f"an operation needs a reason{nothing_shown_note(reason)}"
        )
    if len(reason) > REASON_MAX:
        raise OperationInputError(
            "reason",
            f"an operation's reason may be at most {REASON_MAX} characters and this one has "
            f"{len(reason)}; nothing was changed. Shorten it and send it again",
        )
    refused = bidi_control_refusal(reason)
    if refused:
        raise OperationInputError(
            "reason", f"{refused}; nothing was changed. Remove it and send it again"
        )
    return reason


def _confirmed(confirm: str | int) -> int:
    try:
        return int(str(confirm).strip())
    except ValueError:
        raise OperationInputError(
            "confirm", "type the number of runs the preview showed to confirm"
        ) from None


def _previewed(previewed: str | int | None) -> int | None:
    """The count the preview showed (the form carries it), or None when not known."""
    try:
        return None if previewed is None else int(str(previewed).strip())
    except ValueError:
        return None


# What a refused confirmation did not do, per kind: (what is counted, what was not done).
NOT_DONE: Mapping[str, tuple[str, str]] = {
    Kind.CANCEL: ("run", "nothing was cancelled"),
    Kind.RECONCILE: ("unknown effect", "nothing was reconciled"),
    Kind.INCIDENT: ("run", "nothing was cancelled and the gate was not closed"),
    Kind.REVIEW: ("conflicting effect", "nothing was recorded"),
}


def count_mismatch(*, kind: str, total: int, confirmed: int, previewed: int | None) -> str:
    """Why a typed confirmation is refused, in words that say which of two things happened.

    When the operator typed exactly what the preview showed, the filter's set changed since
    then; otherwise (or when the form did not say what the preview showed) the typed number
    is simply not the count, and the message says so without suggesting the data moved.
    """
    if previewed is not None and previewed == confirmed:
        return (
            f"the filter now matches {total} item(s), not {confirmed}: "
            "preview again and confirm the new count"
        )
    noun, not_done = NOT_DONE[kind]
    counted = f"{total} {noun}{'' if total == 1 else 's'}"
    retype = f" Type {total} to confirm." if total else ""
    return (
        f"The number you typed ({confirmed}) does not match the {counted} this filter "
        f"matches: {not_done}.{retype}"
    )


def operation_start_cancel(
    *,
    tenant: str,
    by_ref: str,
    query: Mapping[str, str],
    reason: str,
    confirm: str | int,
    previewed: str | int | None = None,
) -> Operation:
    """Start a bulk cancel of the tenant's runs the filter ``query`` selects.

    The items are materialised now, in the transaction that records the operation, from the
    filter within ``tenant``; ``confirm`` must equal their number (what the preview showed),
    otherwise nothing is written. ``previewed`` is the count the preview showed, only to
    word a refusal (``count_mismatch``). Raise OperationInputError on bad input or a count
    that is not the current one.
    """
    reason = _clean_reason(reason)
    confirmed = _confirmed(confirm)
    filters = _run_filters(query)
    qs = _matching(tenant=tenant, filters=filters)
    run_ids = qs.order_by("created_at", "id").values_list("pk", flat=True)
    return _start(
        tenant=tenant,
        by_ref=by_ref,
        kind=Kind.CANCEL,
        filter_record={"page": "runs", "query": vars(filters)},
        reason=reason,
        confirmed=confirmed,
        previewed=_previewed(previewed),
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
    previewed: int | None,
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
            # A mistyped count, or a set that changed since the preview: act on nothing the
            # operator did not confirm.
            transaction.set_rollback(True)
            raise OperationInputError(
                "confirm",
                count_mismatch(kind=kind, total=total, confirmed=confirmed, previewed=previewed),
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

    A pause or cancel takes effect before the next batch (on PostgreSQL it waits for the
    batches in flight to commit: they hold the operation's row FOR KEY SHARE); items
    already processed keep their results. Raise Operation.DoesNotExist for another
    tenant's operation and OperationInputError for an action its status does not allow.
    """
    if action not in MOVES:
        raise OperationInputError("action", f"unknown action {action!r}")
    allowed, target = MOVES[action]
    with transaction.atomic():
        operation = Operation.objects.select_for_update().get(pk=operation_id, tenant=tenant)
        if operation.status not in allowed:
            # Who moved it there (another operator at the same moment, say), when.
            last = operation.events.order_by("-at", "-id").first()
            by = (
                f" ({last.type} by {last.by} at {last.at:%Y-%m-%d %H:%M:%S} UTC)"
                if last is not None and last.type in ("paused", "resumed", "cancelled")
                else ""
            )
            raise OperationInputError(
                "action", f"the operation is {operation.status}{by}: cannot {action}"
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


@dataclass(frozen=True)
class Step:
    """What one ``operation_step`` did: the operation's status after it, the items it
    claimed (0: none was claimable, all pending ones being held by other claimants or none
    left) and the items whose result it recorded."""

    status: str
    claimed: int = 0
    processed: int = 0


def _cancel_reason(operation: Operation) -> str:
    return f"{operation.reason} (operation {operation.short_id})"


def _cancel_outcome(result: run_services.CancelResult) -> Outcome:
    """An item's result from its run's cancellation (a single or a batched one)."""
    if result.applied:
        return ItemResult.DONE, result.qualification
    if is_terminal(result.run.state) and result.refusal != "busy":
        return ItemResult.ALREADY_TERMINAL, result.run.state
    return ItemResult.REFUSED, result.refusal or "refused"


def _cancel_batch(operation: Operation, batch_size: int) -> tuple[int, int]:
    """Claim up to ``batch_size`` pending items, cancel their runs and record the items'
    results, all in one transaction; return (items claimed, items recorded).

    Items are claimed ``FOR UPDATE SKIP LOCKED`` (another worker's batch takes others) and
    their runs locked the same way: an item whose run another transaction holds (a worker's
    step, a stalled transaction), or whose unsent dispatch record the send gate holds, is
    left pending and a later batch tries it again; it is never refused for being busy.
    The cancellations are ``run_cancel_many``: per run what ``run_cancel`` does, through
    the authority's own decision, in a few multi-row statements. A worker killed before
    the commit leaves every item of the batch untouched; after it, every one recorded.
    """
    with transaction.atomic():
        if not _holds_running(operation):
            return 0, 0
        items = list(
            OperationItem.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(operation=operation, result=ItemResult.PENDING)
            .order_by("position")
            .values_list("pk", "run_id")[:batch_size]
        )
        if not items:
            return 0, 0
        runs = run_services.runs_lock([run_id for _, run_id in items])
        outcomes: dict[int, Outcome] = {}
        asked: list[tuple[int, Run]] = []
        for item_id, run_id in items:
            run = runs.pop(str(run_id), None)  # pop: one item per run in a batch
            if run is None:
                continue  # held by another transaction (or a second item of the run): later
            if run.tenant != operation.tenant:
                outcomes[item_id] = (ItemResult.REFUSED, "other_tenant")
            elif is_terminal(run.state):
                outcomes[item_id] = (ItemResult.ALREADY_TERMINAL, run.state)
            else:
                asked.append((item_id, run))
        results = run_services.run_cancel_many(
            runs=[run for _, run in asked],
            by_ref=operation.created_by,
            reason=_cancel_reason(operation),
        )
        for item_id, run in asked:
            result = results[str(run.pk)]
            if result is not None:
                outcomes[item_id] = _cancel_outcome(result)
        _record(outcomes)
        # Drills only: a worker killed here loses the whole batch, never part of it.
        points.reach(BATCH_POINT, str(operation.pk))
    # Drills only: killed here, the batch stands and the next one starts from the items left.
    points.reach(COMMITTED_POINT, str(operation.pk))
    return len(items), len(outcomes)


def _holds_running(operation: Operation) -> bool:
    """Whether the operation is still running, asked inside a batch's transaction.

    On PostgreSQL the row is read ``FOR KEY SHARE`` and held until the batch commits: a
    pause or cancel (``operation_move`` takes the row ``FOR UPDATE``) waits for the batches
    in flight and no batch starts after it, while batches of several workers share the
    lock and the counters' updates (no key change) never wait for it.
    """
    if connection.vendor != "postgresql":
        return Operation.objects.filter(pk=operation.pk, status=Status.RUNNING).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT status FROM operations_operation WHERE id = %s FOR KEY SHARE", [operation.pk]
        )
        row = cursor.fetchone()
    return row is not None and row[0] == Status.RUNNING


def _record(outcomes: Mapping[int, Outcome]) -> None:
    """Write the items' results in the batch's transaction: one UPDATE per distinct
    outcome, each guarded on the item still being pending."""
    now = clock.now()
    groups: dict[Outcome, list[int]] = {}
    for item_id, outcome in outcomes.items():
        groups.setdefault(outcome, []).append(item_id)
    for (result, detail), ids in groups.items():
        updated = OperationItem.objects.filter(pk__in=ids, result=ItemResult.PENDING).update(
            result=result, detail=detail[:300], processed_at=now
        )
        if updated != len(ids):
            # The batch holds these items' locks: a recorded one would be a double claim.
            raise RuntimeError(f"{len(ids) - updated} item(s) were recorded by someone else")


# -- reconcile items: claimed by lease, reconciled outside any transaction ----------------
@dataclass(frozen=True)
class _Claim:
    item: OperationItem
    token: str
    # When the item's first claim began, if an earlier claim expired unrecorded.
    earlier: dt.datetime | None


def claim_lease() -> dt.timedelta:
    return dt.timedelta(seconds=float(getattr(settings, "FIELDOPS_OPERATION_CLAIM_SECONDS", 60)))


def _claim(operation: Operation) -> _Claim | None:
    """Claim the next pending item of a running operation by lease and commit the claim.

    The item is marked with a claim token and a deadline, so the reconciliation (a ledger
    lookup) runs outside any transaction and holds no lock; an item whose claim expired
    unrecorded (its claimant died or stalled past the lease) is claimable again.
    """
    now = clock.now()
    with transaction.atomic():
        if not _holds_running(operation):
            return None
        item = (
            OperationItem.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(operation=operation, result=ItemResult.PENDING)
            .filter(Q(claim_expires_at__isnull=True) | Q(claim_expires_at__lt=now))
            .order_by("position")
            .first()
        )
        if item is None:
            return None
        token = uuid.uuid4().hex
        OperationItem.objects.filter(pk=item.pk).update(
            claimed_by=token,
            claimed_at=item.claimed_at or now,
            claim_expires_at=now + claim_lease(),
        )
    return _Claim(item, token, item.claimed_at if item.claimed_by else None)


def _record_claimed(claim: _Claim, outcome: Outcome) -> int:
    """Record a claimed item's result by compare-and-set on the claim: only while the item
    is pending and the claim is still this one (a claimant whose lease expired and was
    claimed again records nothing: the new claimant does). Return 1 if recorded, else 0."""
    result, detail = outcome
    return OperationItem.objects.filter(
        pk=claim.item.pk, result=ItemResult.PENDING, claimed_by=claim.token
    ).update(result=result, detail=detail[:300], processed_at=clock.now(), claim_expires_at=None)


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


def _reconciled_by_earlier_claim(operation: Operation, claim: _Claim, outcome: Outcome) -> Outcome:
    """The outcome of an item claimed again after an earlier claim expired unrecorded.

    That claim may have reconciled the attempt and died before recording the item; this
    claim then finds the attempt already resolved. The run's history tells: an
    ``effect.reconciled`` of this attempt by the operation's principal since the earlier
    claim began makes the item done, as that claim would have recorded it.
    """
    from runs.domain.states import EventType
    from runs.models import EffectAttempt, Event

    if claim.earlier is None or outcome[0] != ItemResult.REFUSED:
        return outcome
    event = (
        Event.objects.filter(
            run_id=claim.item.run_id,
            type=EventType.EFFECT_RECONCILED.value,
            refs__attempt=claim.item.target,
            payload__by=operation.created_by,
        )
        .order_by("-sequence")
        .first()
    )
    if event is None or clock.parse(event.occurred_at) < claim.earlier:
        return outcome
    status = EffectAttempt.objects.values_list("status", flat=True).get(pk=claim.item.target)
    return ItemResult.DONE, f"reconciled: {status}"


def _reconcile_items(operation: Operation, batch_size: int) -> tuple[int, int]:
    """Claim, reconcile and record up to ``batch_size`` items one at a time; return (items
    claimed, items recorded). A pause or cancel takes effect before the next claim."""
    claimed = recorded = 0
    for _ in range(batch_size):
        claim = _claim(operation)
        if claim is None:
            break
        claimed += 1
        outcome = _apply_reconcile(operation, claim.item)
        outcome = _reconciled_by_earlier_claim(operation, claim, outcome)
        # Drills only: a worker killed here reconciled the item but recorded nothing.
        points.reach(ITEM_POINT, str(operation.pk))
        recorded += _record_claimed(claim, outcome)
    return claimed, recorded


# -- steps -------------------------------------------------------------------------------
def retry_pause() -> float:
    return float(getattr(settings, "FIELDOPS_OPERATION_RETRY_SECONDS", 0.5))


def batch_size_setting() -> int:
    return int(getattr(settings, "FIELDOPS_OPERATION_BATCH_SIZE", BATCH_SIZE))


def operation_step(*, operation_id: Any, batch_size: int | None = None) -> Step:
    """Process one batch of a running operation (cancel: one transaction of up to
    ``batch_size`` items, default ``FIELDOPS_OPERATION_BATCH_SIZE``; reconcile: up to
    ``RECONCILE_STEP`` of them, each claimed by lease).

    Refresh the counters from the items and finish the operation when nothing is pending.
    A paused, cancelled or finished operation (or an unknown id) is left as it is. When
    every item claimed waited on a run another transaction holds, pause briefly
    (``FIELDOPS_OPERATION_RETRY_SECONDS``) so the next try is not a tight loop.
    """
    operation = Operation.objects.filter(pk=operation_id).first()
    if operation is None or operation.status != Status.RUNNING:
        return Step(operation.status if operation else "missing")
    Operation.objects.filter(pk=operation.pk).update(kicked_at=clock.now())
    size = batch_size or batch_size_setting()
    if operation.kind == Kind.RECONCILE:
        claimed, processed = _reconcile_items(operation, min(size, RECONCILE_STEP))
    else:
        try:
            claimed, processed = _cancel_batch(operation, size)
        except OperationalError as exc:
            if not _waited_out(exc):
                raise
            # A lock wait gave up or a deadlock was broken: the batch rolled back whole.
            log.warning("operation batch rolled back; retried", extra={"operation": operation_id})
            claimed, processed = size, 0
    if claimed and not processed:
        time.sleep(retry_pause())
    return Step(_settle(operation), claimed, processed)


def _waited_out(exc: OperationalError) -> bool:
    return lock_wait_failed(exc) or getattr(exc.__cause__, "sqlstate", None) == DEADLOCK


def operation_advance(*, operation_id: Any, batch_size: int | None = None) -> str:
    """Process one batch of a running operation (``operation_step``); return its status."""
    return operation_step(operation_id=operation_id, batch_size=batch_size).status


def _settle(operation: Operation) -> str:
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
    if not counts.get(ItemResult.PENDING, 0):
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


def operation_drain(*, operation_id: Any, batch_size: int | None = None) -> str:
    """Process batches until the operation is no longer running, or until nothing is left
    that this caller can claim (the pending rest is held by other claimants, which finish
    it); return its status."""
    while True:
        step = operation_step(operation_id=operation_id, batch_size=batch_size)
        if step.status != Status.RUNNING or not step.claimed:
            return step.status


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

        age = (data.get("age") or "").strip()
        if age and age not in AGES:  # ignored, it would widen the action to every age
            raise OperationInputError("age", f"unknown age {age[:40]!r}; one of {list(AGES)}")
        return cls(VersionFilter.from_query(data), age)

    def as_query(self) -> dict[str, str]:
        return {k: v for k, v in {"capability": self.version.ref, "age": self.age}.items() if v}


def unknown_effects_matching(*, tenant: str, filters: ReconcileFilters) -> Any:
    """The tenant's attempts with an unknown or conflicting outcome the filter selects (a
    conflict an operator marked reviewed is no longer one)."""
    from runs.console.filters import AGES
    from runs.domain import effects
    from runs.models import EffectAttempt

    qs = EffectAttempt.objects.filter(run__tenant=tenant, status__in=effects.UNRESOLVED)
    qs = qs.exclude(pk__in=reviews.reviewed_conflict_ids())
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
    *,
    tenant: str,
    by_ref: str,
    query: Mapping[str, str],
    reason: str,
    confirm: str | int,
    previewed: str | int | None = None,
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
        previewed=_previewed(previewed),
        rows=rows.iterator(chunk_size=2000),
    )


# -- review: an operator's decision on a conflicting effect ------------------------------
class ReviewRefused(Exception):
    """The attempt cannot be marked reviewed as it is (not a conflict, or reviewed already):
    nothing was recorded."""


def conflict_review(*, attempt_id: str, tenant: str, by_ref: str, reason: str) -> Operation:
    """Mark one conflicting effect attempt of ``tenant`` reviewed, with the reason.

    A conflict (the ledger holds the key with another intent) is final: no reconciliation
    closes it, so the operator who compared the run's approved intent with the ledger
    record closes the obligation with this decision. It is recorded as a finished operation
    of one item (who, when, why); the run gets no event (the spec's event list has none
    for it) and neither the run nor the attempt changes. Raise OperationInputError for a
    reason that is empty, too long or unsafe, EffectAttempt.DoesNotExist for an attempt
    not of ``tenant``, ReviewRefused for an attempt that is not a conflict or was reviewed
    already; nothing is written then.
    """
    from runs.domain.effects import AttemptStatus
    from runs.models import EffectAttempt

    reason = _clean_reason(reason)
    # A drill point before the record is decided (two operators pressing at once).
    points.reach("operations.before_conflict_review", attempt_id)
    with transaction.atomic():
        # The attempt's row lock makes two reviews at once one after the other.
        attempt = (
            EffectAttempt.objects.select_for_update(of=("self",))
            .filter(run__tenant=tenant)
            .get(pk=attempt_id)
        )
        if attempt.status != AttemptStatus.CONFLICT:
            raise ReviewRefused(
                f"{attempt.pk} is {attempt.status}: only a conflict is marked reviewed (its "
                "outcome is final); reconcile this one with the ledger. Nothing was recorded"
            )
        earlier = reviews.conflict_reviews(attempt_ids=[attempt.pk]).get(attempt.pk)
        if earlier is not None:
            op = earlier.operation
            raise ReviewRefused(
                f"{attempt.pk} was already reviewed by {op.created_by} at "
                f"{op.created_at:%Y-%m-%d %H:%M:%S} UTC: {op.reason}. Nothing was recorded"
            )
        now = clock.now()
        operation = Operation.objects.create(
            tenant=tenant,
            kind=Kind.REVIEW,
            status=Status.FINISHED,
            created_by=by_ref,
            created_at=now,
            finished_at=now,
            filter={"page": "recovery", "query": {"attempt": attempt.pk}},
            reason=reason,
            total=1,
            done=1,
        )
        OperationItem.objects.create(
            operation=operation,
            position=0,
            run_id=attempt.run_id,
            target=attempt.pk,
            result=ItemResult.DONE,
            detail="conflict reviewed: it stays CONFLICT and the run stays escalated",
            processed_at=now,
        )
        _log(operation, "started", by_ref, {"total": 1, "filter": operation.filter})
        _log(operation, "finished", by_ref)
    return operation


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
    previewed: str | int | None = None,
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
        previewed=_previewed(previewed),
        rows=((pk, "") for pk in qs.order_by("created_at", "id").values_list("pk", flat=True)),
        before_commit=close_gate,
    )
