"""The authorization policy of every route, kept in the tests (one row per URL name).

Each row says which methods the route serves, who may use each method, which objects its
URL carries, and a *valid* request body: the matrix sends the wrong principals exactly
the request the right principal would send, so a refusal can only come from the access
rules. ``tests/security/test_authorization.py`` fails when a route has no row here, so a
new route cannot slip in unreviewed.

Principals (``tests.security.world.PRINCIPALS``): anonymous; approver, operator, catalog
admin and lead (operator + approver) of each tenant; and an outsider of tenant south who
holds every role. North runs are requested by ``operator``, south ones by
``operator_south``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from approvals.models import Checkpoint
from catalog.models import CapabilityVersion
from runs.models import Evidence, Run
from runs.runbooks import RUNBOOKS
from sim import faultlab
from tests.security.world import World

APPROVER, OPERATOR, CATALOG_ADMIN = "approver", "operator", "catalog-admin"
FAULTLAB_TENANT = faultlab.TENANT  # its fixtures create runs of this tenant


@dataclass(frozen=True)
class Obj:
    """One object a route's URL (or body) names."""

    label: str
    kind: str  # run | evidence | approval | clarification | version | contract | runbook | ...
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    tenant: str | None = None  # None: not tenant-owned (catalog, runbooks, pages)
    requester: str = ""  # the principal who requested the run (checkpoints)


NONE = Obj("-", "none")

# -- who may ---------------------------------------------------------------------------
Access = Callable[[World, str, Obj], bool]


def signed_in(world: World, principal: str, obj: Obj) -> bool:
    return principal != "anonymous"


def staff(world: World, principal: str, obj: Obj) -> bool:
    user = world.users.get(principal)
    return bool(user is not None and user.is_staff)


def roles(*wanted: str) -> Access:
    def check(world: World, principal: str, obj: Obj) -> bool:
        return bool(world.roles_of(principal) & set(wanted))

    check.__name__ = " or ".join(wanted)
    return check


def approver_or_clarification_requester(world: World, principal: str, obj: Obj) -> bool:
    if APPROVER in world.roles_of(principal):
        return True
    return obj.kind == "clarification" and principal == obj.requester


def approver_of_approvals(world: World, principal: str, obj: Obj) -> bool:
    return obj.kind == "approval" and APPROVER in world.roles_of(principal)


def requester_of_clarifications(world: World, principal: str, obj: Obj) -> bool:
    return obj.kind == "clarification" and principal == obj.requester


def faultlab_operator(world: World, principal: str, obj: Obj) -> bool:
    return OPERATOR in world.roles_of(principal) and world.tenant_of(principal) == FAULTLAB_TENANT


def token_owner(world: World, principal: str, obj: Obj) -> bool:
    return principal == obj.requester


PUBLIC = "public"  # no sign-in needed (health, login, logout)
SIGNED = "signed"  # HMAC-signed machine endpoint: a session authenticates nothing


@dataclass(frozen=True)
class Variant:
    """A request shape: a plain page, or an HTMX partial (its headers and query)."""

    name: str = "page"
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_htmx(self) -> bool:
        return self.headers.get("HTTP_HX_REQUEST") == "true"


PAGE = Variant()


def htmx(target: str = "", **query: str) -> Variant:
    # As a browser sends it: the page the region is on (the way back after a sign-in).
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": "http://testserver/"}
    if target:
        headers["HTTP_HX_TARGET"] = target
    return Variant(f"htmx:{target or 'request'}", query, headers)


Body = Callable[[World, str, Obj], dict[str, Any]]


@dataclass(frozen=True)
class Rule:
    may: Mapping[str, Access | str]  # method -> who may (a check, PUBLIC or SIGNED)
    objects: str = ""  # which objects the URL carries (see ``objects_for``)
    body: Body | None = None  # a valid body for the unsafe methods
    variants: tuple[Variant, ...] = (PAGE,)
    # Status a signed-in principal gets where ``may`` says no, per object kind (default 403).
    # 400: the object cannot take this action at all, whoever asks (recorded in the refusal
    # log only: approvals.domain.WRONG_KIND_REFUSALS).
    denied: Mapping[str, int] = field(default_factory=dict)
    fresh_client: bool = False  # the route changes the session itself (login, logout)
    unserved: frozenset[int] = frozenset()  # statuses of unserved methods, if not 405
    # What an anonymous request gets where ``may`` says no; 302 means "sent to the login
    # page", which an HTMX request gets as an empty 200 with ``HX-Redirect`` instead.
    anonymous: int = 302


