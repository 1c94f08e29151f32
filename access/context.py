from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from access.roles import APPROVER, CATALOG_ADMIN, OPERATOR, roles_of, tenant_of


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    held = roles_of(user)
    return {
        "user_roles": sorted(held),
        "user_tenant": tenant_of(user) if user is not None else None,
        "is_approver": APPROVER in held,
        "is_operator": OPERATOR in held,
        "is_catalog_admin": CATALOG_ADMIN in held,
    }
