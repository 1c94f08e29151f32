"""Content-Security-Policy on every response: no inline script or style, no other origin.

A small middleware rather than django-csp: the console needs one fixed policy for every
page (no nonces, no per-view exceptions, no report endpoint), which is one header value;
a dependency would add configuration without adding protection. Every script and style
is a static file served from this origin (``static/``): templates carry no ``<script>``
or ``<style>`` blocks, no ``style=`` or ``on...=`` attributes and no ``javascript:`` URLs.

htmx 2 runs under it with ``<meta name="htmx-config">`` in ``base.html``: no indicator
``<style>`` injected (its rules are in ``fieldops.css``), no ``eval`` (hx-on, ``js:``
values and trigger filters stay unused) and no script tags run from swapped content.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"

DIRECTIVES: Mapping[str, str] = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "font-src": "'self'",
    "connect-src": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
    "object-src": "'none'",
}
POLICY = "; ".join(f"{name} {value}" for name, value in DIRECTIVES.items())


class ContentSecurityPolicyMiddleware:
    """Set ``POLICY`` on every response that does not carry its own policy."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault(HEADER, POLICY)
        return response
