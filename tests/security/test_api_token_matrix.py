"""Authorization matrix of the JSON API: every route of the resolver's ``api-v1`` namespace
x every bearer (a token of each role in tenant north and tenant south, the requester who
also approves, a revoked token, an expired one, one of a deactivated user, a well-shaped
forgery, none) x every method x objects of the caller's tenant, of the other tenant, of
nobody, and malformed ids.

Every cell must answer its status (401 for no valid token, 403 for a missing role, 404 for
another tenant's or nobody's object, 400/404 for a malformed id, 405 for a method the
route does not serve), never a 5xx, never an id of the other tenant in its body, and a
refused cell changes nothing (a refused decision records its refusal, and nothing else).
A new API route without a row in ``API_POLICY`` fails the first test.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

import tests.security.test_tenant_leaks as leak_checks
from api.models import ApiToken
from api.tokens import token_create, token_revoke
from approvals.models import Checkpoint, DecisionRefusal
from approvals.views import FORBIDDEN_REFUSALS
from kernel import clock
from tests.conftest import make_user
from tests.security.routes import enumerate_routes
from tests.security.world import World, changed, snapshot, tenant_snapshot

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

APPROVER, OPERATOR = "approver", "operator"
# Bearers with a token that works: (tenant, roles, principal ref).
GOOD = {
    "approver": ("north", {APPROVER}, "user:approver"),
    "operator": ("north", {OPERATOR}, "user:operator"),
    "catalog_admin": ("north", {"catalog-admin"}, "user:catalog-admin"),
    "lead": ("north", {OPERATOR, APPROVER}, "user:lead"),
    "outsider": ("south", {APPROVER, OPERATOR, "catalog-admin"}, "user:outsider"),
    "operator_south": ("south", {OPERATOR}, "user:operator-south"),
}
BAD = ("revoked", "expired", "deactivated", "forged", "none", "scheme_only", "no_scheme")
METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE")


@dataclass(frozen=True)
class Target:
    label: str
    value: str  # the path parameter
    tenant: str | None  # None: nobody's or malformed
    requester: str = ""  # the principal ref that requested the run (checkpoints)
    kind: str = ""  # approval | clarification (checkpoints)
    malformed: bool = False


@dataclass(frozen=True)
class ApiRule:
    method: str
    role: str | None  # the role the route needs (None: any token; checked per route)
    target: str = ""  # "run" | "checkpoint" | ""
    body: Callable[[World, str, Target], dict[str, Any]] | None = None
    allowed: frozenset[int] = frozenset({200})


def _decide(world: World, bearer: str, target: Target) -> dict[str, Any]:
    checkpoint = Checkpoint.objects.filter(pk=target.value).first()
    seen = checkpoint.proposal_hash if checkpoint else "0" * 64
    return {"verdict": "approve", "seen_hash": seen, "reason": "matrix"}


def _start(world: World, bearer: str, target: Target) -> dict[str, Any]:
    south = GOOD.get(bearer, ("north",))[0] == "south"
    return {
        "equipment_id": "EQ-31" if south else "EQ-17",
        "location_id": "LOC-S1" if south else "LOC-N1",
    }


API_POLICY: dict[str, ApiRule] = {
    "api-v1:checkpoints_list": ApiRule("GET", APPROVER),
    "api-v1:checkpoints_read": ApiRule("GET", APPROVER, "checkpoint"),
    "api-v1:checkpoints_decide": ApiRule("POST", APPROVER, "checkpoint", _decide),
    "api-v1:runs_start": ApiRule("POST", OPERATOR, body=_start, allowed=frozenset({201})),
    "api-v1:runs_read": ApiRule("GET", None, "run"),
    "api-v1:runs_cancel": ApiRule(
        "POST", OPERATOR, "run", lambda w, b, t: {"reason": "matrix"}, frozenset({200, 409})
    ),
}
NOT_ROUTES = {"api-v1:api-root"}  # the prefix itself: no page (404/405)


def test_every_api_route_has_a_row() -> None:
    names = {r.name for r in enumerate_routes() if r.name.startswith("api-v1:")}
    missing = sorted(names - set(API_POLICY) - NOT_ROUTES)
    assert not missing, f"API routes without a row in API_POLICY: {missing}"
    assert not set(API_POLICY) - names, "rows for API routes that no longer exist"


@pytest.fixture
def bearers(sworld: World) -> dict[str, dict[str, str]]:
    """Authorization headers per bearer (made inside the test's savepoint)."""
    out: dict[str, dict[str, str]] = {}
    for name in GOOD:
        _, secret = token_create(user=sworld.users[name], name="api matrix")
        out[name] = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    row, secret = token_create(user=sworld.users["operator"], name="revoked")
    token_revoke(user=sworld.users["operator"], token_id=row.pk)
    out["revoked"] = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    row, secret = token_create(user=sworld.users["lead"], name="expired", lifetime_days=7)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=clock.now() - dt.timedelta(seconds=1))
    out["expired"] = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    gone = make_user("gone-operator", "north", OPERATOR, APPROVER)
    _, secret = token_create(user=gone, name="deactivated")
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    out["deactivated"] = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    good = out["lead"]["HTTP_AUTHORIZATION"]
    # The real prefix of a working token with another secret: a guess at the secret part.
    out["forged"] = {"HTTP_AUTHORIZATION": good[:-8] + "AAAAAAAA"}
    out["none"] = {}
    out["scheme_only"] = {"HTTP_AUTHORIZATION": "Bearer "}
    out["no_scheme"] = {"HTTP_AUTHORIZATION": good.removeprefix("Bearer ")}
    return out


