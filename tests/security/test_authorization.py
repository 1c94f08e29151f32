"""Authorization matrix: every route x {anonymous, approver, operator, catalog admin, user
of another tenant} x object x method, against the policy table in ``policy.py``.

Every cell sends the *valid* request the right principal would send. A cell the policy
denies must answer its refusal status (login redirect, for an HTMX request an empty 200
whose HX-Redirect goes to the login page; 403, another tenant's object 404, 405 for a
method the route does not serve) and leave every table exactly as it was; a
cell the policy allows must not be refused (so the table cannot be stricter than the code
without failing either). No cell may change anything of the other tenant. Each cell runs
in a savepoint that is rolled back, so cells do not influence each other.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from approvals.domain import WRONG_KIND_REFUSALS
from approvals.models import DecisionRefusal
from approvals.views import FORBIDDEN_REFUSALS
from tests.security.policy import (
    POLICY,
    PUBLIC,
    SIGNED,
    Obj,
    Rule,
    Variant,
    objects_for,
    url_kwargs,
)
from tests.security.routes import enumerate_routes, is_login_redirect, send
from tests.security.world import PRINCIPALS, World, changed, snapshot, tenant_snapshot

METHODS = ("GET", "POST", "PUT", "DELETE")
INCLUDED_MODULES = {
    "fieldops.urls",
    "runs.urls",
    "runs.urls_replay",
    "approvals.urls",
    "catalog.urls",
    "operations.urls",
}
DENIED = "denied"
ALLOWED = "allowed"


def test_every_route_has_exactly_one_policy_row():
    routes = enumerate_routes()
    unnamed = [r.pattern for r in routes if not r.name]
    assert not unnamed, f"routes without a name cannot have a policy row: {unnamed}"
    names = [r.name for r in routes]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    assert not duplicated, f"one URL name per route: {duplicated}"
    missing = sorted(set(names) - set(POLICY))
    assert not missing, (
        f"routes without a row in tests/security/policy.py: {missing}. Decide who may use "
        "them (and add a valid request body), then add the row."
    )
    stale = sorted(set(POLICY) - set(names))
    assert not stale, f"policy rows for routes that no longer exist: {stale}"
    assert {r.module for r in routes} >= INCLUDED_MODULES


def expectation(
    world: World, rule: Rule, method: str, variant: Variant, principal: str, obj: Obj
) -> tuple:
    """(verdict, acceptable statuses) of one cell."""
    if method not in rule.may:
        if rule.unserved:
            return DENIED, set(rule.unserved)
        return DENIED, {405} if principal != "anonymous" else {302, 405}
    access = rule.may[method]
    if access == PUBLIC:
        return ALLOWED, set()
    if access == SIGNED:
        return DENIED, {401}  # unsigned: a session authenticates nothing here
    if principal == "anonymous":
        if rule.anonymous == 302 and variant.is_htmx:
            return DENIED, {200}  # the login page by HX-Redirect (checked: nothing else)
        return DENIED, {rule.anonymous}
    assert callable(access)
    if obj.tenant is not None and obj.tenant != world.tenant_of(principal):
        # Another tenant's object is 404; a role check that comes first may say 403 (it
        # discloses nothing about the object either).
        return DENIED, {404} if access(world, principal, _own(obj, world, principal)) else {
            403,
            404,
        }
    if access(world, principal, obj):
        return ALLOWED, set()
    return DENIED, {rule.denied.get(obj.kind, 403)}


def _own(obj: Obj, world: World, principal: str) -> Obj:
    """The same object as if it belonged to ``principal``'s tenant (to ask about roles)."""
    return Obj(obj.label, obj.kind, obj.kwargs, world.tenant_of(principal), principal)


def cells(world: World, name: str) -> list[tuple[str, Any, str, Obj]]:
    rule = POLICY[name]
    objects = objects_for(world, rule.objects)
    out = []
    for method in METHODS:
        served = method in rule.may
        for variant in rule.variants if served else rule.variants[:1]:
            for principal in PRINCIPALS:
                for obj in objects if served else objects[:1]:
                    out.append((method, variant, principal, obj))
    return out


@pytest.mark.parametrize("name", sorted(POLICY))
def test_authorization_matrix(sworld: World, name: str) -> None:
    rule = POLICY[name]
    clients = {
        p: sworld.client(p, raise_request_exception=False)
        for p in PRINCIPALS
        if not rule.fresh_client
    }
    baseline = snapshot()
    tenants = {t: tenant_snapshot(t) for t in ("north", "south")}
    problems: list[str] = []
    checked = 0
    for method, variant, principal, obj in cells(sworld, name):
        verdict, statuses = expectation(sworld, rule, method, variant, principal, obj)
        body = rule.body(sworld, principal, obj) if rule.body and method == "POST" else None
        where = f"{method} {name}[{obj.label}] {variant.name} as {principal}"
        sid = transaction.savepoint()
        try:
            if rule.fresh_client:
                client = sworld.client(principal, raise_request_exception=False)
                before = snapshot()
            else:
                client, before = clients[principal], baseline
            refusals = DecisionRefusal.objects.count()
            response = send(
                client,
                method,
                name,
                url_kwargs(obj),
                query=dict(variant.query),
                data=body,
                headers=dict(variant.headers),
            )
            status = response.status_code
            checked += 1
            if status >= 500:
                problems.append(f"{where}: {status} server error")
            elif verdict == DENIED:
                if status not in statuses:
                    problems.append(f"{where}: {status}, expected {sorted(statuses)}")
                elif (
                    status in (200, 302)
                    and principal == "anonymous"
                    and method in rule.may
                    and not is_login_redirect(response)
                ):
                    problems.append(f"{where}: {status} but not (only) sent to the login page")
                after = snapshot()
                new_refusals = set(
                    DecisionRefusal.objects.order_by("pk")[refusals:].values_list("code", flat=True)
                )
                # A refused decision is recorded (by design); nothing else may change.
                if new_refusals - FORBIDDEN_REFUSALS - WRONG_KIND_REFUSALS:
                    problems.append(f"{where}: recorded refusal(s) {sorted(new_refusals)}")
                diff = [
                    t
                    for t in changed(before, after)
                    if not (t.startswith("approvals.DecisionRefusal") and new_refusals)
                ]
                if diff:
                    problems.append(f"{where}: {status} but changed {diff}")
            else:
                refused = status in (401, 403, 404, 405)
                if refused or (rule.may[method] != PUBLIC and is_login_redirect(response)):
                    problems.append(f"{where}: {status}, but the policy allows it")
            # (GET side effects of allowed cells: test_safe_methods crawls every GET route.)
            if verdict == ALLOWED and method != "GET" and principal != "anonymous":
                for tenant, digest in tenants.items():
                    if tenant != sworld.tenant_of(principal) and tenant_snapshot(tenant) != digest:
                        problems.append(f"{where}: changed tenant {tenant}'s records")
        finally:
            transaction.savepoint_rollback(sid)
    assert checked == len(cells(sworld, name))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(POLICY))
def test_no_policy_row_lets_a_wrong_role_in_without_a_reason(name: str) -> None:
    """Every state-changing method names who may use it (never "every signed-in user")."""
    from tests.security.policy import signed_in

    rule = POLICY[name]
    for method, access in rule.may.items():
        if method != "GET" and name not in ("login", "logout"):
            assert access is not signed_in and access != PUBLIC, f"{method} {name} is open"
            assert rule.body is not None, f"{method} {name} needs a valid body in the table"
