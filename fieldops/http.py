"""Typed requests for the console's views: django-htmx's one idiom.

``HtmxMiddleware`` sets ``request.htmx`` on every request: falsy for a plain request, and
for an HTMX one it says which element asked (``request.htmx.target``). Views branch on it
and nothing else (no query flags, no ``getattr``).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class AuthedHtmxRequest(HtmxHttpRequest):
    """A request behind ``login_required``: ``user`` is an authenticated user."""

    user: Any


def declares_json(request: HttpRequest) -> bool:
    """Whether the request's body is declared JSON: ``application/json`` or a ``+json``
    type, with no charset or UTF-8 (JSON is UTF-8, RFC 8259). The JSON API and the signed
    callback read a body only when it is (a 415 otherwise): a browser page of another
    origin may send text/plain or a form without a preflight."""
    media_type = (request.content_type or "").lower()
    kind, _, subtype = media_type.partition("/")
    suffixed = subtype.endswith("+json") and len(subtype) > len("+json")
    if kind != "application" or not (subtype == "json" or suffixed):
        return False
    charset = str(request.content_params.get("charset", "utf-8")).lower()
    return charset in ("utf-8", "utf8")
