"""Stored capability versions with their digest and lifecycle, and the audited decisions
that moved them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Lifecycle(models.TextChoices):
    DISCOVERED = "DISCOVERED"
    ADMITTED = "ADMITTED"
    DEPRECATED = "DEPRECATED"
    RETIRED = "RETIRED"
    REJECTED = "REJECTED"
    DEFERRED = "DEFERRED"


class CapabilityVersion(models.Model):
    capability_id = models.CharField(max_length=64)
    version = models.CharField(max_length=32)
    digest = models.CharField(max_length=64)
    contract = models.JSONField()
    lifecycle = models.CharField(max_length=12, choices=Lifecycle.choices)
    # Closing the effect gate stops new effect dispatch while reads continue.
    effect_gate_open = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["capability_id", "version"], name="capability_version_unique"
            ),
        ]
        ordering = ["capability_id", "version"]

    def __str__(self) -> str:
        return f"{self.capability_id}@{self.version} {self.lifecycle}"

    @property
    def ref(self) -> str:
        return f"{self.capability_id}@{self.version}"


class LifecycleDecision(models.Model):
    """An audited lifecycle step or gate change, with reviewer and reason."""

    version = models.ForeignKey(
        CapabilityVersion, on_delete=models.PROTECT, related_name="decisions"
    )
    action = models.CharField(max_length=24)
    from_state = models.CharField(max_length=12)
    to_state = models.CharField(max_length=12)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewer_ref = models.CharField(max_length=64)
    reason = models.CharField(max_length=1000)
    admission = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.from_state}->{self.to_state}"
