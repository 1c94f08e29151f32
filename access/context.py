from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from access.roles import APPROVER, CATALOG_ADMIN, OPERATOR, principal_ref_of, roles_of, tenant_of


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
    # Operators start runs, so the questions those runs ask are theirs to answer.
    ("approvals-questions", "Questions for you", (OPERATOR,)),
    ("approvals-queue", "Approvals", (APPROVER,)),
    ("recovery", "Recovery", (OPERATOR,)),
    ("operations-list", "Operations", (OPERATOR,)),
    # Catalog admins follow the drift runbook's review step.
    ("runbooks", "Runbooks", (OPERATOR, CATALOG_ADMIN)),
    ("faultlab", "Fault lab", (OPERATOR,)),
    ("catalog-index", "Catalog", ()),
    ("review-packet", "Review packet", ()),
)


# Past this many waiting questions the navigation says "99+" (it never counts them all).
QUESTIONS_SHOWN = 99


def _questions_badge(request: HttpRequest) -> str:
    """How many clarifications wait for this user's answer, for the menu ("" for none)."""
    from approvals.selectors import questions_for

    user = request.user
    tenant = tenant_of(user)
    if not tenant:
        return ""
    found = len(
        questions_for(
            tenant=tenant, principal_ref=principal_ref_of(user), limit=QUESTIONS_SHOWN + 1
        ).values_list("pk", flat=True)
    )
    if found > QUESTIONS_SHOWN:
        return f"{QUESTIONS_SHOWN}+"
    return str(found) if found else ""


def navigation(request: HttpRequest) -> dict[str, Any]:
    """The main menu: the pages this user's roles can use. The current page is the link
    whose address is the longest prefix of the path (Questions for you, not Approvals, on
    /approvals/questions/)."""
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
                "current": False,
                # Read only when a full page renders the menu (never for a partial).
                "badge": SimpleLazyObject(lambda: _questions_badge(request))
                if name == "approvals-questions"
                else "",
            }
        )
    matching = [
        link
        for link in links
        if (request.path.startswith(link["url"]) and link["url"] != "/")
        or request.path == link["url"]
    ]
    if matching:
        max(matching, key=lambda link: len(link["url"]))["current"] = True
    return {"nav_links": links}
