"""Saved views: a named filter of the runs list, the recovery page or the approval queue,
shared within the tenant by its URL (``/operations/views/<id>/`` opens the page with it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.http import urlencode

from kernel import clock
from kernel.canonical import unstorable
from kernel.text import bidi_control_refusal, nothing_shown_note, shows_nothing
from operations.models import SavedView
from operations.services import OperationInputError
from runs.console import runs_selectors

# page -> the URL name it opens and the query keys it keeps (paging cursors are dropped).
PAGES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "runs": ("runs-list", runs_selectors.FILTER_KEYS),
    "recovery": ("recovery", ("q",)),
    "approvals": ("approvals-queue", ("kind", "world", "q")),
}
NAME_MAX = 80
VALUE_MAX = 100


def saved_view_create(
    *, tenant: str, by_ref: str, page: str, name: str, query: Mapping[str, str]
) -> SavedView:
    """Name the filter ``query`` of ``page`` for the tenant. Raise OperationInputError for an
    unknown page, an empty, taken or unprintable name (a bidirectional control character
    is named: ``kernel.text``), a value with a NUL; unknown keys of the query are dropped."""
    if page not in PAGES:
        raise OperationInputError("page", f"views of {page[:20]!r} cannot be saved")
    name = (name or "").strip()
    if shows_nothing(name):
        raise OperationInputError(
            "name",
            f"a view needs a name of 1 to {NAME_MAX} characters{nothing_shown_note(name)}",
        )
    if len(name) > NAME_MAX:
        raise OperationInputError(
            "name",
            f"a view's name may be at most {NAME_MAX} characters and this one has {len(name)}",
        )
    refused = bidi_control_refusal(name, what="a view's name")
    if refused:
        raise OperationInputError("name", refused)
    if not name.isprintable():  # a line break, a tab, a right-to-left override, NUL
        raise OperationInputError("name", "a view's name must not contain control characters")
    keys = PAGES[page][1]
    kept = {k: str(v)[:VALUE_MAX] for k, v in query.items() if k in keys and v}
    # The query arrives percent-encoded inside one form field, so the request's own NUL
    # check never saw what it decodes to (``state=%00``): PostgreSQL cannot store it.
    problem = unstorable(kept)
    if problem:
        raise OperationInputError("query", f"this filter cannot be saved: {problem}")
    try:
        with transaction.atomic():
            return SavedView.objects.create(
                tenant=tenant,
                page=page,
                name=name,
                query=kept,
                created_by=by_ref,
                created_at=clock.now(),
            )
    except IntegrityError:
        raise OperationInputError("name", f"a view named {name!r} exists on this page") from None


def page_url(page: str, query: Mapping[str, str] | None = None) -> str:
    """The page whose views are saved as ``page``, with the keys of ``query`` it keeps;
    "/" for one whose views cannot be."""
    if page not in PAGES:
        return "/"
    url = reverse(PAGES[page][0])
    kept = sorted((k, str(v)) for k, v in (query or {}).items() if k in PAGES[page][1] and v)
    return f"{url}?{urlencode(kept)}" if kept else url


def saved_view_delete(*, view_id: Any) -> None:
    SavedView.objects.filter(pk=view_id).delete()


def saved_views_for(*, tenant: str) -> list[SavedView]:
    return list(SavedView.objects.filter(tenant=tenant).order_by("page", "name")[:50])


def saved_view_url(view: SavedView) -> str:
    """The page the view names, with its filter."""
    url = reverse(PAGES[view.page][0])
    return f"{url}?{urlencode(view.query)}" if view.query else url


def navigation(request: Any) -> dict[str, Any]:
    """Context processor: the tenant's saved views for the main navigation."""
    from access.roles import tenant_of

    user = getattr(request, "user", None)
    tenant = tenant_of(user) if user is not None else None
    if not tenant:
        return {"saved_views": []}
    from access.roles import principal_ref_of

    # Who saved a view deletes it (views.saved_views_delete): the menu offers them that.
    return {
        "saved_views": saved_views_for(tenant=tenant),
        "saved_views_by": principal_ref_of(user),
    }
