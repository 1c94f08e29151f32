"""An operation is the durable record of one bulk action: who started it, when, in which
tenant, the filter as it was, the reason, and one item per run it acts on. The review of a
conflicting effect is recorded the same way (one item, finished when it is recorded).

Items are materialised when the operation starts, so the set acted on is the set the
operator confirmed; each item is processed once (a cancel item's result is written in the
same transaction as its run's transition; a reconcile item's by compare-and-set on its
claim) and keeps its own result.
"""

from __future__ import annotations

import uuid

from django.db import models

from kernel.principals import PRINCIPAL_REF_MAX
from runs.models import Run

# The most a person may write as an operation's reason (the preview form's maxlength); a
# longer one is refused by the services, never cut.
REASON_MAX = 500


class Kind(models.TextChoices):
    CANCEL = "cancel", "cancel runs"
    RECONCILE = "reconcile", "reconcile unknown effects"
    INCIDENT = "incident", "close a version's gate and cancel its waiting runs"
    # One operator's decision on one conflicting effect (final: no reconciliation closes
    # it): recorded finished, its one item the attempt (``conflict_review``).
    REVIEW = "review", "mark a conflicting effect reviewed"


class Status(models.TextChoices):
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    FINISHED = "finished"


class ItemResult(models.TextChoices):
    PENDING = "", "pending"
    DONE = "done"
    REFUSED = "refused"
    ALREADY_TERMINAL = "already_terminal", "already terminal"


class Operation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.CharField(max_length=32)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    created_by = models.CharField(max_length=PRINCIPAL_REF_MAX)  # principal ref
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The filter as it was when the operation started: {"page": ..., "query": {...}}.
    filter = models.JSONField(default=dict)
    reason = models.CharField(max_length=REASON_MAX)
    # Counters, refreshed from the items after each batch (the items are the truth).
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    already_terminal = models.PositiveIntegerField(default=0)
    # The last time a worker took a batch or the operation was handed over: the sweeper
    # re-hands a running operation whose hand-over is older than its grace.
    kicked_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"], name="op_tenant_created")]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} ({self.status})"

    @property
    def short_id(self) -> str:
        return str(self.pk)[:8]

    @property
    def processed(self) -> int:
        return self.done + self.refused + self.already_terminal

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.processed)

    @property
    def percent(self) -> int:
        return 100 if not self.total else (100 * self.processed) // self.total

    @property
    def is_open(self) -> bool:
        """Running or paused: it may still act."""
        return self.status in (Status.RUNNING, Status.PAUSED)


class OperationItem(models.Model):
    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    # What the item acts on besides its run (an effect attempt id for a reconciliation).
    target = models.CharField(max_length=64, blank=True, default="")
    result = models.CharField(
        max_length=20, choices=ItemResult.choices, blank=True, default=ItemResult.PENDING
    )
    detail = models.CharField(max_length=300, blank=True, default="")
    processed_at = models.DateTimeField(null=True, blank=True)
    # A reconcile item's claim (a lease): the claimant's token, when the item was first
    # claimed and when the current claim expires. Cancel items are claimed by row lock.
    claimed_by = models.CharField(max_length=32, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["operation", "position"], name="op_item_position"),
        ]
        indexes = [
            models.Index(fields=["operation", "result", "position"], name="op_item_result"),
            # The reviews are looked up by their item's target (``operations.reviews``);
            # items without one (every cancel item) stay out of the index.
            models.Index(fields=["target"], name="op_item_target", condition=~models.Q(target="")),
        ]

    def __str__(self) -> str:
        return f"{self.operation_id}#{self.position} {self.result or 'pending'}"


class OperationEvent(models.Model):
    """The operation's audit record: started, paused, resumed, cancelled, finished."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=24)
    by = models.CharField(max_length=PRINCIPAL_REF_MAX)
    at = models.DateTimeField()
    detail = models.JSONField(default=dict)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.operation_id} {self.type} by {self.by}"


class SavedView(models.Model):
    """A named filter of the runs list, the recovery page or the approval queue, shared
    within its tenant by URL."""

    PAGES = (("runs", "Runs"), ("recovery", "Recovery"), ("approvals", "Approvals"))

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.CharField(max_length=32)
    page = models.CharField(max_length=16, choices=PAGES)
    name = models.CharField(max_length=80)
    query = models.JSONField(default=dict)
    created_by = models.CharField(max_length=PRINCIPAL_REF_MAX)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "page", "name"], name="saved_view_name"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.page}/{self.name}"
