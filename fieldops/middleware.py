"""Refuse input that no FieldOps field can hold, before any view sees it; send an HTMX
request that needs a sign-in to the login page as a whole page.

A form body must be UTF-8: a form or multipart body that declares another charset
(``charset=utf-16``, an unknown or non-text codec) or cannot be parsed is a 400 with the
project's 400 page, before the CSRF check, which would otherwise fail parsing it (a 500
under DEBUG, whose error page parses it again). A middleware that reads a form body in
its ``__call__`` (before any ``process_view``; the catalog import's size limit does) parses
it through ``form_body_refusal``, the same refusal: Django's 400 and 500 handlers run the
CSRF check, which would parse a failed body again and escape to the server as a bare 500.

A NUL character cannot be stored in a PostgreSQL text or jsonb value (the query fails),
so a NUL anywhere in the path, the query string or a form field (names and values) is a
400 with the project's 400 page (under ``/api/``, the API's JSON error), never a 500. The
check runs as ``process_view`` after the CSRF check, so a request without a valid token is
still the CSRF 403. JSON bodies (the signed callback) are checked by their endpoint after it
authenticated them.

A method an address does not serve (a GET of a POST-only action) is a 405 that keeps its
``Allow`` header and says which methods the address accepts (``MethodNotAllowedMiddleware``).

A page address that htmx also fetches for a part of the page (a filtered list's table,
a run's live area) answers differently with and without the htmx headers: every answer
says so (``Vary``), or the browser's Back to an address htmx pushed showed its cached part
alone (``VaryOnHtmxMiddleware``).

A console request whose database connection broke under it is a 503 page that says the
database is unreachable (for an action, how to check whether it was recorded), with
Retry-After (``DatabaseUnavailableMiddleware`` for a view's failure, ``server_error`` for
one in a middleware step such as the session save); the API answers its own JSON 503.

Nothing answered to a signed-in person or to a request that carries credentials (an API
bearer token, the ops token) is kept by any cache: ``NoStoreWhenSignedInMiddleware`` makes
every such answer ``no-store, private`` (pages, htmx regions, JSON, exports), so Back after
Log out or after an action reloads the page instead of showing a run, a proposal or a
token from the browser's cache, and no shared proxy keeps a copy. Anonymous answers keep
their own caching.

A load balancer's or an orchestrator's probe reaches the process directly and names it by
its own address (a pod's IP, ``localhost:8000``), never by a name in ``ALLOWED_HOSTS``:
``GET /healthz`` answers such a request its liveness (``ProbeHostMiddleware``) instead of
Django's "Bad Request (400)"; every other address still refuses a host it does not serve.
"""

from __future__ import annotations

import codecs
import logging
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import (
    BadRequest,
    DisallowedHost,
    RequestDataTooBig,
    TooManyFieldsSent,
)
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    JsonResponse,
    QueryDict,
)
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render, resolve_url
from django.template import loader
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import defaults
from django_htmx.http import HttpResponseClientRedirect

from fieldops import db
from fieldops.http import HtmxHttpRequest

logger = logging.getLogger("fieldops.console")

NUL = "\x00"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def bad_request_page(
    message: str, *, hint: str = "", back: str = "", back_label: str = ""
) -> HttpResponse:
    """The project's 400 page (``templates/400.html``) with ``message``.

    ``hint`` replaces the advice about form bodies; ``back`` and ``back_label`` replace the
    link back to the runs list (a page link that is not valid leads back to its page)."""
    context = {"message": message, "hint": hint, "back": back, "back_label": back_label}
    return HttpResponseBadRequest(loader.render_to_string("400.html", context))


def _declared_charset(request: HttpRequest) -> str | None:
    """The charset a form body declares (None: none declared)."""
    params = getattr(request, "content_params", None) or {}
    charset = params.get("charset")
    return None if charset is None else str(charset)


def _is_utf8(charset: str) -> bool:
    """Whether ``charset`` is UTF-8 (or ASCII, its subset)."""
    try:
        return codecs.lookup(charset).name in ("utf-8", "ascii")
    except LookupError:
        return False


