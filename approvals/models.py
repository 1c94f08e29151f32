"""Checkpoints (what exact decision a waiting run needs) and the decisions made on them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from kernel.principals import PRINCIPAL_REF_MAX


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
    # Indexed by ``checkpoint_run_created`` (a run's checkpoints in order), not alone.
    run = models.ForeignKey(
        "runs.Run", on_delete=models.PROTECT, related_name="checkpoints", db_index=False
    )
    tenant = models.CharField(max_length=32)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_by_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
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
    # Who may decide (recorded from the approval policy when the checkpoint opened).
    policy_name = models.CharField(max_length=80, blank=True, default="")
    eligible_group = models.CharField(max_length=150, blank=True, default="")
    eligible_users = models.JSONField(default=list, blank=True)
    quorum = models.PositiveSmallIntegerField(default=1)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "status", "expires_at"]),
            # A run's checkpoints, newest first, a page at a time (the run page shows the
            # latest few and links the rest).
            models.Index(fields=["run", "-created_at", "-id"], name="checkpoint_run_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} {self.status}"

    @property
    def eligibility(self) -> Any:
        from approvals.domain import Eligibility

        return Eligibility(
            policy=self.policy_name,
            group=self.eligible_group,
            usernames=tuple(self.eligible_users),
            quorum=self.quorum,
        )


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
    decided_by_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
    seen_hash = models.CharField(max_length=64, blank=True, default="")
    reason = models.CharField(max_length=1000)
    requested_change = models.JSONField(default=dict, blank=True)
    answer = models.CharField(max_length=1000, blank=True, default="")
    # Every approver whose approval made up the quorum, in the order they approved.
    approvers = models.JSONField(default=list, blank=True)
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


class ApprovalVote(models.Model):
    """One approver's approval of a checkpoint's exact hash; a quorum is N distinct ones."""

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    by_ref = models.CharField(max_length=PRINCIPAL_REF_MAX)
    seen_hash = models.CharField(max_length=64)
    reason = models.CharField(max_length=1000)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "by_ref"], name="one_vote_per_approver")
        ]

    def __str__(self) -> str:
        return f"{self.by_ref} approved {self.checkpoint_id}"


class ApprovalPolicy(models.Model):
    """Who may decide a capability's approvals in a tenant, and how many must agree.

    The most specific policy wins (an exact world before any, an exact effect class before
    any); without one, the tenant's approver role decides with one approval.
    """

    tenant = models.CharField(max_length=32)
    name = models.CharField(max_length=80)
    capability = models.CharField(max_length=64)
    effect_class = models.CharField(max_length=32, blank=True, default="")
    world = models.CharField(max_length=32, blank=True, default="")
    group = models.CharField(max_length=150, blank=True, default="")
    usernames = models.JSONField(default=list, blank=True)
    quorum = models.PositiveSmallIntegerField(default=1)
    quorum_min_quantity = models.PositiveSmallIntegerField(null=True, blank=True)
    quorum_part_ids = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="one_policy_name_per_tenant"),
            models.CheckConstraint(
                condition=models.Q(quorum__gte=1) & models.Q(quorum__lte=9), name="quorum_1_to_9"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name}"

    def rule(self) -> Any:
        from approvals.domain import PolicyRule

        return PolicyRule(
            name=self.name,
            capability=self.capability,
            effect_class=self.effect_class,
            world=self.world,
            group=self.group,
            usernames=tuple(self.usernames),
            quorum=self.quorum,
            quorum_min_quantity=self.quorum_min_quantity,
            quorum_part_ids=tuple(self.quorum_part_ids),
        )


class WebhookEndpoint(models.Model):
    """Where a tenant's approval notifications are posted, signed with ``secret``."""

    class Format(models.TextChoices):
        JSON = "json"
        SLACK = "slack"

    tenant = models.CharField(max_length=32)
    name = models.CharField(max_length=80)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSON)
    active = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name}"


class Delivery(models.Model):
    """One notification to deliver (the durable outbox row): written in the transaction
    that opened, decided or expired the checkpoint; a sender claims it, attempts it with
    backoff and records every attempt."""

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "PENDING"
        DELIVERED = "DELIVERED"
        FAILED = "FAILED"

    tenant = models.CharField(max_length=32)
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="deliveries")
    event = models.CharField(max_length=24)  # opened | expiring | decided | expired
    channel = models.CharField(max_length=8, choices=Channel.choices)
    target = models.CharField(max_length=500)  # an email address, or the endpoint's name
    endpoint = models.ForeignKey(WebhookEndpoint, null=True, on_delete=models.PROTECT)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "event", "channel", "target"], name="one_delivery_per_event"
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.channel} {self.target} {self.status}"


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    ok = models.BooleanField()
    status_code = models.PositiveSmallIntegerField(null=True)
    error = models.CharField(max_length=300, blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}: {'ok' if self.ok else 'failed'}"
