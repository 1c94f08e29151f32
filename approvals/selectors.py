"""Approval reads: the queue of pending checkpoints, the decision history, the freshness of a
proposal's evidence.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, F, Q, QuerySet

from access.roles import APPROVER
from approvals.models import ApprovalVote, Checkpoint, Decision, DecisionRefusal
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
    assigned_to: Any = None,
    limit: int = QUEUE_LIMIT,
) -> list[Checkpoint]:
    """Pending checkpoints of the tenant, soonest expiry first; ``kind``, a run id range
    (see ``id_range``), the runs' world (``WORLDS``, live by default) and ``assigned_to``
    (a user: only checkpoints that user may still decide) narrow it. The
    (tenant, status, expires_at) index serves every form."""
    qs = Checkpoint.objects.filter(tenant=tenant, status=Checkpoint.Status.PENDING)
    qs = in_world(qs, world, field="run__namespace")
    if assigned_to is not None:
        qs = assigned(qs, assigned_to)
    if kind:
        qs = qs.filter(kind=kind)
    if run_ids is not None:
        qs = qs.filter(run_id__gte=run_ids[0], run_id__lte=run_ids[1])
    qs = qs.annotate(vote_count=Count("votes"))
    return list(qs.select_related("run").order_by("expires_at", "id")[:limit])


def questions_for(*, tenant: str, principal_ref: str, limit: int = QUEUE_LIMIT) -> QuerySet[Any]:
    """The clarifications of ``tenant`` waiting for ``principal_ref``'s answer, newest first:
    pending, not yet expired, and the one their run waits on (what ``clarification_answer``
    accepts). Only the run's requester may answer a clarification."""
    return (
        Checkpoint.objects.filter(
            tenant=tenant,
            status=Checkpoint.Status.PENDING,
            kind=Checkpoint.Kind.CLARIFICATION,
            requested_by_ref=principal_ref,
            expires_at__gt=clock.now(),
            run__waiting_checkpoint=F("pk"),
        )
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )


def assigned(qs: Any, user: Any) -> Any:
    """Narrow checkpoints to those ``user`` may still decide: eligible under the recorded
    policy (group and named users), not requested by them, not already approved by them."""
    from access.roles import principal_ref_of, roles_of

    me = principal_ref_of(user)
    groups = list(roles_of(user))
    qs = qs.filter(Q(eligible_group="") | Q(eligible_group__in=groups))
    return (
        qs.filter(Q(eligible_users=[]) | _names_user(qs, user.get_username()))
        .exclude(requested_by_ref=me)
        .exclude(votes__by_ref=me)
    )


def _names_user(qs: Any, username: str) -> Q:
    """Checkpoints whose named approvers include ``username``: a JSON containment lookup on
    PostgreSQL; SQLite (the embedded default) has none, so the few pending checkpoints that
    name users are matched here."""
    if connection.features.supports_json_field_contains:
        return Q(eligible_users__contains=[username])
    named = qs.exclude(eligible_users=[]).values_list("pk", "eligible_users")
    return Q(pk__in=[pk for pk, users in named if username in (users or [])])


@dataclass(frozen=True)
class QuorumView:
    """Who has approved a checkpoint so far and who still may."""

    quorum: int
    approved: list[ApprovalVote]
    still_may: list[str]

    @property
    def remaining(self) -> int:
        return max(0, self.quorum - len(self.approved))


def quorum_view(checkpoint: Checkpoint) -> QuorumView:
    votes = list(ApprovalVote.objects.filter(checkpoint=checkpoint).order_by("created_at", "id"))
    voted = {v.by_ref for v in votes}
    users = get_user_model().objects.filter(
        membership__tenant=checkpoint.tenant, groups__name=APPROVER
    )
    if checkpoint.eligible_group:
        users = users.filter(groups__name=checkpoint.eligible_group)
    if checkpoint.eligible_users:
        users = users.filter(username__in=list(checkpoint.eligible_users))
    still = sorted(
        ref
        for ref in (f"user:{u}" for u in users.values_list("username", flat=True).distinct())
        if ref not in voted and ref != checkpoint.requested_by_ref
    )
    open_ = checkpoint.status == Checkpoint.Status.PENDING
    return QuorumView(checkpoint.quorum, votes, still if open_ else [])


def delivery_log(*, tenant: str, limit: int = 200) -> list[Any]:
    """The tenant's latest notification deliveries, each with its attempts."""
    from django.db.models import Prefetch

    from approvals.models import Delivery, DeliveryAttempt

    return list(
        Delivery.objects.filter(tenant=tenant)
        .select_related("checkpoint")
        .prefetch_related(
            Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number"))
        )
        .order_by("-created_at", "-id")[:limit]
    )


HISTORY_LIMIT = 100


def decision_history(
    *,
    tenant: str,
    run_ids: tuple[uuid.UUID, uuid.UUID] | None = None,
    limit: int = HISTORY_LIMIT,
) -> tuple[list[Decision], list[Any]]:
    """The newest ``limit`` decisions and refused attempts of the tenant, each list on its
    own; a run id range (see ``id_range``) narrows both to those runs' checkpoints."""
    decisions = Decision.objects.filter(checkpoint__tenant=tenant)
    refusals = DecisionRefusal.objects.filter(checkpoint__tenant=tenant)
    if run_ids is not None:
        decisions = decisions.filter(
            checkpoint__run_id__gte=run_ids[0], checkpoint__run_id__lte=run_ids[1]
        )
        refusals = refusals.filter(
            checkpoint__run_id__gte=run_ids[0], checkpoint__run_id__lte=run_ids[1]
        )
    return (
        list(
            decisions.select_related("checkpoint", "checkpoint__run").order_by(
                "-created_at", "-id"
            )[:limit]
        ),
        list(refusals.select_related("checkpoint", "user").order_by("-created_at", "-id")[:limit]),
    )


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


def closed_effect_gates(checkpoint: Checkpoint) -> list[str]:
    """What stops the dispatch a pending approval would lead to, now: the effect gates of
    the run's pinned approval-gated versions that are closed (the deployment's, by catalog
    admins; the run's tenant's, by its operators). Validation step 8 denies the approved
    proposal then (``effect_gate_closed``, ``tenant_effect_gate_closed``): nothing is sent.
    Empty for a clarification, a decided checkpoint, or open gates."""
    if checkpoint.kind != Checkpoint.Kind.APPROVAL or checkpoint.status != (
        Checkpoint.Status.PENDING
    ):
        return []
    from runs.engine.inputs import capability_rules

    run = checkpoint.run
    closed = []
    for rule in capability_rules(run).values():
        if not rule.requires_approval:
            continue
        ref = f"{rule.id}@{rule.pinned.split('#')[0]}"
        if not rule.effect_gate_open:
            closed.append(f"the deployment effect gate of {ref} is closed (catalog admins)")
        elif not rule.tenant_gate_open:
            closed.append(
                f"the effect gate of {ref} is closed for tenant {run.tenant} (its operators)"
            )
    return closed
