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
