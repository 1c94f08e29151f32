"""The import page answers an over-limit request body with its own message.

Django refuses a form body above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` with a bare
"Bad Request (400)" (or its debug page) at the first read of ``request.POST``, which the
CSRF check makes before any view runs. This middleware runs after authentication and
before any view-level hook (``process_view`` hooks such as the CSRF check run later), so
for the import URL it can refuse by ``Content-Length`` without reading the body, or catch
Django's refusal of a body without one, and render the import page's refusal instead.
Nothing is read into a form and nothing is stored. A body that is not UTF-8 or cannot be
parsed is refused here too, through ``fieldops.middleware.form_body_refusal``, the same 400
page every form gets: this parse runs before that middleware's own.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from fieldops.middleware import form_body_refusal


class ImportBodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path_info == reverse("catalog-import"):
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        from catalog import views

        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        too_large = size > views.MAX_IMPORT_REQUEST_BYTES
        if not too_large:
            try:
                # Parse now, inside the guard, not in a later hook. A body that is not
                # UTF-8 or cannot be parsed is the console's 400 page, as on every form.
                refused = form_body_refusal(request)
            except RequestDataTooBig:
                too_large = True
            else:
                if refused is not None:
                    return refused
        if not too_large:
            return None
        # The body stays unread: later readers see an empty form, never a half-read one.
        request._mark_post_parse_error()  # type: ignore[attr-defined]
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return views.catalog_import_too_large(request, size or None)
