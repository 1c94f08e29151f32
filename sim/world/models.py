"""Mutable state of the synthetic world: inventory, the authoritative effect ledger, and
the request log of the doubles. Every row carries a namespace: ``live`` for the console's
world, ``sim-<id>`` for an isolated execution simulation.
"""

from __future__ import annotations

from django.db import models


class InventorySlot(models.Model):
    namespace = models.CharField(max_length=64, default="live")
    slot_id = models.CharField(max_length=32)
    location_id = models.CharField(max_length=32)
    tenant = models.CharField(max_length=32)
    part_id = models.CharField(max_length=32)
    available = models.PositiveIntegerField()
    revision = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "slot_id"], name="world_slot_unique"),
        ]
        indexes = [models.Index(fields=["namespace", "location_id", "part_id"])]

    def __str__(self) -> str:
        return f"{self.slot_id} {self.part_id}x{self.available} @{self.location_id}"


class LedgerEntry(models.Model):
    """The authoritative record of a committed synthetic reservation, keyed by the
    semantic idempotency key. Same key + same intent returns this entry; same key +
    different intent is SAME_KEY_DIFFERENT_INTENT."""

    namespace = models.CharField(max_length=64, default="live")
    idempotency_key = models.CharField(max_length=64)
    intent_hash = models.CharField(max_length=64)
    effect_id = models.CharField(max_length=40)
    tenant = models.CharField(max_length=32)
    principal_ref = models.CharField(max_length=64)
    task_id = models.CharField(max_length=64)
    run_id = models.CharField(max_length=64)
    proposal_hash = models.CharField(max_length=64)
    part_id = models.CharField(max_length=32)
    slot_id = models.CharField(max_length=32)
    quantity = models.PositiveIntegerField()
    status = models.CharField(max_length=16, default="RESERVED")
    committed_at = models.DateTimeField()
    retain_until = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "idempotency_key"], name="world_ledger_key_unique"
            ),
            models.UniqueConstraint(fields=["effect_id"], name="world_ledger_effect_unique"),
        ]
        indexes = [models.Index(fields=["namespace", "run_id"])]

    def __str__(self) -> str:
        return f"{self.effect_id} {self.part_id}x{self.quantity} {self.slot_id}"


class LedgerFence(models.Model):
    """The highest fencing token the ledger has seen for one idempotency key.

    Raised (never lowered) by every commit and every reconciliation read of the key; a
    commit carrying a lower token is refused (FENCED). See ``runs/domain/effects.py``.
    """

    namespace = models.CharField(max_length=64, default="live")
    idempotency_key = models.CharField(max_length=64)
    token = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "idempotency_key"], name="world_fence_key_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.idempotency_key[:12]} >= {self.token}"


class ServiceRequest(models.Model):
    """Every request that reached a double, with the fault (if any) it met."""

    namespace = models.CharField(max_length=64, default="live")
    run_id = models.CharField(max_length=64, db_index=True)
    capability = models.CharField(max_length=48)
    call_index = models.PositiveIntegerField()
    operation = models.CharField(max_length=24, default="invoke")
    idempotency_key = models.CharField(max_length=64, blank=True, default="")
    args_digest = models.CharField(max_length=64)
    fault = models.CharField(max_length=48, blank=True, default="")
    outcome = models.CharField(max_length=48)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["namespace", "run_id", "capability"])]

    def __str__(self) -> str:
        return f"{self.capability}#{self.call_index} {self.outcome}"
