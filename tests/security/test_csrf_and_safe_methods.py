"""CSRF and safe methods.

* Every state-changing request without a valid CSRF token is refused with 403 and changes
  nothing, whoever sends it; the same request with the page's token is not refused by CSRF
  (so the 403 is the token's doing). The signed callback endpoint is CSRF-exempt by
  design: it is HMAC-authenticated, so unsigned it is 401, signed it is accepted.
* A crawl of every GET route (every principal, every object of a world with runs in
  several states, every HTMX partial) changes nothing: not at "now", and not two hours
  later, when approvals have expired, deadlines and leases have passed (expiry, deadline
  enforcement and re-drive are the sweeper's job, never a GET side effect).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from kernel import clock
from runs.api import sign
from runs.models import Correlation, Run
from tests.security.policy import (
    POLICY,
    PUBLIC,
    SIGNED,
    Obj,
    crawl_objects,
    objects_for,
    url_kwargs,
)
from tests.security.routes import send
from tests.security.world import World, changed, snapshot

UNSAFE = ("POST", "PUT", "DELETE")
# Routes a session cannot use at all (the signed callback, the bearer-token API) have no
# CSRF to enforce: a cookie authenticates nothing there (the matrix shows the 401).
SESSIONLESS = frozenset(
    name for name, rule in POLICY.items() if any(rule.may.get(m) == SIGNED for m in UNSAFE)
)
CSRF_ROUTES = sorted(
    name
    for name, rule in POLICY.items()
    if any(m in UNSAFE for m in rule.may) and name not in SESSIONLESS
)


def allowed(world: World, name: str) -> tuple[str, Obj]:
    """A principal and object the policy lets use the route's unsafe method (so that only
    CSRF can refuse the request)."""
    rule = POLICY[name]
    access = next(rule.may[m] for m in UNSAFE if m in rule.may)
    for obj in objects_for(world, rule.objects):
        if access == PUBLIC:
            return "approver", obj
        for principal in ("operator", "approver", "catalog_admin"):
            if callable(access) and access(world, principal, obj):
                return principal, obj
    raise AssertionError(f"nobody may use {name}")


def csrf_client(world: World, principal: str) -> tuple[Client, str]:
    """A client that enforces CSRF, signed in, holding the token a page gave it."""
    client = world.client(principal, enforce_csrf_checks=True)
    page = reverse("login") if principal == "anonymous" else reverse("runs-list")
    assert client.get(page).status_code == 200
    return client, client.cookies["csrftoken"].value


def is_csrf_refusal(response: Any) -> bool:
    return response.status_code == 403 and b"CSRF" in response.content


@pytest.mark.parametrize("name", CSRF_ROUTES)
def test_a_state_changing_request_without_a_valid_token_is_403_and_changes_nothing(
    sworld: World, name: str
) -> None:
    rule = POLICY[name]
    principal, obj = allowed(sworld, name)
    client, token = csrf_client(sworld, principal)
    _, other_token = csrf_client(sworld, "anonymous")  # a real token of another session
    body = rule.body(sworld, principal, obj) if rule.body else {}
    kwargs = url_kwargs(obj)
    before = snapshot()
    for method in UNSAFE:
        for label, extra in (
            ("no token", {}),
            ("another session's token", {"csrfmiddlewaretoken": other_token}),
            ("a forged token", {"csrfmiddlewaretoken": "x" * 64}),
        ):
            data = {**body, **extra} if method == "POST" else None
            response = send(client, method, name, kwargs, data=data)
            assert is_csrf_refusal(response), (method, label, response.status_code)
        header = send(
            client,
            method,
            name,
            kwargs,
            data=body if method == "POST" else None,
            headers={"HTTP_X_CSRFTOKEN": other_token},
        )
        assert is_csrf_refusal(header), (method, "header with another session's token")
    assert changed(before, snapshot()) == []
    # The same request with this session's token passes CSRF (form field, or the header
    # htmx sends): whatever it answers now is the view's decision, not a CSRF refusal.
    for extra, headers in (
        ({"csrfmiddlewaretoken": token}, {}),
        ({}, {"HTTP_X_CSRFTOKEN": token}),
    ):
        response = send(client, "POST", name, kwargs, data={**body, **extra}, headers=headers)
        assert not is_csrf_refusal(response), response.status_code
        assert response.status_code < 500


def test_every_unsafe_route_is_covered_by_the_csrf_test():
    unsafe = {n for n, r in POLICY.items() if any(m in UNSAFE for m in r.may)}
    assert unsafe - set(CSRF_ROUTES) == SESSIONLESS
    assert {
        "api-callback",
        "api-v1:checkpoints_decide",
        "api-v1:runs_start",
        "api-v1:runs_cancel",
    } == SESSIONLESS


def _callback_body(world: World) -> bytes:
    run = world.run("external")
    correlation = Correlation.objects.get(pk=run.waiting_correlation)
    return json.dumps(
        {
            "delivery_id": "csrf-exempt-1",
            "correlation_id": correlation.pk,
            "attempt": correlation.attempt,
            "owner_epoch": correlation.owner_epoch,
            "response_type": correlation.expected_response_type,
            "payload": {"window": "08:00"},
        }
    ).encode()


def test_the_callback_is_csrf_exempt_because_it_is_signed(sworld: World) -> None:
    client = Client(enforce_csrf_checks=True)
    url = reverse("api-callback")
    body = _callback_body(sworld)
    ts = str(int(time.time()))
    session = sworld.client("operator", enforce_csrf_checks=True)
    before = snapshot()
    unsigned = client.post(url, body, content_type="application/json")
    assert unsigned.status_code == 401 and unsigned.json()["error"] == "unsigned"
    forged = client.post(
        url,
        body,
        content_type="application/json",
        HTTP_X_FIELDOPS_TIMESTAMP=ts,
        HTTP_X_FIELDOPS_SIGNATURE=sign(body, ts, key="not-the-key"),
    )
    assert forged.status_code == 401 and forged.json()["error"] == "bad_signature"
    # A signed-in browser session is no authentication for it either.
    assert session.post(url, body, content_type="application/json").status_code == 401
    assert changed(before, snapshot()) == []
    signed = client.post(
        url,
        body,
        content_type="application/json",
        HTTP_X_FIELDOPS_TIMESTAMP=ts,
        HTTP_X_FIELDOPS_SIGNATURE=sign(body, ts),
    )
    assert signed.status_code == 202 and signed.json()["outcome"] == "accepted"


# -- the GET crawl ---------------------------------------------------------------------
# Every role, both tenants and the operator-approver; the redundant second catalog admin
# and south operator are left out. Later, when things have expired, the roles that see the
# most pages crawl again.
CRAWLERS = {0: ("anonymous", "approver", "operator", "catalog_admin", "lead", "outsider")}
CRAWLERS[2] = ("approver", "operator", "lead")


GET_ROUTES = sorted(name for name, rule in POLICY.items() if "GET" in rule.may)


@pytest.mark.parametrize("hours_later", [0, 2])
def test_a_crawl_of_every_get_route_changes_nothing(sworld: World, hours_later: int) -> None:
    clients = {p: sworld.client(p, raise_request_exception=False) for p in CRAWLERS[hours_later]}
    clock.advance(hours_later * 3600)
    # Something to expire and something past its deadline: the GETs must leave them be.
    if hours_later:
        assert Checkpoint.objects.filter(status="PENDING", expires_at__lte=clock.now()).exists()
        assert Run.objects.filter(disposition="", deadline__lte=clock.now()).exists()
    before = snapshot()
    errors: list[str] = []
    statuses: dict[int, int] = {}
    for name in GET_ROUTES:
        rule = POLICY[name]
        for index, obj in enumerate(crawl_objects(sworld, rule.objects)):
            for variant in rule.variants:
                for principal, client in clients.items():
                    if principal == "anonymous" and index:
                        continue  # a login redirect, whatever the object
                    response = send(
                        client,
                        "GET",
                        name,
                        url_kwargs(obj),
                        query=dict(variant.query),
                        headers=dict(variant.headers),
                    )
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    if response.status_code >= 500:
                        errors.append(f"GET {name}[{obj.label}] {variant.name} as {principal}")
        difference = changed(before, snapshot())
        assert not difference, f"GET {name} changed {difference}"
    assert not errors, "\n".join(errors)
    # The crawl reached pages, not only refusals.
    assert statuses.get(200, 0) > 300 and statuses.get(404, 0) and statuses.get(403, 0)
