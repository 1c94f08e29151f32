"""No body shows another tenant's data: every GET route of the resolver, as every signed-in
principal of both tenants, with every object the world holds and with query strings that
name the other tenant's ids (a search, a filter, a cursor).

Two oracles:
- no response carries an identifier of the other tenant's records (run, checkpoint,
  proposal hash, evidence, effect attempt, idempotency key, bulk operation, saved view)
  unless the request itself sent it;
- a query naming the other tenant's id answers exactly what the same query naming an id
  of nobody answers (after the per-response tokens are taken out), so even a page that
  echoes the id cannot tell whether it exists.

The world is the authorization matrix's (``tests/security/world.py``) plus a south tenant
as busy as north: an ended run, an unknown effect, a clarification, a bulk operation and
a saved view, so a page that forgets its tenant filter has something to show.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from approvals.models import Checkpoint
from runs.models import EffectAttempt, Evidence, Run
from sim.world.models import LedgerEntry
from tests.helpers import approve, make_run
from tests.security.policy import POLICY, Variant, crawl_objects, url_kwargs
from tests.security.routes import send
from tests.security.world import LEDGER_OUTAGE, USERS, World, build_world

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

VIEWERS = {
    "north": ("approver", "operator", "catalog_admin", "lead"),
    "south": ("outsider", "operator_south"),
}
# Who probes with the other tenant's ids: every role in each tenant, in as few users.
PROBERS = {"north": ("lead", "catalog_admin"), "south": ("outsider",)}
SOUTH = {"principal": "user:operator-south", "equipment_id": "EQ-31", "location_id": "LOC-S1"}
MARK_KINDS = ("run", "checkpoint", "hash", "evidence", "attempt", "key", "operation", "view")


@pytest.fixture(scope="module")
def leak_world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    with django_db_blocker.unblock(), transaction.atomic():
        world = build_world()
        south_operator = world.users["operator_south"]
        south_approver = world.users["outsider"]

        def start(label: str, scenario: str = "reservation", **kw: Any) -> Run:
            run = make_run(scenario, tenant="south", requested_by=south_operator, **SOUTH, **kw)
            world.runs[label] = str(run.pk)
            return run

        completed = start("south_completed")
        approve(completed, south_approver)
        assert completed.state == "COMPLETED", completed.state
        start("south_failed", "unavailable_tool")
        clarify = start("south_clarify", "clarify")
        world.checkpoints["south_clarification"] = clarify.waiting_checkpoint
        outage = start("south_outage", fault_plan=LEDGER_OUTAGE)
        approve(outage, south_approver)
        assert any(a.unresolved for a in EffectAttempt.objects.filter(run=outage))
        from operations import saved_views
        from operations import services as operations

        query = {"world": "faultlab", "state": "WAITING_HUMAN"}
        count = operations.cancel_preview(tenant="south", query=query).count
        with override_settings(FIELDOPS_EXECUTION="deferred"):
            operation = operations.operation_start_cancel(
                tenant="south",
                by_ref="user:operator-south",
                query=query,
                reason="south",
                confirm=count,
            )
        world.operations["south_operation"] = str(operation.pk)
        world.operations["south_view"] = str(
            saved_views.saved_view_create(
                tenant="south", by_ref="user:operator-south", page="runs", name="s", query=query
            ).pk
        )
        yield world
        transaction.set_rollback(True)


@pytest.fixture
def lworld(leak_world: World, db: Any) -> World:
    return leak_world


def marks_of(tenant: str) -> dict[str, str]:
    """value -> what it is, of every identifier a page could leak of ``tenant``."""
    from operations.models import Operation, SavedView

    out: dict[str, str] = {}
    for run_id in Run.objects.filter(tenant=tenant).values_list("pk", flat=True):
        out[str(run_id)] = "run"
    for pk, proposal_hash in Checkpoint.objects.filter(tenant=tenant).values_list(
        "pk", "proposal_hash"
    ):
        out[str(pk)] = "checkpoint"
        if proposal_hash:
            out[proposal_hash] = "hash"
    for pk in Evidence.objects.filter(run__tenant=tenant).values_list("pk", flat=True):
        out[str(pk)] = "evidence"
    for pk, key in EffectAttempt.objects.filter(run__tenant=tenant).values_list(
        "pk", "idempotency_key"
    ):
        out[str(pk)] = "attempt"
        if key:
            out[key] = "key"
    for key in LedgerEntry.objects.filter(tenant=tenant).values_list("idempotency_key", flat=True):
        out.setdefault(key, "key")
    for pk in Operation.objects.filter(tenant=tenant).values_list("pk", flat=True):
        out[str(pk)] = "operation"
    for pk in SavedView.objects.filter(tenant=tenant).values_list("pk", flat=True):
        out[str(pk)] = "view"
    # Short values (an evidence id like "ev-1") would match any page by chance.
    return {value: kind for value, kind in out.items() if len(value) >= 16}


def probes(lworld: World, other: str) -> list[dict[str, str]]:
    """Query strings an attacker of the other tenant would try on any page."""
    run = Run.objects.filter(tenant=other).order_by("created_at").first()
    checkpoint = Checkpoint.objects.filter(tenant=other).first()
    attempt = EffectAttempt.objects.filter(run__tenant=other).exclude(idempotency_key="").first()
    assert run and checkpoint and attempt
    return [
        {"q": str(run.pk)},
        {"q": str(run.pk)[:8]},
        {"q": attempt.idempotency_key},
        {"q": str(checkpoint.pk)},
        {"run": str(run.pk)},
        {"r": str(run.pk)},
        {"sim": str(run.pk)},
    ]


def _nobody(value: str) -> str:
    """An id of the same shape that belongs to nobody."""
    if re.fullmatch(r"[0-9a-f-]{36}", value):
        return str(uuid.UUID(int=uuid.UUID(value).int ^ 0xFFFF))
    return value[:-4] + ("0000" if not value.endswith("0000") else "1111")


# Per-response noise: the CSRF token, the CSP nonce, a form's one-time key, the clock
# (health's latencies and ages, an export's time).
NOISE = re.compile(
    rb'("X-CSRFToken": "[^"]*"|nonce="[^"]*"|name="[a-z_]*(token|key)" value="[^"]*"'
    rb'|"(latency_ms|[a-z_]*age_s)": [0-9.]+|"exported_at": "[^"]*"'
    rb"|\b\d+(h \d\dm|m \d\ds|s)\b"  # a duration as the console writes it
    # the sweeper's last report, a stalled bulk operation's "no batch for 63 s" (two
    # requests may straddle a second)
    rb"|\b\d+ s\b"
    # The sweeper's health: between two requests on a slow host it may turn late.
    rb'|<p [^>\n]*id="sweeper-(ok|late|starting)">[^\n]*</p>)'
)


def _normal(body: bytes, value: str, placeholder: bytes) -> bytes:
    body = NOISE.sub(b"", body)
    return body.replace(value.encode(), placeholder)


def leaks(body: bytes, marks: dict[str, str]) -> list[str]:
    text = body.decode("utf-8", "replace")
    return sorted(f"{kind} {value}" for value, kind in marks.items() if value in text)


GET_ROUTES = sorted(name for name, rule in POLICY.items() if "GET" in rule.may)


@pytest.mark.parametrize("tenant", ["north", "south"])
def test_no_get_route_shows_another_tenants_ids(lworld: World, tenant: str) -> None:
    other = "south" if tenant == "north" else "north"
    marks = marks_of(other)
    assert {marks[v] for v in marks} >= {"run", "checkpoint", "hash", "attempt", "key"}
    clients = {p: lworld.client(p, raise_request_exception=False) for p in VIEWERS[tenant]}
    problems: list[str] = []
    seen = 0
    for name in GET_ROUTES:
        rule = POLICY[name]
        for obj in crawl_objects(lworld, rule.objects):
            if obj.tenant not in (None, tenant):
                continue  # another tenant's object: the matrix checks its 404
            for variant in (*rule.variants, Variant("all worlds", {"world": "all"})):
                for principal, client in clients.items():
                    response = send(
                        client,
                        "GET",
                        name,
                        url_kwargs(obj),
                        query=dict(variant.query),
                        headers=dict(variant.headers),
                    )
                    seen += 1
                    body = b"".join(response) if response.streaming else response.content
                    found = leaks(body, marks)
                    if response.status_code >= 500 or found:
                        problems.append(
                            f"GET {name}[{obj.label}] {variant.name} as {principal}: "
                            f"{response.status_code} {found[:4]}"
                        )
    assert seen > 300
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("tenant", ["north", "south"])
def test_a_query_naming_another_tenants_id_answers_as_for_nobodys(
    lworld: World, tenant: str
) -> None:
    other = "south" if tenant == "north" else "north"
    marks = marks_of(other)
    clients = {p: lworld.client(p, raise_request_exception=False) for p in PROBERS[tenant]}
    problems: list[str] = []
    for name in GET_ROUTES:
        rule = POLICY[name]
        own = [o for o in crawl_objects(lworld, rule.objects) if o.tenant in (None, tenant)][:1]
        for obj in own:
            for query in probes(lworld, other):
                for principal, client in clients.items():
                    (param, value), *_ = query.items()
                    answers = []
                    for sent in (value, _nobody(value)):
                        response = send(client, "GET", name, url_kwargs(obj), query={param: sent})
                        body = b"".join(response) if response.streaming else response.content
                        answers.append((response.status_code, _normal(body, sent, b"@ID@")))
                        if sent == value:
                            found = [f for f in leaks(body, marks) if not f.endswith(" " + value)]
                            if found or response.status_code >= 500:
                                problems.append(
                                    f"GET {name}?{param}={value[:12]} as {principal}: "
                                    f"{response.status_code} {found[:4]}"
                                )
                    if answers[0] != answers[1]:
                        problems.append(
                            f"GET {name}?{param}=<{other}'s {marks.get(value, 'id')}> as "
                            f"{principal} answers otherwise than for nobody's id "
                            f"({answers[0][0]} vs {answers[1][0]})"
                        )
    assert not problems, "\n".join(problems)


def test_every_principal_of_the_crawl_exists() -> None:
    assert set(VIEWERS["north"]) | set(VIEWERS["south"]) <= set(USERS)
