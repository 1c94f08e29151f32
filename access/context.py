from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

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


# (URL name, label, roles that see it; empty = everyone signed in)
NAV: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("runs-list", "Runs", ()),
    ("approvals-queue", "Approvals", (APPROVER,)),
    ("recovery", "Recovery", (OPERATOR,)),
    ("operations-list", "Operations", (OPERATOR,)),
    ("runbooks", "Runbooks", (OPERATOR,)),
    ("faultlab", "Fault lab", (OPERATOR,)),
    ("catalog-index", "Catalog", ()),
    ("review-packet", "Review packet", ()),
)


def navigation(request: HttpRequest) -> dict[str, Any]:
    """The main menu: the pages this user's roles can use."""
    held = roles_of(getattr(request, "user", None))
    links = []
    for name, label, roles_needed in NAV:
        if roles_needed and not held & set(roles_needed):
            continue
        url = reverse(name)
        links.append(
            {
                "url": url,
                "label": label,
                "current": (request.path.startswith(url) and url != "/") or request.path == url,
            }
        )
    return {"nav_links": links}
