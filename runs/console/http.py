"""What every console view of runs shares: the conflict page and the user's tenant."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from access.roles import tenant_of


def conflict(request: HttpRequest, message: str, *, back: str = "") -> HttpResponse:
    """The 409 page: the object changed or the request conflicts with its current state."""
    return render(request, "409.html", {"message": message, "back": back}, status=409)


def request_tenant(request: HttpRequest) -> str:
    tenant = tenant_of(request.user)
    if not tenant:
        raise Http404("No tenant")
    return tenant
