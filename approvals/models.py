"""Checkpoints (what exact decision a waiting run needs) and the decisions made on them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Checkpoint(models.Model):
    class Kind(models.TextChoices):
        APPROVAL = "approval"
        CLARIFICATION = "clarification"

    class Status(models.TextChoices):
        PENDING = "PENDING"
        APPROVED = "APPROVED"
        DECLINED = "DECLINED"
        ANSWERED = "ANSWERED"
        EXPIRED = "EXPIRED"
        CANCELLED = "CANCELLED"
        USED = "USED"

    id = models.CharField(primary_key=True, max_length=40)
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="checkpoints")
    tenant = models.CharField(max_length=32)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_by_ref = models.CharField(max_length=64)
    required_role = models.CharField(max_length=32)
    opened_sequence = models.PositiveIntegerField()
    # The exact proposal the approver sees, and the hash a decision must bind.
    proposal_hash = models.CharField(max_length=64, blank=True, default="")
    canonical = models.JSONField(default=dict)
    effect_summary = models.CharField(max_length=500, blank=True, default="")
    evidence_view = models.JSONField(default=list)
    idempotency_note = models.CharField(max_length=500, blank=True, default="")
    lost_response_note = models.CharField(max_length=500, blank=True, default="")
    compensation_note = models.CharField(max_length=500, blank=True, default="")
    data_crossing = models.JSONField(default=list)
    question = models.CharField(max_length=500, blank=True, default="")
    # A structured change the previous decision on this run asked for (shown to reviewers).
    prior_requested_change = models.JSONField(default=dict, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} {self.status}"


class Decision(models.Model):
    class Verdict(models.TextChoices):
        APPROVE = "APPROVE"
        DECLINE = "DECLINE"
        ANSWER = "ANSWER"

    checkpoint = models.OneToOneField(Checkpoint, on_delete=models.PROTECT, related_name="decision")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decided_by_ref = models.CharField(max_length=64)
    seen_hash = models.CharField(max_length=64, blank=True, default="")
    reason = models.CharField(max_length=1000)
    requested_change = models.JSONField(default=dict, blank=True)
    answer = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField()
    # Set in the same transaction as the effect's dispatch record.
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by_attempt = models.CharField(max_length=40, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.verdict} on {self.checkpoint_id}"


class DecisionRefusal(models.Model):
    """A decision attempt that was refused, with the reason shown to the person."""

    checkpoint = models.ForeignKey(
        Checkpoint, null=True, on_delete=models.PROTECT, related_name="refusals"
    )
    run = models.ForeignKey("runs.Run", null=True, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    code = models.CharField(max_length=40)
    seen_hash = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.code} by {self.user_id}"