def _start_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    south = world.tenant_of(principal) == "south"
    return {
        "scenario": "reservation",
        "equipment_id": "EQ-31" if south else "EQ-17",
        "location_id": "LOC-S1" if south else "LOC-N1",
    }


def _bulk_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    return {"run": [world.runs["waiting"], world.runs["south_waiting"]], "reason": "matrix"}


def _decide_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    from approvals.models import Checkpoint

    checkpoint = Checkpoint.objects.get(pk=obj.kwargs["checkpoint_id"])
    return {"verdict": "approve", "seen_hash": checkpoint.proposal_hash, "reason": "matrix"}


def _gate_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    return {"capability_id": "reserve_part", "version": "1.0.0", "open": "0", "reason": "matrix"}


def _admit_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    return {
        "task_transition": "NEED_PART -> HAVE_PART_EVIDENCE",
        "alternatives": "human lookup",
        "decision": "ADMIT_BOUNDED",
        "expiry": "on contract change",
        "reason": "matrix",
        "local_ref": "check_inventory@1.0.0",
    }


def _const(data: dict[str, Any]) -> Body:
    return lambda world, principal, obj: dict(data)


def _revoke_body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
    """The confirmation the revoke page's form sends (the token's public prefix)."""
    from api.models import ApiToken

    return {"confirm": ApiToken.objects.get(pk=obj.kwargs["token_id"]).prefix}


def _count_body(preview: Callable[..., Any], query: dict[str, str]) -> Body:
    """A bulk action's valid start: the principal's own tenant's count for ``query``."""

    def body(world: World, principal: str, obj: Obj) -> dict[str, Any]:
        tenant = world.tenant_of(principal) or "north"
        count = preview(tenant=tenant, query=query).count
        return {**query, "reason": "matrix", "confirm": str(count)}

    return body


def _operations_previews() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    from operations import services

    return services.cancel_preview, services.reconcile_preview, services.incident_preview


_CANCEL, _RECONCILE, _INCIDENT = _operations_previews()
_FILTER = {"world": "faultlab", "state": "WAITING_HUMAN"}
_VERSION = {"capability": "reserve_part@1.0.0"}


def creator_of_view(world: World, principal: str, obj: Obj) -> bool:
    return principal == obj.requester


