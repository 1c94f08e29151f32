"""The security tests' world: users for every role, runs in several states in two tenants,
catalog versions in several lifecycle states, and a snapshot of everything a request could
change.

``build_world`` makes real runs through the runner and the authority (no rows written by
hand), so every object id the tests use is one the console would show.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client, override_settings

from approvals.models import Checkpoint
from catalog import services as catalog_services
from catalog.models import CapabilityVersion, Lifecycle
from catalog.servers import tool_server_discover, tool_server_register
from runs.models import EffectAttempt, Evidence, Run
from tests.conftest import make_user
from tests.helpers import approve, decline, make_run

# Principals of the authorization matrix: every role, and the operator who also approves,
# in each tenant. ``outsider`` belongs to the other tenant and holds every role, so a
# refusal of a north object can only come from tenancy.
PRINCIPALS = (
    "anonymous",
    "approver",
    "operator",
    "catalog_admin",
    "lead",
    "outsider",
    "approver_south",
    "operator_south",
    "catalog_admin_south",
    "lead_south",
)
USERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # key: (username, tenant, roles)
    "approver": ("approver", "north", ("approver",)),
    "operator": ("operator", "north", ("operator",)),
    "catalog_admin": ("catalog-admin", "north", ("catalog-admin",)),
    "catalog_reviewer": ("catalog-reviewer", "north", ("catalog-admin",)),
    "lead": ("lead", "north", ("operator", "approver")),
    "outsider": ("outsider", "south", ("approver", "operator", "catalog-admin")),
    "operator_south": ("operator-south", "south", ("operator",)),
    "approver_south": ("approver-south", "south", ("approver",)),
    "catalog_admin_south": ("catalog-admin-south", "south", ("catalog-admin",)),
    "lead_south": ("lead-south", "south", ("operator", "approver")),
}
LEDGER_OUTAGE = [
    {"point": "after_commit_before_response", "capability": "reserve_part", "on_call": 1},
    {"point": "ledger_unavailable", "capability": "reserve_part", "on_call": 1},
]
IMPORTED_TOOL = (
    '{"tools": [{"name": "remote_lookup", "description": "Looks a part up (remote).", '
    '"inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, '
    '"annotations": {"readOnlyHint": true}}]}'
)


@dataclass
class World:
    users: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # label -> run id
    checkpoints: dict[str, str] = field(default_factory=dict)  # label -> checkpoint id
    evidence: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> (run, ev)
    versions: dict[str, int] = field(default_factory=dict)  # label -> CapabilityVersion pk
    attempts: dict[str, str] = field(default_factory=dict)  # label -> EffectAttempt id
    # server / discovery / drift / tool_list_import pks
    catalog: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # principal -> their API token pk
    operations: dict[str, str] = field(default_factory=dict)  # operation / saved view ids

    def run(self, label: str) -> Run:
        return Run.objects.get(pk=self.runs[label])

    def checkpoint(self, label: str) -> Checkpoint:
        return Checkpoint.objects.get(pk=self.checkpoints[label])

    def version(self, label: str) -> CapabilityVersion:
        return CapabilityVersion.objects.get(pk=self.versions[label])

    def client(self, principal: str, **kwargs: Any) -> Client:
        client = Client(**kwargs)
        if principal != "anonymous":
            client.force_login(self.users[principal])
        return client

    def tenant_of(self, principal: str) -> str | None:
        return None if principal == "anonymous" else USERS[principal][1]

    def roles_of(self, principal: str) -> frozenset[str]:
        return frozenset() if principal == "anonymous" else frozenset(USERS[principal][2])


def build_world() -> World:
    """Seed the catalog and synthetic world, then make the users, runs and versions."""
    from sim.setup import seed

    seed(demo_users=False)
    world = World()
    for key, (username, tenant, roles) in USERS.items():
        world.users[key] = make_user(username, tenant, *roles)
    operator = world.users["operator"]

    def start(label: str, scenario: str = "reservation", **kw: Any) -> Run:
        kw.setdefault("principal", "user:operator")
        kw.setdefault("requested_by", operator)
        run = make_run(scenario, **kw)
        world.runs[label] = str(run.pk)
        return run

    waiting = start("waiting")
    world.checkpoints["approval"] = waiting.waiting_checkpoint
    completed = start("completed")
    world.checkpoints["decided"] = completed.waiting_checkpoint
    approve(completed, world.users["approver"])
    assert completed.state == "COMPLETED", completed.state
    declined = start("declined")
    decline(declined, world.users["approver"], requested_change={"slot_id": "S-N1-02"})
    start("failed", "unavailable_tool")
    start("escalated", "denied_scope")
    clarify = start("clarify", "clarify")
    world.checkpoints["clarification"] = clarify.waiting_checkpoint
    start("external", "wait_external")
    outage = start("outage", fault_plan=LEDGER_OUTAGE)
    approve(outage, world.users["approver"])
    attempt = EffectAttempt.objects.filter(run=outage).order_by("-created_at").first()
    assert attempt is not None and attempt.unresolved, "the ledger outage left no obligation"
    world.attempts["unresolved"] = attempt.pk
    lead_run = start("lead_waiting", principal="user:lead", requested_by=world.users["lead"])
    world.checkpoints["lead_approval"] = lead_run.waiting_checkpoint
    south = start(
        "south_waiting",
        tenant="south",
        principal="user:operator-south",
        requested_by=world.users["operator_south"],
        equipment_id="EQ-31",
        location_id="LOC-S1",
    )
    world.checkpoints["south_approval"] = south.waiting_checkpoint
    from api.tokens import token_create

    world.tokens["operator"] = token_create(user=operator, name="matrix")[0].pk
    for label in ("completed", "south_waiting"):
        ev = Evidence.objects.filter(run_id=world.runs[label]).order_by("created_at").last()
        assert ev is not None
        world.evidence[label] = (world.runs[label], ev.pk)

    def version(label: str, ref: str) -> None:
        capability_id, number = ref.split("@")
        world.versions[label] = CapabilityVersion.objects.get(
            capability_id=capability_id, version=number
        ).pk

    version("effect", "reserve_part@1.0.0")
    version("read", "read_equipment@1.0.0")
    candidate = (
        CapabilityVersion.objects.filter(lifecycle=Lifecycle.DISCOVERED, source="reviewed")
        .order_by("capability_id", "version")
        .first()
    )
    assert candidate is not None, "no reviewed candidate version in the catalog"
    world.versions["reviewed_candidate"] = candidate.pk
    imported = catalog_services.candidate_import(
        text=IMPORTED_TOOL, server="mcp.example.test", user=world.users["catalog_admin"]
    )
    world.versions["imported"] = imported.created[0].pk
    # The same list imported again through the console's service: north's import record.
    world.catalog["tool_list_import"] = catalog_services.tool_list_import(
        text=IMPORTED_TOOL,
        server="mcp.example.test",
        user=world.users["catalog_admin"],
        tenant="north",
    ).pk
    changed = catalog_services.candidate_import(
        text=IMPORTED_TOOL.replace("(remote)", "(remote, changed)"),
        server="mcp.example.test",
        user=world.users["catalog_admin"],
    )
    world.catalog["drift"] = changed.drifts[0].pk
    # A registered server nothing listens for (port 9 refuses at once): discovering it
    # records a failed Discovery quickly, and nothing else.
    server = tool_server_register(
        user=world.users["catalog_admin"],
        name="matrix-http",
        transport="http",
        url="http://127.0.0.1:9/mcp",
    )
    world.catalog["server"] = server.pk
    world.catalog["discovery"] = tool_server_discover(server_id=server.pk).pk
    # A bulk cancel of north (started, not yet processed) and a saved view of north.
    from operations import saved_views
    from operations import services as operations

    query = {"world": "faultlab", "state": "WAITING_HUMAN"}
    count = operations.cancel_preview(tenant="north", query=query).count
    # Deferred: nothing drains it in the background while the matrix reads the database.
    with override_settings(FIELDOPS_EXECUTION="deferred"):
        operation = operations.operation_start_cancel(
            tenant="north", by_ref="user:operator", query=query, reason="matrix", confirm=count
        )
    world.operations["operation"] = str(operation.pk)
    world.operations["saved_view"] = str(
        saved_views.saved_view_create(
            tenant="north", by_ref="user:operator", page="runs", name="matrix", query=query
        ).pk
    )
    return world


# -- snapshots -------------------------------------------------------------------------
# Sessions change when anyone signs in; they are not domain state.
NOT_STATE = frozenset({Session._meta.label})


def snapshot() -> dict[str, tuple[int, str]]:
    """(row count, digest of every row) of every table but sessions, in one query on
    PostgreSQL (the database hashes its rows' text) and one per table on SQLite."""
    tables = {
        model._meta.label: model._meta.db_table
        for model in apps.get_models(include_auto_created=True)
        if model._meta.label not in NOT_STATE
    }
    out: dict[str, tuple[int, str]] = {}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                " UNION ALL ".join(
                    f"SELECT %s, count(*), md5(coalesce(string_agg(t::text, '|' "  # noqa: S608
                    f"ORDER BY t::text), '')) FROM {connection.ops.quote_name(table)} t"
                    for table in tables.values()
                ),
                list(tables),
            )
            for label, count, digest in cursor.fetchall():
                out[label] = (count, digest)
            return out
        for label, table in tables.items():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            rows = sorted(repr(row) for row in cursor.fetchall())
            out[label] = (len(rows), hashlib.sha256("|".join(rows).encode()).hexdigest())
    return out


