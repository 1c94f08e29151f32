"""Idempotent set-up shared by the demo command, the fault lab and tests."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.models import Membership
from access.roles import APPROVER, OPERATOR, ensure_groups
from catalog.services import catalog_sync
from catalog.world.fixtures import LIVE_NAMESPACE
from catalog.world.service import seed_world

FAULTLAB_NAMESPACE = "faultlab"
SYSTEM_USERS = (("faultlab-operator", (OPERATOR,)), ("faultlab-approver", (APPROVER,)))


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
        from access.demo import DEMO_PASSWORD, create_demo_users

        users = create_demo_users()
        report.append(
            f"demo users created: {', '.join(users) or 'none (already present)'}; "
            f"password {DEMO_PASSWORD!r}"
        )
    return report
