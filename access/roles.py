"""Roles and the few ``access_*`` helpers every view uses for authorization.

Views never decide access inline: they call these helpers, which answer 404 for objects
of another tenant (their existence is not disclosed) and 403 for a missing role.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied

APPROVER = "approver"
OPERATOR = "operator"
CATALOG_ADMIN = "catalog-admin"
ROLES = (APPROVER, OPERATOR, CATALOG_ADMIN)


def ensure_groups() -> None:
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def roles_of(user: Any) -> frozenset[str]:
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_fieldops_roles", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True))
        user._fieldops_roles = cached
    return cached


def has_role(user: Any, role: str) -> bool:
    return role in roles_of(user)


def has_any_role(user: Any, *roles: str) -> bool:
    return bool(roles_of(user) & set(roles))


def require_role(user: Any, *roles: str) -> None:
    """Raise PermissionDenied unless ``user`` holds one of ``roles``."""
    if not has_any_role(user, *roles):
        raise PermissionDenied(f"requires the {' or '.join(roles)} role")


def tenant_of(user: Any) -> str | None:
    membership = (
        getattr(user, "membership", None) if getattr(user, "is_authenticated", False) else None
    )
    return membership.tenant if membership else None


def principal_ref_of(user: Any) -> str:
    return f"user:{user.get_username()}"
