"""HEAD is served wherever GET is (RFC 9110 §9.1: every general-purpose server supports
GET and HEAD): the same status and headers as the GET, no body. Uptime monitors and link
checkers send HEAD; a 405 there reads as "the page is down" (found over real HTTP: every
console page and ``/healthz`` answered HEAD with 405 ``Allow: GET``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.security.policy import POLICY, objects_for, url_kwargs
from tests.security.world import World

pytestmark = pytest.mark.django_db

# One principal per role set that reads every page: the north lead (operator and
# approver), the catalog admin.
READERS = ("lead", "catalog_admin")


def _get_routes() -> list[str]:
    # The JSON API's operations (django-ninja) are GET only, as its schema documents.
    return sorted(
        name
        for name, rule in POLICY.items()
        if "GET" in rule.may and not name.startswith("api-v1:")
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
