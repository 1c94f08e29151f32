"""One value per field: a console form field or query parameter sent more than once is
refused, never read as its last value.

Django's ``QueryDict.get`` silently takes the last of a repeated field, so a form posting
``verdict=decline&verdict=approve`` (a crafted page, a script, a buggy client) would be read
as whichever came last: on a governance console that is an ambiguous decision.
``RejectRepeatedFieldMiddleware`` refuses, before any console view runs:

- a POST form field (or uploaded file) sent more than once;
- a query parameter given more than once (a list page's filter, a bulk action's selection).

Either is a 400 with the project's 400 page naming the field (an HTMX request gets the same
page, as for every 400: fieldops.js shows it as its alert card), and nothing is done. A view
whose field is legitimately multi-valued (the runs list's bulk selection ``run``) says so
with ``@repeatable("run")``; a view that records its input refusals (an approval decision,
a clarification's answer: SPEC §4, ``approvals.services``) says
``@repeated_fields_checked_by_view`` and checks the body itself with ``repeated_field``.
Under the JSON API (``/api/``) a repeated query parameter is a 400 in the API's error
shape, at ``/healthz`` and ``/metrics`` in theirs (``middleware.machine_error``); the API's
JSON bodies refuse repeated keys themselves, and the signed callback (CSRF-exempt) reads its
raw body itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.datastructures import MultiValueDict

from fieldops.middleware import (
    FORM_TYPES,
    bad_request_page,
    is_machine_endpoint,
    machine_error,
)
from kernel.text import field_name_shown

View = TypeVar("View", bound=Callable[..., Any])

REPEATABLE = "fieldops_repeatable_fields"
CHECKED_BY_VIEW = "fieldops_repeated_fields_checked_by_view"
BACK = "fieldops_refused_back_to"


def repeatable(*names: str) -> Callable[[View], View]:
    """Mark the POST fields of a view that may carry several values (a checkbox group)."""

    def mark(view: View) -> View:
        setattr(view, REPEATABLE, frozenset(names))
        return view

    return mark


def repeated_fields_checked_by_view(view: View) -> View:
    """Mark a view that checks its own POST body for repeated fields (to record the
    refusal); the middleware still refuses a repeated query parameter before it runs."""
    setattr(view, CHECKED_BY_VIEW, True)
    return view


def refused_back_to(url_name: str, label: str) -> Callable[[View], View]:
    """Mark the page a refused request of this view leads back to (default: the same
    address without its query): a bulk action's preview leads back to the list it acts on,
    not to a preview of everything."""

    def mark(view: View) -> View:
        setattr(view, BACK, (url_name, label))
        return view

    return mark


def repeated_field(params: MultiValueDict[str, Any], repeatable: Iterable[str] = ()) -> str | None:
    """The first field of ``params`` sent more than once that is not ``repeatable``."""
    allowed = frozenset(repeatable)
    for name, values in params.lists():
        if len(values) > 1 and name not in allowed:
            return str(name)
    return None


def repeated_field_message(name: str) -> str:
    return (
        f"The form sent the field {field_name_shown(name)} more than once; each field is sent "
        "once, so it was not read and nothing was done."
    )


def repeated_parameter_message(name: str) -> str:
    return (
        f"The address gives the parameter {field_name_shown(name)} more than once; each "
        "parameter takes one value, so the page was not read as either and nothing was done."
    )


def _is_form_post(request: HttpRequest) -> bool:
    return request.method == "POST" and request.content_type in FORM_TYPES


def request_refusal(request: HttpRequest, view: Any) -> HttpResponse | None:
    """The 400 page for a console request with a repeated query parameter or form field."""
    marked = getattr(view, BACK, None)
    back, label = (reverse(marked[0]), marked[1]) if marked else ("", "")
    name = repeated_field(request.GET)
    if name is not None:
        if not back and request.method in ("GET", "HEAD"):
            # The page without its query (a POST-only address would answer a 405).
            back, label = request.path, "Back to the page"
        return bad_request_page(
            repeated_parameter_message(name),
            hint="Open the page from its own links or filter form, which give each once.",
            back=back,
            back_label=label,
        )
    if not _is_form_post(request) or getattr(view, CHECKED_BY_VIEW, False):
        return None
    allowed = getattr(view, REPEATABLE, frozenset())
    name = repeated_field(request.POST, allowed)
    if name is None:
        name = repeated_field(request.FILES, allowed)
    if name is not None:
        return bad_request_page(
            repeated_field_message(name),
            hint="Reload the page and send its form again.",
            back=back,
            back_label=label,
        )
    return None


class RejectRepeatedFieldMiddleware:
    """A console request that repeats a query parameter or form field is a 400 (module doc).

    Runs as ``process_view`` after the CSRF and NUL checks (a request without a valid token
    is still the CSRF 403)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Any, args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if is_machine_endpoint(request):
            # The API, the signed callback, /healthz and /metrics refuse in their own format
            # (django-ninja would take the last of a repeated parameter). The API's JSON
            # bodies refuse repeated keys themselves; the callback reads its raw body.
            name = repeated_field(request.GET)
            if name is None:
                return None
            message = repeated_parameter_message(name)
            return machine_error(request, "invalid_request", message, 400)
        if getattr(view, "csrf_exempt", False):
            return None
        return request_refusal(request, view)