POLICY: Mapping[str, Rule] = {
    # -- machine endpoints and sign-in -------------------------------------------------
    "api-callback": Rule({"POST": SIGNED}, body=_const({"delivery_id": "matrix"})),
    # -- the JSON API: bearer tokens only, so a session authenticates nothing (401) -------
    "api-v1-schema": Rule({"GET": PUBLIC}),
    "api-v1:api-root": Rule({}, unserved=frozenset({404, 405})),  # no docs page is served
    "api-v1:checkpoints_list": Rule({"GET": SIGNED}),
    "api-v1:checkpoints_read": Rule({"GET": SIGNED}, objects="checkpoint"),
    "api-v1:checkpoints_decide": Rule({"POST": SIGNED}, objects="checkpoint", body=_decide_body),
    "api-v1:runs_start": Rule({"POST": SIGNED}, body=_start_body),
    "api-v1:runs_read": Rule({"GET": SIGNED}, objects="run"),
    "api-v1:runs_cancel": Rule({"POST": SIGNED}, objects="run", body=_const({"reason": "m"})),
    # Anyone holding a role may hold tokens (a token acts with its user's roles).
    "api-tokens": Rule({"GET": roles(APPROVER, OPERATOR, CATALOG_ADMIN)}),
    "api-tokens-create": Rule(
        {"POST": roles(APPROVER, OPERATOR, CATALOG_ADMIN)},
        body=_const({"name": "matrix", "lifetime_days": "90"}),
    ),
    # Only its owner sees a token's revoke confirmation and confirms it; anyone else's is
    # not disclosed (404).
    "api-tokens-token": Rule({"GET": roles(APPROVER, OPERATOR, CATALOG_ADMIN)}, objects="token"),
    "api-tokens-revoke": Rule(
        {"GET": token_owner, "POST": token_owner},
        objects="token",
        body=_revoke_body,
        denied={"token": 404},
    ),
    "health": Rule({"GET": PUBLIC}),
    # Prometheus scrapes with the ops token; no session is asked for (401, not a redirect).
    "metrics": Rule({"GET": staff}, anonymous=401),
    "login": Rule(
        # Django's LoginView treats PUT as POST, and redirects a signed-in user before it
        # looks at the method (so DELETE is 405 or that redirect).
        {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
        body=_const({"username": "approver", "password": "wrong"}),
        fresh_client=True,
        unserved=frozenset({302, 405}),
    ),
    "logout": Rule({"POST": PUBLIC}, body=_const({}), fresh_client=True),
    # -- runs --------------------------------------------------------------------------
    "runs-all": Rule({"GET": signed_in}),
    "runs-list": Rule(
        {"GET": signed_in}, variants=(PAGE, htmx("run-table", state="WAITING_HUMAN"))
    ),
    "runs-start": Rule({"POST": roles(OPERATOR)}, body=_start_body),
    "runs-bulk-cancel": Rule({"POST": roles(OPERATOR)}, body=_bulk_body),
    "runs-bulk-cancel-result": Rule({"GET": roles(OPERATOR)}),
    "runs-detail": Rule(
        {"GET": signed_in},
        objects="run",
        variants=(
            PAGE,
            htmx("run-live", since="0"),
            Variant("kind", {"kind": "effects"}),
        ),
    ),
    "runs-short": Rule({"GET": signed_in}, objects="short_run"),
    "runs-cancel": Rule(
        {"POST": roles(OPERATOR)}, objects="run", body=_const({"reason": "matrix"})
    ),
    "runs-follow-up": Rule({"POST": roles(OPERATOR)}, objects="run", body=_const({})),
    "runs-budget": Rule(
        {"POST": roles(OPERATOR)},
        objects="run",
        body=_const({"budget": "turns", "limit": "40", "reason": "matrix"}),
    ),
    "runs-export": Rule({"GET": signed_in}, objects="run"),
    "runs-checkpoints": Rule({"GET": signed_in}, objects="run"),
    "runs-attempts": Rule({"GET": signed_in}, objects="run"),
    "runs-follow-ups": Rule({"GET": signed_in}, objects="run"),
    "runs-evidence": Rule({"GET": signed_in}, objects="evidence"),
    "runs-replay-audit": Rule({"GET": signed_in}, objects="run"),
    "runs-evidence-list": Rule({"GET": signed_in}, objects="run"),
    "runs-replay": Rule({"GET": signed_in}, objects="run"),
    "runs-replay-decision": Rule(
        {"GET": signed_in},
        objects="run",
        variants=(PAGE, Variant("candidate", {"candidate": "abstain"})),
    ),
    "runs-replay-simulation": Rule(
        {"GET": signed_in, "POST": roles(OPERATOR)},
        objects="run",
        body=_const({"scenario": "abstain"}),
    ),
    # -- operations --------------------------------------------------------------------
    "recovery": Rule({"GET": roles(OPERATOR)}, variants=(PAGE, Variant("lookup", {"q": "k"}))),
    "recovery-reconcile": Rule(
        {"POST": roles(OPERATOR)},
        objects="attempt",
        body=lambda world, principal, obj: {"attempt_id": obj.kwargs["attempt_id"]},
    ),
    "recovery-conflict-review": Rule(
        {"POST": roles(OPERATOR)},
        objects="attempt",
        body=lambda world, principal, obj: {"attempt_id": obj.kwargs["attempt_id"], "reason": "m"},
    ),
    "runbooks": Rule({"GET": roles(OPERATOR, CATALOG_ADMIN)}),
    "runbooks-detail": Rule({"GET": roles(OPERATOR, CATALOG_ADMIN)}, objects="runbook"),
    "runbooks-gate": Rule({"POST": roles(OPERATOR)}, objects="runbook", body=_gate_body),
    "faultlab": Rule({"GET": roles(OPERATOR)}),
    "faultlab-run": Rule(
        {"POST": faultlab_operator},  # its runs are tenant north's: north operators only
        body=_const({"fixture": "duplicate_event", "chain": "1"}),
        variants=(PAGE, htmx("fx-duplicate_event")),
    ),
    "faultlab-result": Rule({"GET": roles(OPERATOR)}, objects="fixture"),
    "review-packet": Rule({"GET": signed_in}),
    # -- bulk operations, exports, saved views (issue 22) -------------------------------
    "operations-list": Rule({"GET": roles(OPERATOR)}, variants=(PAGE, htmx("op-table"))),
    "operations-cancel-preview": Rule(
        {"GET": roles(OPERATOR)}, variants=(PAGE, Variant("filter", _FILTER))
    ),
    "operations-cancel-start": Rule({"POST": roles(OPERATOR)}, body=_count_body(_CANCEL, _FILTER)),
    "operations-reconcile-preview": Rule({"GET": roles(OPERATOR)}),
    "operations-reconcile-start": Rule({"POST": roles(OPERATOR)}, body=_count_body(_RECONCILE, {})),
    "operations-incident-preview": Rule(
        {"GET": roles(OPERATOR)}, variants=(Variant("version", _VERSION),)
    ),
    "operations-incident-start": Rule(
        {"POST": roles(OPERATOR)}, body=_count_body(_INCIDENT, _VERSION)
    ),
    "operations-detail": Rule(
        {"GET": roles(OPERATOR)}, objects="operation", variants=(PAGE, htmx("op-progress"))
    ),
    "operations-move": Rule({"POST": roles(OPERATOR)}, objects="operation_move", body=_const({})),
    "operations-results-export": Rule({"GET": roles(OPERATOR)}, objects="operation_export"),
    "operations-runs-export": Rule({"GET": signed_in}, objects="export_format"),
    "operations-state-counts": Rule(
        {"GET": signed_in}, variants=(PAGE, Variant("filter", _FILTER))
    ),
    "saved-views-create": Rule(
        {"POST": roles(APPROVER, OPERATOR, CATALOG_ADMIN)},
        body=lambda world, principal, obj: {
            "page": "runs",
            "name": f"matrix {principal}",
            "query": "world=faultlab",
        },
    ),
    "saved-views": Rule({"GET": signed_in}),
    "saved-views-open": Rule({"GET": signed_in}, objects="saved_view"),
    "saved-views-delete": Rule({"POST": creator_of_view}, objects="saved_view", body=_const({})),
    # -- approvals ---------------------------------------------------------------------
    "approvals-queue": Rule({"GET": roles(APPROVER)}),
    "approvals-history": Rule({"GET": roles(APPROVER)}),
    "approvals-deliveries": Rule({"GET": roles(APPROVER, OPERATOR)}),
    # Each user's own questions (their tenant's clarifications they requested), any role.
    "approvals-questions": Rule({"GET": signed_in}),
    "approvals-detail": Rule({"GET": approver_or_clarification_requester}, objects="checkpoint"),
    "approvals-decide": Rule(
        {"POST": approver_of_approvals},
        objects="checkpoint",
        body=_decide_body,
        denied={"clarification": 400},  # not_an_approval: a question is answered, not approved
    ),
    "approvals-answer": Rule(
        {"POST": requester_of_clarifications},
        objects="checkpoint",
        body=_const({"answer": "LOC-N1"}),
        denied={"approval": 400},  # not_a_question: an approval is decided, not answered
    ),
    # -- catalog (shared by every tenant; its roles are deployment-wide) -----------------
    "catalog-index": Rule(
        {"GET": signed_in}, variants=(PAGE, htmx("catalog-table", lifecycle="ADMITTED"))
    ),
    "catalog-import": Rule(
        {"GET": signed_in, "POST": roles(CATALOG_ADMIN)},
        body=lambda world, principal, obj: {
            "server": "mcp.matrix.test",
            "tool_list": '{"tools": [{"name": "matrix_tool", "inputSchema": {"type": "object"}}]}',
        },
    ),
    "catalog-imports": Rule({"GET": signed_in}),
    "catalog-import-result": Rule({"GET": signed_in}, objects="tool_list_import"),
    "catalog-diff": Rule(
        {"GET": signed_in},
        variants=(PAGE, Variant("pair", {"a": "reserve_part@1.0.0", "b": "search_manual@1.1.0"})),
    ),
    "catalog-rejections": Rule({"GET": signed_in}),
    "catalog-routing": Rule({"GET": signed_in}, variants=(PAGE, htmx("routing-report", k="2"))),
    "catalog-candidates": Rule({"GET": signed_in}),
    "catalog-versions": Rule({"GET": signed_in}),
    "catalog-version": Rule({"GET": signed_in}, objects="version"),
    "catalog-candidate": Rule({"GET": signed_in}, objects="version"),
    "catalog-admit": Rule({"POST": roles(CATALOG_ADMIN)}, objects="version", body=_admit_body),
    "catalog-decide": Rule(
        {"POST": roles(CATALOG_ADMIN)},
        objects="version",
        body=_const({"action": "defer", "reason": "matrix"}),
    ),
    "catalog-gate": Rule(
        {"POST": roles(CATALOG_ADMIN)},
        objects="version",
        body=_const({"open": "0", "reason": "matrix"}),
    ),
    "catalog-tenant-gate": Rule(
        {"POST": roles(OPERATOR)},
        objects="version",
        body=_const({"open": "0", "reason": "matrix"}),
    ),
    "catalog-retire": Rule(
        {"GET": signed_in, "POST": roles(CATALOG_ADMIN)},
        objects="version",
        body=_const({"reason": "matrix", "acknowledge": "1"}),
    ),
    "catalog-retire-withdraw": Rule(
        {"POST": roles(CATALOG_ADMIN)},
        objects="version",
        body=_const({"reason": "matrix"}),
    ),
    "catalog-capability": Rule({"GET": signed_in}, objects="capability"),
    "catalog-contract": Rule({"GET": signed_in}, objects="contract"),
    "catalog-servers": Rule(
        {"GET": signed_in, "POST": roles(CATALOG_ADMIN)},
        body=_const({"name": "matrix-new", "transport": "http", "url": "http://127.0.0.1:9/mcp"}),
    ),
    "catalog-server": Rule({"GET": signed_in}, objects="server"),
    "catalog-server-discover": Rule(
        {"POST": roles(CATALOG_ADMIN)}, objects="server", body=_const({})
    ),
    "catalog-discoveries": Rule({"GET": signed_in}),
    "catalog-drifts": Rule({"GET": signed_in}),
    "catalog-drift": Rule({"GET": signed_in}, objects="drift"),
    "catalog-discovery": Rule({"GET": signed_in}, objects="discovery"),
    "catalog-drift-resolve": Rule(
        {"POST": roles(CATALOG_ADMIN)}, objects="drift", body=_const({"reason": "matrix"})
    ),
}


def objects_for(world: World, kind: str) -> list[Obj]:
    """The objects a route's URL carries: north objects, and south ones where tenant-owned."""
    if not kind:
        return [NONE]
    if kind == "run":
        return [
            Obj(label, "run", {"run_id": world.runs[label]}, tenant)
            for label, tenant in (
                ("waiting", "north"),
                ("completed", "north"),
                ("south_waiting", "south"),
            )
        ]
    if kind == "short_run":  # a run's short id, as the lists show it
        return [
            Obj(label, "run", {"short_id": str(world.runs[label]).split("-")[0]}, tenant)
            for label, tenant in (("waiting", "north"), ("south_waiting", "south"))
        ]
    if kind == "evidence":
        return [
            Obj(label, "evidence", {"run_id": run_id, "evidence_id": ev}, tenant)
            for label, tenant in (("completed", "north"), ("south_waiting", "south"))
            for run_id, ev in [world.evidence[label]]
        ]
    if kind == "checkpoint":
        return [
            Obj(label, kind_, {"checkpoint_id": world.checkpoints[label]}, tenant, requester)
            for label, kind_, tenant, requester in (
                ("approval", "approval", "north", "operator"),
                ("clarification", "clarification", "north", "operator"),
                ("south_approval", "approval", "south", "operator_south"),
            )
        ]
    if kind == "attempt":
        return [Obj("unresolved", "attempt", {"attempt_id": world.attempts["unresolved"]}, "north")]
    if kind == "version":
        return [
            Obj(label, "version", {"version_id": world.versions[label]})
            for label in ("effect", "imported", "reviewed_candidate")
        ]
    if kind == "capability":  # a contract's capability, without its version
        return [
            Obj(cap, "capability", {"capability_id": cap})
            for cap in ("reserve_part", "read_equipment")
        ]
    if kind == "contract":
        return [
            Obj(ref, "contract", {"capability_id": ref.split("@")[0], "version": ref.split("@")[1]})
            for ref in ("reserve_part@1.0.0", "read_equipment@1.0.0")
        ]
    if kind == "runbook":
        return [Obj("ledger-outage", "runbook", {"slug": "ledger-outage"})]
    if kind == "fixture":
        return [Obj("duplicate_event", "fixture", {"name": "duplicate_event"})]
    if kind == "token":
        return [
            Obj("operator_token", "token", {"token_id": world.tokens["operator"]}, None, "operator")
        ]
    if kind in ("operation", "operation_move", "operation_export"):
        extra = {"operation_move": {"action": "pause"}, "operation_export": {"fmt": "csv"}}
        kwargs = {"operation_id": world.operations["operation"], **extra.get(kind, {})}
        return [Obj("north_operation", kind, kwargs, "north")]
    if kind == "saved_view":
        kwargs = {"view_id": world.operations["saved_view"]}
        return [Obj("north_view", kind, kwargs, "north", requester="operator")]
    if kind == "export_format":
        return [Obj(fmt, kind, {"fmt": fmt}) for fmt in ("csv", "json")]
    if kind == "tool_list_import":
        kwargs = {"import_id": world.catalog[kind]}
        return [Obj("north_import", kind, kwargs, "north")]
    if kind in ("server", "discovery", "drift"):
        return [Obj(f"matrix-{kind}", kind, {f"{kind}_id": world.catalog[kind]})]
    raise ValueError(f"no objects for kind {kind!r}")


def url_kwargs(obj: Obj) -> dict[str, Any]:
    """The URL kwargs of ``obj`` (objects named in the body carry none)."""
    return {} if obj.kind == "attempt" else dict(obj.kwargs)


def crawl_objects(world: World, kind: str) -> list[Obj]:
    """Every object of ``kind`` in the world (more than the matrix's representatives)."""
    if kind == "run":
        return [
            Obj(str(r.pk)[:8], "run", {"run_id": str(r.pk)}, r.tenant) for r in Run.objects.all()
        ]
    if kind == "evidence":
        out = []
        for run in Run.objects.all():
            ids = list(
                Evidence.objects.filter(run=run).order_by("created_at").values_list("pk", flat=True)
            )
            for ev in {ids[0], ids[-1]}:
                out.append(
                    Obj(ev, "evidence", {"run_id": str(run.pk), "evidence_id": ev}, run.tenant)
                )
        return out
    if kind == "checkpoint":
        return [
            Obj(c.pk, c.kind.lower(), {"checkpoint_id": c.pk}, c.tenant)
            for c in Checkpoint.objects.all()
        ]
    if kind == "version":
        return [
            Obj(str(v.pk), "version", {"version_id": v.pk}) for v in CapabilityVersion.objects.all()
        ]
    if kind == "contract":
        return [
            Obj(v.ref, "contract", {"capability_id": v.capability_id, "version": v.version})
            for v in CapabilityVersion.objects.all()
        ]
    if kind == "runbook":
        return [Obj(r.slug, "runbook", {"slug": r.slug}) for r in RUNBOOKS]
    return objects_for(world, kind)
