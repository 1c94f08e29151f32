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


class Source(models.TextChoices):
    REVIEWED = "reviewed", "reviewed local contract"
    DISCOVERED = "discovered", "discovered definition (untrusted)"


class CapabilityVersion(models.Model):
    """A stored capability version.

    ``source=reviewed``: ``contract`` is a local reviewed contract (from catalog/
    capabilities) and ``digest`` its digest. ``source=discovered``: an imported tool
    definition; ``definition`` holds it verbatim, ``digest`` is its digest, ``version`` is
    named by that digest, and ``contract`` is empty until an admission maps it to a local
    reviewed contract (``local_contract_ref``). Discovered definitions never reach a model.
    """

    capability_id = models.CharField(max_length=64)
    version = models.CharField(max_length=32)
    digest = models.CharField(max_length=64)
    contract = models.JSONField()
    lifecycle = models.CharField(max_length=12, choices=Lifecycle.choices)
    # Closing the effect gate stops new effect dispatch while reads continue.
    effect_gate_open = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.REVIEWED)
    server = models.CharField(max_length=200, blank=True, default="")
    definition = models.JSONField(default=dict, blank=True)
    # Untrusted hints and reviewer flags found at import (shown, never enforced).
    discovery = models.JSONField(default=dict, blank=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    local_contract_ref = models.CharField(max_length=100, blank=True, default="")

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

    @property
    def discovered(self) -> bool:
        return self.source == Source.DISCOVERED

    @property
    def hints(self) -> dict[str, bool]:
        return dict(self.discovery.get("hints", {}))

    @property
    def effect_class(self) -> str:
        return str(self.contract.get("effect_class", "")) if self.contract else ""

    @property
    def is_effect(self) -> bool:
        """True when the effect gate means something (an approval-gated effect)."""
        return bool(self.contract.get("requires_approval")) if self.contract else False


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
    # What else the decision recorded: retirement inventory, import source, diff summary.
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.from_state}->{self.to_state}"