def form_body_refusal(request: HttpRequest) -> HttpResponse | None:
    """Parse a POST form body now; return the 400 page if it is not UTF-8 or unreadable.

    Return None when the request has no form body or it parsed. After a refusal the form
    counts as empty and is never parsed again: Django's own 400 and 500 handlers run the
    CSRF check, which reads ``request.POST``, and a second failing parse inside a handler
    escapes to the server as a bare 500. Every reader of a form body that runs before
    ``RejectUndecodableBodyMiddleware.process_view`` (a middleware's ``__call__``) must
    parse it through this function. ``RequestDataTooBig`` and the other size refusals
    propagate: Django answers them with a 400 and marks the form empty itself.
    """
    if request.method != "POST" or request.content_type not in FORM_TYPES:
        return None
    charset = _declared_charset(request)
    if charset is not None and not _is_utf8(charset):
        request._mark_post_parse_error()  # type: ignore[attr-defined]
        return bad_request_page(
            f"Form bodies must be UTF-8; this one declares charset {charset[:40]!r}."
        )
    try:
        request.POST  # noqa: B018 (parse once here, where a failure is a 400)
    except (BadRequest, MultiPartParserError, LookupError, ValueError):
        request._mark_post_parse_error()  # type: ignore[attr-defined]
        return bad_request_page("The form body could not be read.")
    return None


