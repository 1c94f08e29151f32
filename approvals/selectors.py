"""Approval reads: the queue of pending checkpoints, the decision history, the freshness of a
proposal's evidence.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from approvals.models import Checkpoint, Decision, DecisionRefusal
from kernel import clock
from runs.console.filters import DEFAULT_WORLD, in_world

# -- approvals -------------------------------------------------------------------------
QUEUE_LIMIT = 200


def checkpoint_queue(
    *,
    tenant: str,
    kind: str = "",
    run_ids: tuple[uuid.UUID, uuid.UUID] | None = None,
    world: str = DEFAULT_WORLD,
    limit: int = QUEUE_LIMIT,
) -> list[Checkpoint]:
    """Pending checkpoints of the tenant, soonest expiry first; ``kind``, a run id range
    (see ``id_range``) and the runs' world (``WORLDS``, live by default) narrow it. The
    (tenant, status, expires_at) index serves every form."""
    qs = Checkpoint.objects.filter(tenant=tenant, status=Checkpoint.Status.PENDING)
    qs = in_world(qs, world, field="run__namespace")
    if kind:
        qs = qs.filter(kind=kind)
    if run_ids is not None:
        qs = qs.filter(run_id__gte=run_ids[0], run_id__lte=run_ids[1])
    return list(qs.select_related("run").order_by("expires_at", "id")[:limit])


def decision_history(*, tenant: str, limit: int = 100) -> tuple[list[Decision], list[Any]]:
    decisions = list(
        Decision.objects.filter(checkpoint__tenant=tenant)
        .select_related("checkpoint", "checkpoint__run")
        .order_by("-created_at", "-id")[:limit]
    )
    refusals = list(
        DecisionRefusal.objects.filter(checkpoint__tenant=tenant)
        .select_related("checkpoint", "user")
        .order_by("-created_at", "-id")[:limit]
    )
    return decisions, refusals


@dataclass(frozen=True)
class EvidenceAge:
    ref: str
    capability: str
    observed_at: dt.datetime | None
    age_s: int | None
    limit_s: int | None

    @property
    def fresh(self) -> bool | None:
        if self.limit_s is None or self.age_s is None:
            return None
        return self.age_s <= self.limit_s


def evidence_ages(checkpoint: Checkpoint) -> list[EvidenceAge]:
    now = clock.now()
    out = []
    for item in checkpoint.evidence_view:
        observed = clock.parse(item["observed_at"]) if item.get("observed_at") else None
        out.append(
            EvidenceAge(
                ref=item.get("ref", ""),
                capability=item.get("capability", "?"),
                observed_at=observed,
                age_s=int((now - observed).total_seconds()) if observed else None,
                limit_s=item.get("freshness_limit_s"),
            )
        )
    return out
