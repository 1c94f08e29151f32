"""The console page where a user creates and revokes their own API tokens."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from access.roles import ROLES, require_role
from api import tokens as token_services
from api.models import ApiToken


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        "tokens": list(ApiToken.objects.filter(user=request.user).order_by("-created_at")),
        "limit": token_services.MAX_ACTIVE_TOKENS,
        **extra,
    }


@require_GET
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *ROLES)
    return render(request, "api/tokens.html", _context(request))


@require_POST
@login_required
def tokens_create(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *ROLES)
    try:
        row, secret = token_services.token_create(
            user=request.user, name=request.POST.get("name", "")
        )
    except token_services.TokenError as exc:
        return render(request, "api/tokens.html", _context(request, error=str(exc)), status=400)
    # The secret is shown on this response only; it is never stored.
    return render(
        request, "api/tokens.html", _context(request, created=row, secret=secret), status=201
    )


@require_POST
@login_required
def tokens_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token_services.token_revoke(user=request.user, token_id=token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such token") from None
    return redirect("api-tokens")