def targets(world: World, kind: str) -> list[Target]:
    if not kind:
        return [Target("-", "", None)]
    if kind == "run":
        return [
            Target("north_waiting", world.runs["waiting"], "north"),
            Target("north_completed", world.runs["completed"], "north"),
            Target("south_waiting", world.runs["south_waiting"], "south"),
            Target("nobody", "00000000-0000-4000-8000-000000000000", None),
            Target("malformed", "not-a-run", None, malformed=True),
            Target("malformed_long", "9" * 300, None, malformed=True),
        ]
    out = []
    for label in ("approval", "lead_approval", "clarification", "south_approval"):
        checkpoint = world.checkpoint(label)
        out.append(
            Target(
                label,
                checkpoint.pk,
                checkpoint.tenant,
                checkpoint.requested_by_ref,
                checkpoint.kind.lower(),
            )
        )
    out.append(Target("nobody", "cp-" + "0" * 24, None))
    out.append(Target("malformed", "..%2F..%2Fruns", None, malformed=True))
    out.append(Target("malformed_quote", "x' OR '1'='1", None, malformed=True))
    return out


def expectation(name: str, method: str, bearer: str, target: Target) -> frozenset[int]:
    rule = API_POLICY[name]
    if target.malformed:
        # An id that leaves its path segment (../) is no address of the API at all.
        return frozenset({400, 401, 403, 404, 405})
    if method != rule.method and not (method == "HEAD" and rule.method == "GET"):
        # A wrong method: 405, whoever asks (the method is routed before the token). HEAD
        # of a read is answered as its GET (docs/security.md).
        return frozenset({405})
    if bearer not in GOOD:
        return frozenset({401})
    tenant, roles, ref = GOOD[bearer]
    role_ok = rule.role is None or rule.role in roles
    if name == "api-v1:checkpoints_decide" and target.kind == "clarification":
        # not_an_approval, whoever asks: a question is answered, never approved.
        return frozenset({400}) if target.tenant == tenant else frozenset({404})
    if name == "api-v1:checkpoints_read" and target.kind == "clarification":
        role_ok = role_ok or target.requester == ref
    if target.tenant is None and rule.target:
        return frozenset({403, 404}) if not role_ok else frozenset({404})
    if target.tenant not in (None, tenant):
        return frozenset({403, 404}) if not role_ok else frozenset({404})
    if not role_ok:
        return frozenset({403})
    if name == "api-v1:checkpoints_decide" and target.requester == ref:
        return frozenset({403})  # self_approval
    return rule.allowed


def _url(name: str, target: Target) -> str:
    kwarg = {"run": "run_id", "checkpoint": "checkpoint_id"}.get(API_POLICY[name].target)
    if not kwarg:
        return reverse(name)
    # Built by hand: a malformed id must reach the API as sent (reverse refuses some).
    placeholder = "00000000-0000-4000-8000-00000000abcd"
    return reverse(name, kwargs={kwarg: placeholder}).replace(placeholder, target.value)


@pytest.mark.parametrize("name", sorted(API_POLICY))
def test_api_authorization_matrix(
    sworld: World, bearers: dict[str, dict[str, str]], name: str
) -> None:
    rule = API_POLICY[name]
    problems: list[str] = []
    client = Client(raise_request_exception=False)
    marks = {t: leak_checks.marks_of(t) for t in ("north", "south")}
    cells = 0
    for method in METHODS:
        for bearer, auth in bearers.items():
            for target in targets(sworld, rule.target):
                expected = expectation(name, method, bearer, target)
                where = f"{method} {name}[{target.label}] as {bearer}"
                sid = transaction.savepoint()
                try:
                    tenants = {t: tenant_snapshot(t) for t in ("north", "south")}
                    before = snapshot()
                    refusals = DecisionRefusal.objects.count()
                    body = rule.body(sworld, bearer, target) if rule.body else {}
                    response = client.generic(
                        method,
                        _url(name, target),
                        json.dumps(body) if method in ("POST", "PUT") else "",
                        content_type="application/json",
                        **auth,
                    )
                    cells += 1
                    status = response.status_code
                    if status >= 500 or status not in expected:
                        text = response.content[:200].decode("utf-8", "replace")
                        problems.append(f"{where}: {status}, expected {sorted(expected)} {text}")
                    own = GOOD.get(bearer, (None,))[0]
                    for tenant, tenant_marks in marks.items():
                        if tenant == own:
                            continue
                        found = [
                            f
                            for f in leak_checks.leaks(response.content, tenant_marks)
                            if not f.endswith(" " + target.value)
                        ]
                        if found:
                            problems.append(f"{where}: shows {tenant}'s {found[:3]}")
                    refused = status not in rule.allowed or expected - rule.allowed
                    if refused:
                        new = set(
                            DecisionRefusal.objects.order_by("pk")[refusals:].values_list(
                                "code", flat=True
                            )
                        )
                        if new - FORBIDDEN_REFUSALS - {"not_an_approval"}:
                            problems.append(f"{where}: recorded {sorted(new)}")
                        diff = [
                            t
                            for t in changed(before, snapshot())
                            # A token's last use is written when it authenticates.
                            if not t.startswith("api.ApiToken")
                            and not (t.startswith("approvals.DecisionRefusal") and new)
                        ]
                        if diff:
                            problems.append(f"{where}: {status} but changed {diff}")
                    if bearer in GOOD:
                        for tenant, digest in tenants.items():
                            if tenant != GOOD[bearer][0] and tenant_snapshot(tenant) != digest:
                                problems.append(f"{where}: changed tenant {tenant}'s records")
                finally:
                    transaction.savepoint_rollback(sid)
    assert cells == len(METHODS) * len(bearers) * len(targets(sworld, rule.target))
    assert not problems, "\n".join(problems)
