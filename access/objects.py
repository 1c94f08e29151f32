"""Object access: every view fetches tenant-owned objects through these helpers.

Another tenant's object is a 404 (its existence is not disclosed); a missing role is 403.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404

from access.roles import require_role, tenant_of


def get_run_for_user(user: Any, run_id: Any, *roles: str) -> Any:
    """Return the run if ``user`` belongs to its tenant (and holds one of ``roles``)."""
    from runs.models import Run

    if roles:
        require_role(user, *roles)
    tenant = tenant_of(user)
    run = Run.objects.filter(pk=run_id, tenant=tenant).first() if tenant else None
    if run is None:
        raise Http404("No such run")
    return run


def checkpoint_readable_by(user: Any, checkpoint: Any) -> bool:
    """Whether ``user`` may open ``checkpoint``'s page (one of its tenant's): approvers
    read every checkpoint; a clarification is also its requester's to read and answer."""
    from access.roles import APPROVER, has_any_role, principal_ref_of
    from approvals.models import Checkpoint

    if has_any_role(user, APPROVER):
        return True
    return checkpoint.kind == Checkpoint.Kind.CLARIFICATION and (
        principal_ref_of(user) == checkpoint.requested_by_ref
    )


def get_checkpoint_for_user(user: Any, checkpoint_id: str, *roles: str) -> Any:
    from approvals.models import Checkpoint

    if roles:
        require_role(user, *roles)
    tenant = tenant_of(user)
    checkpoint = (
        Checkpoint.objects.select_related("run").filter(pk=checkpoint_id, tenant=tenant).first()
        if tenant
        else None
    )
    if checkpoint is None:
        raise Http404("No such checkpoint")
    return checkpoint
