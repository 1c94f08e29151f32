"""A parent of a real console page is never a bare 404.

A person trims an address to reach the list above a page: ``/catalog/candidates/7/`` to
``/catalog/candidates/``, ``/runs/<id>/evidence/<ev>/`` to ``/runs/<id>/evidence/``. Each
such parent of every console page (enumerated from the URL resolver, built with the
matrix's north objects) serves a page or redirects to one for a signed-in person of the
tenant. The JSON API (``/api/``, ``/api/v1/``) is a machine's address (its 404 is its JSON
error) and is left out.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse

from tests.security.policy import POLICY, objects_for, url_kwargs
from tests.security.routes import enumerate_routes
from tests.security.world import World

# Signed in with every role of tenant north between them.
PRINCIPALS = ("lead", "catalog_admin")


def _page_addresses(world: World) -> set[str]:
    """One address of every console route, with a north object where it names one."""
    found = set()
    for route in enumerate_routes():
        rule = POLICY.get(route.name)
        if rule is None or route.name.startswith("api-v1") or route.pattern.startswith("api/v1"):
            continue
        for obj in objects_for(world, rule.objects):
            if obj.tenant not in (None, "north"):
                continue
            try:
                found.add(reverse(route.name, kwargs=url_kwargs(obj)))
            except NoReverseMatch:
                continue
            break
    return found


def _parents(address: str) -> list[str]:
    """``/a/b/c/`` -> ``/a/b/``, ``/a/``: each address a person gets by trimming it."""
    parts = [p for p in address.split("/") if p]
    return [f"/{'/'.join(parts[:n])}/" for n in range(len(parts) - 1, 0, -1)]


def test_every_parent_of_a_console_page_answers_a_page_or_a_redirect(sworld: World) -> None:
    clients = [sworld.client(principal) for principal in PRINCIPALS]
    parents = {p for address in _page_addresses(sworld) for p in _parents(address)}
    assert {"/catalog/candidates/", "/catalog/versions/"} <= parents
    missing = []
    for parent in sorted(parents):
        if parent == "/api/" or parent.startswith("/api/v1/"):
            continue
        answers = [client.get(parent).status_code for client in clients]
        if all(status == 404 for status in answers):
            missing.append(parent)
    assert not missing, missing


def test_the_candidates_address_lists_the_discovered_candidates(sworld: World) -> None:
    response = sworld.client("operator").get("/catalog/candidates/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == f"{reverse('catalog-index')}?source=discovered"


def test_a_trimmed_run_address_keeps_the_tenant_boundary(sworld: World) -> None:
    south = sworld.runs["south_waiting"]
    north = sworld.runs["waiting"]
    client = sworld.client("operator")
    for trimmed in ("evidence", "replay"):
        assert client.get(f"/runs/{south}/{trimmed}/").status_code == 404
        assert client.get(f"/runs/{north}/{trimmed}/").status_code == 302
