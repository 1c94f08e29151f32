"""HEAD is served wherever GET is (RFC 9110 §9.1: every general-purpose server supports
GET and HEAD): the same status and headers as the GET, no body. Uptime monitors and link
checkers send HEAD; a 405 there reads as "the page is down" (found over real HTTP: every
console page and ``/healthz`` answered HEAD with 405 ``Allow: GET``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from api.tokens import token_create
from tests.security.policy import POLICY, objects_for, url_kwargs
from tests.security.world import World

pytestmark = pytest.mark.django_db

# One principal per role set that reads every page: the north lead (operator and
# approver), the catalog admin.
READERS = ("lead", "catalog_admin")


def _get_routes(*, api: bool = False) -> list[str]:
    """The console's routes that answer GET (``api``: the JSON API's, which need a token)."""
    return sorted(
        name
        for name, rule in POLICY.items()
        if "GET" in rule.may and name.startswith("api-v1:") == api
    )


def test_every_page_served_to_get_answers_head_the_same_without_a_body(sworld: World) -> None:
    clients: dict[str, Client] = {p: sworld.client(p) for p in READERS}
    clients["anonymous"] = Client()
    mismatches: list[str] = []
    for name in _get_routes():
        rule = POLICY[name]
        for obj in objects_for(sworld, rule.objects):
            url = reverse(name, kwargs=url_kwargs(obj) or None)
            for principal, client in clients.items():
                got = client.get(url)
                head = client.head(url)
                if head.status_code != got.status_code:
                    mismatches.append(
                        f"{principal} {url}: GET {got.status_code}, HEAD {head.status_code} "
                        f"(Allow: {head.get('Allow', '')})"
                    )
                elif b"".join(head.streaming_content) if head.streaming else head.content:
                    mismatches.append(f"{principal} {url}: HEAD answered a body")
    assert not mismatches, "\n".join(mismatches)


def test_a_405_of_a_page_names_head_among_the_allowed_methods(sworld: World) -> None:
    client: Any = sworld.client("lead")
    refused = client.put(reverse("recovery"))
    assert refused.status_code == 405
    assert refused["Allow"] == "GET, HEAD", refused["Allow"]
    health = Client().delete(reverse("health"))
    assert health.status_code == 405 and "HEAD" in health["Allow"]
    api_read = Client().put(reverse("api-v1:checkpoints_list"))
    assert api_read.status_code == 405 and api_read["Allow"] == "GET, HEAD", api_read["Allow"]


def test_every_api_read_answers_head_like_get_with_its_token_required(sworld: World) -> None:
    _, secret = token_create(user=sworld.users["lead"], name="head")
    bearers = {"token": {"Authorization": f"Bearer {secret}"}, "no token": {}}
    routes = _get_routes(api=True)
    assert routes, "the API has reads"
    mismatches: list[str] = []
    for name in routes:
        for obj in objects_for(sworld, POLICY[name].objects):
            url = reverse(name, kwargs=url_kwargs(obj) or None)
            for bearer, headers in bearers.items():
                got = Client().get(url, headers=headers)
                head = Client().head(url, headers=headers)
                unauthenticated = bearer == "no token" and got.status_code != 401
                if head.status_code != got.status_code or unauthenticated:
                    mismatches.append(
                        f"{bearer} {url}: GET {got.status_code}, HEAD {head.status_code} "
                        f"(Allow: {head.get('Allow', '')})"
                    )
                    continue
                for header in ("Content-Type", "Cache-Control", "WWW-Authenticate"):
                    if got.get(header) != head.get(header):
                        mismatches.append(f"{bearer} {url}: HEAD {header} {head.get(header)!r}")
                if head.content:
                    mismatches.append(f"{bearer} {url}: HEAD answered a body")
    assert not mismatches, "\n".join(mismatches)
