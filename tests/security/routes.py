"""Every route of the console, enumerated from the URL resolver (fieldops/urls.py and every
module it includes), and a request helper shared by the matrix, CSRF and crawl tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse


@dataclass(frozen=True)
class Route:
    name: str
    pattern: str  # the full pattern, for messages
    module: str  # the urls module it was declared in


def enumerate_routes() -> list[Route]:
    """Every URL pattern reachable from ROOT_URLCONF, with its full pattern and module; a
    namespaced pattern (the JSON API's) is named as ``reverse`` takes it (``ns:name``)."""
    found: list[Route] = []

    def walk(patterns: Any, prefix: str, module: str, namespace: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                included = getattr(entry.urlconf_module, "__name__", str(entry.urlconf_name))
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry.url_patterns, prefix + str(entry.pattern), included, inner)
            elif isinstance(entry, URLPattern):
                name = f"{namespace}{entry.name}" if entry.name else ""
                found.append(Route(name, prefix + str(entry.pattern), module))

    resolver = get_resolver()
    walk(resolver.url_patterns, "", str(resolver.urlconf_name), "")
    return found


def send(
    client: Client,
    method: str,
    name: str,
    kwargs: dict[str, Any],
    *,
    query: dict[str, str] | None = None,
    data: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """Send one request; an uncaught exception in the view comes back as a 500."""
    url = reverse(name, kwargs=kwargs or None)
    extra = dict(headers or {})
    call = getattr(client, method.lower())
    if method == "GET":
        return call(url, query or {}, **extra)
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    if method == "POST":
        return call(url, data or {}, **extra)
    return call(url, **extra)


def is_login_redirect(response: Any) -> bool:
    """Whether ``response`` sends the browser to the login page and discloses nothing: a
    302 there, or (to an HTMX request) an empty 200 whose ``HX-Redirect`` goes there."""
    login = reverse("login")
    if response.status_code == 302:
        return bool(response["Location"].startswith(login))
    return (
        response.status_code == 200
        and response.get("HX-Redirect", "").startswith(login)
        and not response.has_header("Location")
        and response.content == b""
    )
