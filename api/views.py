"""The console page where a user creates and revokes their own API tokens."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

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


def _revoke_page(
    request: HttpRequest, token: ApiToken | None, *, status: int = 200, error: str = ""
) -> HttpResponse:
    """The confirmation of a revoke: the token, what stops working, Confirm and Cancel.
    ``token`` None: no token of the user has that id (404, nothing named)."""
    row = selectors.token_row(token, clock.now()) if token is not None else None
    context = {"row": row, "error": error}
    return render(request, "api/revoke.html", context, status=404 if row is None else status)


def _already_revoked(request: HttpRequest, token: ApiToken) -> HttpResponse:
    error = (
        f"Token “{token.name}” (fo_{token.prefix}_…) was already revoked at "
        f"{selectors.utc_text(token.revoked_at or clock.now())}; nothing changed."
    )
    return _revoke_page(request, token, status=409, error=error)


@require_safe
@login_required
def tokens_token(request: HttpRequest, token_id: int) -> HttpResponse:
    """``/api/tokens/<id>/``, trimmed from a token's revoke page: the tokens page, which
    lists the person's own tokens (and says nothing of whose this id is)."""
    require_role(request.user, *ROLES)
    return redirect("api-tokens")


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def tokens_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """GET: the confirmation page (the list's Revoke… leads here). POST: revoke, only with
    the confirmation that page's form sends (the token's public prefix)."""
    token = ApiToken.objects.filter(pk=token_id, user=request.user).first()
    if token is None:
        return _revoke_page(request, None)
    if token.revoked:
        return _already_revoked(request, token)
    if request.method != "POST":
        return _revoke_page(request, token)
    if request.POST.get("confirm") != token.prefix:
        error = (
            "Nothing was revoked: a revoke needs the confirmation below. Read which token it "
            "is and what stops working, then press Confirm, or Cancel."
        )
        return _revoke_page(request, token, status=400, error=error)
    try:
        token = token_services.token_revoke(user=request.user, token_id=token.pk)
    except token_services.TokenAlreadyRevoked as exc:  # revoked a moment ago elsewhere
        return _already_revoked(request, exc.token)
    except ApiToken.DoesNotExist:
        return _revoke_page(request, None)
    # Said on the list the user comes back to (and by its live region, fieldops.js): the
    # list alone changed one badge, and someone at the top of the page heard nothing.
    messages.success(
        request,
        f"Token “{token.name}” (fo_{token.prefix}_…) revoked: the API refuses it from now on.",
    )
    return redirect("api-tokens")
