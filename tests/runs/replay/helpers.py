"""Snapshots used to prove that a replay mode wrote nothing it must not write."""

from __future__ import annotations

from typing import Any

from approvals.models import Checkpoint, Decision
from runs.models import EffectAttempt, Event, Evidence, Run
from sim.world.models import InventorySlot, LedgerEntry, ServiceRequest


def run_snapshot(run: Run) -> dict[str, Any]:
    """Everything stored about one run (its row, events, evidence, waits, effects)."""
    row = Run.objects.filter(pk=run.pk).values().get()
    return {
        "row": row,
        "events": list(Event.objects.filter(run=run).order_by("sequence").values()),
        "evidence": sorted(Evidence.objects.filter(run=run).values_list("pk", "content_hash")),
        "checkpoints": list(Checkpoint.objects.filter(run=run).order_by("pk").values()),
        "decisions": list(Decision.objects.filter(checkpoint__run=run).order_by("pk").values()),
        "attempts": list(EffectAttempt.objects.filter(run=run).order_by("pk").values()),
    }


def world_snapshot(namespace: str) -> dict[str, Any]:
    """The ledger, inventory and request log of one world namespace."""
    return {
        "ledger": list(LedgerEntry.objects.filter(namespace=namespace).order_by("pk").values()),
        "inventory": list(
            InventorySlot.objects.filter(namespace=namespace).order_by("pk").values()
        ),
        "requests": list(
            ServiceRequest.objects.filter(namespace=namespace).order_by("pk").values()
        ),
    }