def changed(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> list[str]:
    """Tables whose rows differ, with their row counts before -> after."""
    return [
        f"{label} ({before[label][0]} -> {after[label][0]} rows)"
        for label in sorted(before)
        if before[label] != after[label]
    ]


WORLDS = ("live", "faultlab")


def tenant_snapshot(tenant: str) -> str:
    """Digest of everything tenant-owned: its runs (and their events, evidence, effect
    attempts, checkpoints and decisions), its ledger entries and inventory."""
    from approvals.models import Decision, DecisionRefusal
    from runs.models import Event
    from sim.world.models import InventorySlot, LedgerEntry

    parts = [
        list(Run.objects.filter(tenant=tenant).order_by("pk").values_list()),
        list(Event.objects.filter(run__tenant=tenant).order_by("pk").values_list("pk", "hash")),
        list(Evidence.objects.filter(run__tenant=tenant).order_by("pk").values_list("pk")),
        list(EffectAttempt.objects.filter(run__tenant=tenant).order_by("pk").values_list()),
        list(Checkpoint.objects.filter(tenant=tenant).order_by("pk").values_list()),
        list(Decision.objects.filter(checkpoint__tenant=tenant).order_by("pk").values_list()),
        list(DecisionRefusal.objects.filter(run__tenant=tenant).order_by("pk").values_list()),
        list(LedgerEntry.objects.filter(tenant=tenant).order_by("pk").values_list()),
        # Simulations seed their own worlds (for every tenant): only the real ones count.
        list(
            InventorySlot.objects.filter(tenant=tenant, namespace__in=WORLDS)
            .order_by("pk")
            .values_list()
        ),
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()
