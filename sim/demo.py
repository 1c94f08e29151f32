"""Demo users for the embedded set-up only (created by ``manage.py seed_demo``)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.models import Membership
from access.roles import APPROVER, CATALOG_ADMIN, OPERATOR, ensure_groups

DEMO_PASSWORD = "fieldops-demo"  # noqa: S105 - documented demo credential, embedded only

DEMO_USERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("approver", "north", (APPROVER,)),
    ("operator", "north", (OPERATOR,)),
    ("catalog-admin", "north", (CATALOG_ADMIN,)),
    ("catalog-reviewer", "north", (CATALOG_ADMIN,)),
    ("lead", "north", (OPERATOR, APPROVER)),
    ("approver-south", "south", (APPROVER,)),
    ("operator-south", "south", (OPERATOR,)),
)


def create_demo_users(password: str = DEMO_PASSWORD) -> list[str]:
    ensure_groups()
    user_model = get_user_model()
    made = []
    for username, tenant, roles in DEMO_USERS:
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.save()
            made.append(username)
        Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
        user.groups.set(Group.objects.filter(name__in=roles))
    return made
