"""Refuse input that no FieldOps field can hold, before any view sees it.

A NUL character cannot be stored in a PostgreSQL text or jsonb value (the query fails),
so a NUL anywhere in the path, the query string or a form field (names and values) is a
400, never a 500. The check runs as ``process_view`` after the CSRF check, so a request
without a valid token is still the CSRF 403. JSON bodies (the signed callback) are checked
by their endpoint after it authenticated them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

NUL = "\x00"


def _carries_nul(request: HttpRequest, *, forms: bool) -> bool:
    if NUL in request.path:
        return True
    for params in (request.GET, request.POST) if forms else (request.GET,):
        for key, values in params.lists():
            if NUL in key or any(NUL in value for value in values):
                return True
    return forms and any(NUL in (upload.name or "") for upload in request.FILES.values())


class RejectNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Any, args: Any, kwargs: Any
    ) -> HttpResponse | None:
        # A CSRF-exempt endpoint (the signed callback) reads its raw body itself and checks
        # it after authenticating it: parsing the body here would consume it.
        forms = not getattr(view, "csrf_exempt", False)
        if _carries_nul(request, forms=forms):
            return HttpResponseBadRequest(
                "NUL characters are not accepted in any field.", content_type="text/plain"
            )
        return None