class RejectUndecodableBodyMiddleware:
    """A form body that is not UTF-8 or cannot be parsed is a 400 (see the module doc)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Any, args: Any, kwargs: Any
    ) -> HttpResponse | None:
        # The signed callback reads its raw body itself (parsing it here would consume it).
        if getattr(view, "csrf_exempt", False):
            return None
        return form_body_refusal(request)


def answers_json(request: HttpRequest) -> bool:
    """Whether ``request`` is for the JSON API, which answers errors in its own shape: every
    address under ``/api/`` but the API tokens pages, which are console pages."""
    return request.path.startswith("/api/") and not request.path.startswith(reverse("api-tokens"))


def _api_error(request: HttpRequest, code: str, message: str, status: int) -> JsonResponse:
    # The signed callback's errors are {"error", "message"}, the API's {"code", "message"}.
    key = "error" if request.path.startswith(reverse("api-callback")) else "code"
    return JsonResponse({key: code, "message": message}, status=status)


def is_machine_endpoint(request: HttpRequest) -> bool:
    """Whether a program, never a person, reads ``request``'s address: the JSON API and
    the signed callback, ``/healthz`` and ``/metrics``."""
    return answers_json(request) or request.path in (reverse("health"), reverse("metrics"))


def machine_error(
    request: HttpRequest, code: str, message: str, status: int
) -> HttpResponse | None:
    """The refusal of a machine endpoint in its own format, or None for a console page.

    A program reads these addresses, never a person: the JSON API and the signed callback
    (``_api_error``), ``/healthz`` (JSON, the API's ``{"code", "message"}``) and ``/metrics``
    (plain text, as its 401 is). A load balancer or a scraper that got the console's HTML
    400 page for an odd query (``/healthz?x=1&x=2``) could only log markup."""
    if request.path == reverse("metrics"):
        return HttpResponse(f"{message}\n", status=status, content_type="text/plain")
    if is_machine_endpoint(request):
        return _api_error(request, code, message, status)
    return None


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: under the JSON API an error in its shape (a mistyped address or a
    trailing slash answered the console's HTML page); elsewhere the console's 404 page."""
    if answers_json(request):
        path = request.path[:200]
        return _api_error(request, "not_found", f"The API has no address {path}.", 404)
    return defaults.page_not_found(request, exception)


def _connection_lost_answer(request: HttpRequest) -> HttpResponse | None:
    """The 503 answer when the exception being handled (an error handler runs inside its
    ``except``) is, or was raised from, a lost database connection; else None."""
    failure = sys.exc_info()[1]
    if not db.connection_lost_under(failure):
        return None
    logger.warning(
        "database connection lost: %s %s", request.method, request.path, exc_info=failure
    )
    message = (
        "The connection to the database was lost while answering; the request may "
        "or may not have taken effect: read the object again before you retry."
    )
    response = machine_error(request, "database_unavailable", message, 503)
    if response is None:
        return database_unavailable_page(request)
    response["Retry-After"] = str(db.RETRY_AFTER_SECONDS)
    return response


def _machine_bad_request(request: HttpRequest, exception: Exception) -> HttpResponse | None:
    """A machine endpoint's 400 in its own format (``machine_error``), or None: a query of
    more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` parameters, a body over the size limit."""
    if isinstance(exception, RequestDataTooBig):
        message = (
            f"The request is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
            "accepted, so nothing was done."
        )
    elif isinstance(exception, TooManyFieldsSent):
        message = (
            f"The request sends more than the {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} "
            "fields or parameters accepted, so nothing was done."
        )
    else:
        message = "The request could not be read, so nothing was done."
    return machine_error(request, "invalid_request", message, 400)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: Django's 400 page, but the 503 when the bad request was made of a
    lost connection: a session whose save failed that way is ``SessionInterrupted`` (a
    400 saying nothing was changed) although the view's action may have committed."""
    lost = _connection_lost_answer(request)
    if lost is not None:
        return lost
    machine = _machine_bad_request(request, exception)
    if machine is not None:
        return machine
    # Django's size refusals of a body: say which limit, not that it could not be read.
    if isinstance(exception, RequestDataTooBig):
        return bad_request_page(
            "The request is larger than the "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes the console accepts, so nothing "
            "was done.",
            hint="Shorten what you typed or pasted and send it again.",
        )
    if isinstance(exception, TooManyFieldsSent):
        return bad_request_page(
            "The form sends more than the "
            f"{settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields the console accepts, so "
            "nothing was done.",
            hint="Reload the page and send its form again.",
        )
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: under the JSON API an error in its shape, nothing of the failure
    (it is logged); elsewhere the console's 500 page.

    A lost database connection is the 503 here too: ``DatabaseUnavailableMiddleware`` sees
    only what a view raised, while Django turns a failure of a middleware step (the session
    saved in ``SessionMiddleware.process_response``, after the view committed its action)
    into this handler's answer (or ``bad_request``'s), called inside that exception's
    handler."""
    lost = _connection_lost_answer(request)
    if lost is not None:
        return lost
    message = (
        "The server failed while answering; the request may or may not have taken "
        "effect: read the object again before you retry."
    )
    machine = machine_error(request, "server_error", message, 500)
    return machine if machine is not None else defaults.server_error(request)


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
            message = "NUL characters are not accepted in any field."
            # A machine endpoint (the API, the callback, /healthz, /metrics) in its format.
            machine = machine_error(request, "invalid_request", message, 400)
            return machine if machine is not None else bad_request_page(message)
        return None


def _page_to_return_to(request: HttpRequest, current: str | None) -> str | None:
    """The path and query of the page the browser shows (``HX-Current-URL``, or a form
    post's ``Referer``), or None when there is none or it names another origin (a login
    must never lead off-site)."""
    if not current:
        return None
    parts = urlsplit(current)
    if parts.scheme != request.scheme or parts.netloc != request.get_host():
        return None
    page = urlunsplit(("", "", parts.path or "/", parts.query, ""))
    # "//host/..." as a path would read as another origin once it stands alone.
    if not url_has_allowed_host_and_scheme(page, allowed_hosts={request.get_host()}):
        return None
    return page


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """The CSRF refusal (``CSRF_FAILURE_VIEW``): the project's 403 page, with a link back
    to the page the form was on (``HX-Current-URL`` or ``Referer``, same origin only), so
    the person can reload it and send the form again."""
    current = request.headers.get("HX-Current-URL") or request.headers.get("Referer")
    context = {"back": _page_to_return_to(request, current)}
    return HttpResponseForbidden(loader.render_to_string("403_csrf.html", context))


def _login_url(login_path: str, page: str | None) -> str:
    if page is None:
        return login_path
    query = QueryDict(mutable=True)
    query["next"] = page
    return f"{login_path}?{query.urlencode(safe='/')}"


def _is_login_redirect(response: HttpResponse, login_path: str) -> bool:
    if response.status_code not in (301, 302, 303, 307, 308):
        return False
    return urlsplit(response.get("Location", "")).path == login_path


class HeadWithoutBodyMiddleware:
    """Send a HEAD answer's headers (the GET's: status, type, length) without its body.

    Views answer HEAD as GET (RFC 9110 §9.3.2: the same headers, no content), and the WSGI
    server is left to drop the body: gunicorn does, but logs a warning for every such
    answer, so an uptime monitor's HEAD every few seconds filled the web log. Outermost:
    every other middleware has finished with the answer (its ``Content-Length`` stays the
    GET's, as the RFC allows).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.method != "HEAD":
            return response
        if response.streaming:
            response.streaming_content = []  # an export's rows are never read
        else:
            response.content = b""
        return response


class VaryOnHtmxMiddleware:
    """Add ``Vary: HX-Request, HX-Target`` to every answer.

    The console's views answer an htmx request for a region with that region alone, at
    the page's own address (the filter forms push it into the history). Without ``Vary``
    the browser's cache keeps one answer per address: Back to a filtered list from a page
    opened from it showed the cached table alone, without the page around it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        patch_vary_headers(response, ("HX-Request", "HX-Target"))
        return response


def _signed_in(request: HttpRequest) -> bool:
    """Whether ``request`` carries credentials (an ``Authorization`` header) or a session
    of a signed-in user. Without a session cookie the user is not read (an anonymous
    visitor's answer then needs no session lookup and gains no ``Vary: Cookie``)."""
    if "HTTP_AUTHORIZATION" in request.META:
        return True
    user = getattr(request, "user", None)  # absent if refused before AuthenticationMiddleware
    if user is None or settings.SESSION_COOKIE_NAME not in request.COOKIES:
        return False
    return bool(user.is_authenticated)


class NoStoreWhenSignedInMiddleware:
    """Mark every answer to a signed-in user or to a request with credentials uncacheable
    (``Cache-Control: no-store, private`` and the rest of Django's ``never_cache``).

    One place instead of a decorator per view: Back after an action or after Log out
    reloads the page (the current state, a fresh one-time key, no spent decision form);
    the token page's secret, a run's export or a proposal stays in no cache. Placed after
    WhiteNoise (static files keep their caching) and outside the session middleware.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if _signed_in(request):
            add_never_cache_headers(response)
        return response


SESSION_ENDED_MESSAGE = (
    "Your session had ended, so what you sent was not applied. Sign in, then send it again."
)


class HtmxLoginRedirectMiddleware:
    """An HTMX request that would be redirected to the login page (its session expired, or
    the user logged out in another tab) gets an empty 200 with ``HX-Redirect`` instead.

    htmx follows a plain 302 inside the XHR and would swap the whole login page into the
    region that asked; ``HX-Redirect`` makes the browser navigate to the login page, whose
    ``next`` is the page the user was on, so signing in returns there. A request without
    HTMX keeps the normal redirect; for a form post (any method but GET and HEAD) its
    ``next`` is the page the form was on (``Referer``, same origin only), not the
    POST-only action address. Either way a request sent without a session (not Log out)
    leaves a message for the login page: what it sent was not applied. Must come after
    ``HtmxMiddleware`` (it reads ``request.htmx``) and messages, and before anything that
    answers with a login redirect.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HtmxHttpRequest) -> HttpResponse:
        # Read before the view: Log out is a post from a session its view then ends.
        sent_signed_out = request.method not in ("GET", "HEAD") and not (
            request.user.is_authenticated
        )
        response = self.get_response(request)
        login_path = resolve_url(settings.LOGIN_URL)
        if not _is_login_redirect(response, login_path):
            return response
        if sent_signed_out:
            # The login page says why it is there: the person pressed a button and would
            # otherwise take the sign-in for the answer (MessageMiddleware keeps it in a
            # cookie, which the sign-in does not reset).
            messages.warning(request, SESSION_ENDED_MESSAGE)
        if request.htmx:
            page = _page_to_return_to(request, request.htmx.current_url)
            return HttpResponseClientRedirect(_login_url(login_path, page))
        if request.method in ("GET", "HEAD"):
            return response
        # A form posted from a page whose session ended: its ``next`` would be the
        # POST-only action address, which answers a 405 after the sign-in. Return to the
        # page the form was on instead (nothing was applied; it shows the current state).
        response["Location"] = _login_url(
            login_path, _page_to_return_to(request, request.headers.get("Referer"))
        )
        return response


def _methods_text(methods: list[str]) -> str:
    """``["GET", "POST"]`` as "GET and POST" (three or more: "GET, POST and PUT")."""
    if len(methods) < 2:
        return "".join(methods)
    return f"{', '.join(methods[:-1])} and {methods[-1]}"


def _not_allowed_message(request: HttpRequest, allowed: list[str]) -> str:
    method = (request.method or "")[:20]
    if not allowed:
        return f"This address does not accept {method}."
    return f"This address accepts {_methods_text(allowed)} only, not {method}."


class MethodNotAllowedMiddleware:
    """Give a 405 a body that says which methods the address accepts.

    ``require_POST`` / ``require_http_methods``, a view's own refusal and django-ninja all
    answer a method they do not serve with a bare 405 and an ``Allow`` header. The status
    and ``Allow`` header stay; the body becomes, under the JSON API, the API's error
    (``{"code", "message"}``, the signed callback's ``{"error", "message"}``), and anywhere
    else the console's 405 page. The API tokens pages live under ``/api/`` but are console
    pages. An HTMX request gets the page too, as the 400, 403 and 404 pages are served: the
    console has no error fragment (htmx swaps no 4xx answer; fieldops.js gives focus back
    to the control). A 405 that already carries JSON is left as it is.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.streaming:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        allow = response.get("Allow")
        allowed = sorted({m.strip().upper() for m in (allow or "").split(",") if m.strip()})
        message = _not_allowed_message(request, allowed)
        page: HttpResponse | None = machine_error(request, "method_not_allowed", message, 405)
        if page is None:
            context = {
                "allowed": _methods_text(allowed),
                "method": (request.method or "")[:20],
            }
            page = render(request, "405.html", context, status=405)
        if allow is not None:
            page["Allow"] = allow
        return page


def database_unavailable_page(request: HttpRequest) -> HttpResponse:
    """The console's 503 page (``templates/503.html``) for a request whose database
    connection broke: rendered without the request's context (its context processors read
    the database), with a link back to the page the request came from and Retry-After."""
    current = request.headers.get("HX-Current-URL") or request.headers.get("Referer")
    context: dict[str, Any] = {"back": _page_to_return_to(request, current) or ""}
    # A read (GET, HEAD) changed nothing: its page only says it could not be loaded. Any
    # other method is an action that may or may not have been recorded before the break.
    context["action"] = request.method not in ("GET", "HEAD")
    # A page read (not an action: reloading that may send it twice) is offered again.
    asked = request.get_full_path()
    if (
        request.method == "GET"
        and not request.headers.get("HX-Request")
        and asked.startswith("/")
        and url_has_allowed_host_and_scheme(asked, allowed_hosts={request.get_host()})
    ):
        context["retry"] = asked
        if context["back"] == asked:
            context["back"] = ""
    response = HttpResponse(loader.render_to_string("503.html", context), status=503)
    response["Retry-After"] = str(db.RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware:
    """A console view that raised because its database connection broke (``db.
    connection_lost``: a restart, a failover, a terminated backend) answers the 503 page
    instead of the generic 500: whether an action was recorded before the break is unknown,
    and the page says how to check before retrying. One whose lock wait gave up
    (``db.lock_wait_failed``) answers the 409 page: the database answered and nothing of
    the statement that waited was written. An HTMX request gets the same page: htmx
    swaps no error answer, and fieldops.js shows its alert card above the content (as for
    the 400, 403, 404 and 409 pages). The API (``/api/``) answers its own JSON 503.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if answers_json(request):
            return None
        if db.lock_wait_failed(exception):
            # Not a lost connection: a lock another transaction held (a stalled worker's
            # dispatch, a colleague's long action) outlasted lock_timeout, and the statement
            # that waited wrote nothing. The 409 page says so, not "may have been recorded".
            logger.warning("lock wait gave up: %s %s", request.method, request.path)
            current = request.headers.get("HX-Current-URL") or request.headers.get("Referer")
            back = _page_to_return_to(request, current) or ""
            context = {"message": db.BUSY_MESSAGE, "back": back}
            response = render(request, "409.html", context, status=409)
            response["Retry-After"] = str(db.RETRY_AFTER_SECONDS)
            return response
        if not db.connection_lost(exception):
            return None
        logger.warning(
            "database connection lost: %s %s", request.method, request.path, exc_info=exception
        )
        return database_unavailable_page(request)


class ProbeHostMiddleware:
    """``GET``/``HEAD /healthz`` with a ``Host`` outside ``ALLOWED_HOSTS`` (a probe that
    addresses the process directly) gets the liveness report anyone gets: no counts (the
    ops token and a session open them only at the console's address), nothing else of the
    site. Placed before every middleware that validates the host (CommonMiddleware)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info != "/healthz" or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        try:
            request.get_host()
        except DisallowedHost:
            return self._liveness(request)
        return self.get_response(request)

    @staticmethod
    def _liveness(request: HttpRequest) -> HttpResponse:
        from django.contrib.auth.models import AnonymousUser

        from runs.api import health

        request.META.pop("HTTP_AUTHORIZATION", None)
        request.__dict__.pop("headers", None)  # HttpRequest.headers is a cached property
        request.user = AnonymousUser()
        response = health(request)
        if request.method == "HEAD":
            response.content = b""
        return response
