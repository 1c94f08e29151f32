"""The console page where a user creates and revokes their own API tokens."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from access.roles import ROLES, require_role
from api import selectors
from api import tokens as token_services
from api.models import ApiToken
from kernel import clock


def _context(
    request: HttpRequest, page: selectors.TokenPage | None = None, **extra: Any
) -> dict[str, Any]:
    if page is None:
        page = selectors.token_page_for_user(user=request.user, now=clock.now())
    return {
        "tokens": page.rows,
        "page": page,
        "limit": token_services.MAX_ACTIVE_TOKENS,
        "lifetimes": token_services.LIFETIME_DAYS,
        "form": {"name": "", "lifetime_days": str(token_services.DEFAULT_LIFETIME_DAYS)},
        # One key per rendered form: the same form sent again creates no second token.
        "create_key": uuid.uuid4().hex,
        **extra,
    }


@require_safe
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *ROLES)
    older = request.GET.get("older") or None
    try:
        page = selectors.token_page_for_user(user=request.user, now=clock.now(), older=older)
    except selectors.NoSuchPage:
        error = (
            "That page of tokens does not exist: its link names no expired or revoked token "
            "of yours. Here are your newest tokens."
        )
        return render(request, "api/tokens.html", _context(request, error=error), status=400)
    return render(request, "api/tokens.html", _context(request, page))


@require_POST
@login_required
def tokens_create(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *ROLES)
    # The token remembers the key of the form that made it (a reload of the page showing
    # the secret sends its form again: the browser asks, the user agrees).
    key = request.POST.get("create_key", "")[:64]
    # What was typed comes back in the form after a refusal (a lifetime only if offered).
    lifetime = request.POST.getlist("lifetime_days")
    form = {
        "name": request.POST.get("name", ""),
        "lifetime_days": lifetime[0] if len(lifetime) == 1 else "",
    }
    try:
        # The fields in the form's order: the name's refusal first.
        token_services.token_name_clean(form["name"])
        days = token_services.lifetime_from_form(lifetime)
        row, secret = token_services.token_create(
            user=request.user, name=form["name"], lifetime_days=days, create_key=key
        )
    except token_services.TokenAlreadyCreated as made:
        error = (
            f"This form already created the token “{made.token.name}” "
            f"(fo_{made.token.prefix}_…); nothing was created again. A token is shown once: "
            "if you did not copy it, revoke it below and create another."
        )
        return render(request, "api/tokens.html", _context(request, error=error), status=409)
    except token_services.TokenError as exc:
        context = _context(request, error=str(exc), error_field=exc.field, form=form)
        return render(request, "api/tokens.html", context, status=400)
    # The secret is shown on this response only; it is never stored.
    return render(
        request,
        "api/tokens.html",
        _context(
            request,
            created=row,
            created_expires_utc=selectors.utc_text(row.expires_at),
            secret=secret,
        ),
        status=201,
    )


@require_POST
@login_required
def tokens_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        row = token_services.token_revoke(user=request.user, token_id=token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such token") from None
    # Said on the list the user comes back to (and by its live region, fieldops.js): the
    # list alone changed one badge, and someone at the top of the page heard nothing.
    messages.success(
        request,
        f"Token “{row.name}” (fo_{row.prefix}_…) revoked: the API refuses it from now on.",
    )
    return redirect("api-tokens")
