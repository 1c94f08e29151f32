"""Idempotent set-up shared by the demo command, the fault lab and tests."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.models import Membership
from access.roles import APPROVER, OPERATOR, ensure_groups
from catalog.services import catalog_sync
from sim.world.fixtures import LIVE_NAMESPACE
from sim.world.service import seed_world

FAULTLAB_NAMESPACE = "faultlab"
SYSTEM_USERS = (
    ("faultlab-operator", (OPERATOR,)),
    ("faultlab-approver", (APPROVER,)),
    # Two more approvers for the quorum fixtures (N distinct approvers of one hash).
    ("faultlab-approver-2", (APPROVER,)),
    ("faultlab-approver-3", (APPROVER,)),
)


def system_users() -> None:
    """Principals the fault lab acts as (no password: they cannot log in)."""
    ensure_groups()
    user_model = get_user_model()
    for username, roles in SYSTEM_USERS:
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        Membership.objects.update_or_create(user=user, defaults={"tenant": "north"})
        user.groups.set(Group.objects.filter(name__in=roles))


def seed(*, demo_users: bool = True) -> list[str]:
    report = []
    made = catalog_sync()
    report.append(f"catalog: {len(made)} capability versions stored")
    for namespace in (LIVE_NAMESPACE, FAULTLAB_NAMESPACE):
        report.append(f"world[{namespace}]: {seed_world(namespace)} inventory slots created")
    system_users()
    if demo_users:
        from sim.demo import DEMO_PASSWORD, create_demo_users

        users = create_demo_users()
        report.append(
            f"demo users created: {', '.join(users) or 'none (already present)'}; "
            f"password {DEMO_PASSWORD!r}"
        )
    return report


# The tenant the demo runs are made in (the demo users' ``north``).
DEMO_TENANT = "north"


def demo_runs() -> list[str]:
    """A few live runs so the console is not empty on first start (embedded demo only).

    One waits for approval, one completed (approved by ``approver``), one failed and one
    escalated. Each is a real run through the runner and authority; requires the demo users.
    """
    from approvals import services as approvals
    from approvals.models import Checkpoint
    from runs import services
    from runs.engine import runner

    user_model = get_user_model()
    operator = user_model.objects.get(username="operator")
    approver = user_model.objects.get(username="approver")

    def start(scenario: str) -> str:
        run = services.run_create(
            scenario=scenario,
            tenant=DEMO_TENANT,
            principal_ref="user:operator",
            requested_by=operator,
            start=False,
        )
        runner.advance(str(run.pk), worker="seed")
        return str(run.pk)

    report = []
    completed = start("reservation")
    checkpoint = Checkpoint.objects.get(run_id=completed, status=Checkpoint.Status.PENDING)
    approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=approver,
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="Demo: matches the manual and the depot stock.",
    )
    runner.advance(completed, worker="seed")
    for label, run_id in (
        ("completed", completed),
        ("failed", start("unavailable_tool")),
        ("escalated", start("denied_scope")),
        ("waiting for approval", start("reservation")),
    ):
        report.append(f"demo run {run_id[:8]}: {label}")
    return report
