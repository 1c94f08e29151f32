"""Catalog reads for the console: version lists, contract and candidate views, diffs and
the routing report. Nothing here writes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from access.roles import tenant_of
from capabilities import registry
from capabilities.contracts import (
    Contract,
    enforcement_projection,
    model_projection,
    projection_parity,
)
from capabilities.rejected import REJECTION_LOG
from capabilities.reviewed import LOCAL_CONTRACTS, local_contract
from catalog import servers
from catalog.domain import diff as diffing
from catalog.domain import discovery, lifecycle, versions
from catalog.models import (
    CapabilityVersion,
    DiscoveryOutcome,
    Lifecycle,
    LifecycleDecision,
    Source,
    ToolListImport,
)

SOURCES = [(s.value, s.label) for s in Source]


@dataclass(frozen=True)
class VersionFilters:
    lifecycle: str = ""
    source: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> VersionFilters:
        state = query.get("lifecycle", "")
        source = query.get("source", "")
        return cls(
            lifecycle=state if state in Lifecycle.values else "",
            source=source if source in Source.values else "",
            q=" ".join(str(query.get("q", "")).split())[:64],
        )

    def apply(self, rows: QuerySet[CapabilityVersion]) -> QuerySet[CapabilityVersion]:
        if self.lifecycle:
            rows = rows.filter(lifecycle=self.lifecycle)
        if self.source:
            rows = rows.filter(source=self.source)
        if self.q:
            rows = rows.filter(capability_id__icontains=self.q)
        return rows


def newest_admitted_versions() -> dict[str, versions.Offer]:
    """Per capability id, the version a new run pins now: the newest ADMITTED reviewed
    version the code implements (``catalog.domain.versions.newest_admitted``)."""
    rows = CapabilityVersion.objects.filter(
        lifecycle=Lifecycle.ADMITTED, source=Source.REVIEWED
    ).only("capability_id", "version", "digest", "lifecycle")
    return versions.newest_admitted(
        versions.Offer(r.capability_id, r.version, r.digest, r.lifecycle)
        for r in rows
        if registry.contract_for(r.capability_id, r.version) is not None
    )


def dispatch_status_of(
    row: CapabilityVersion, newest: Mapping[str, versions.Offer]
) -> versions.DispatchStatus:
    """The true dispatch status of ``row`` (pass ``newest_admitted_versions()``)."""
    if row.discovered:
        target = (
            f" (admission mapped it to {row.local_contract_ref})" if row.local_contract_ref else ""
        )
        return versions.DispatchStatus(
            "nothing", "no", f"a discovered definition never runs itself{target}"
        )
    offer = newest.get(row.capability_id)
    return versions.dispatch_status(
        lifecycle=row.lifecycle,
        has_adapter=registry.contract_for(row.capability_id, row.version) is not None,
        newest=offer is not None and offer.version == row.version,
    )


def version_list(filters: VersionFilters) -> list[CapabilityVersion]:
    rows = filters.apply(CapabilityVersion.objects.select_related("imported_by")).order_by(
        "capability_id", "source", "created_at", "version"
    )
    out = list(rows[:500])
    newest = newest_admitted_versions()
    for row in out:
        row.dispatch = dispatch_status_of(row, newest)
    return out


def lifecycle_counts() -> dict[str, int]:
    counts = Counter(CapabilityVersion.objects.values_list("lifecycle", flat=True))
    return {state: counts.get(state, 0) for state in Lifecycle.values}


def decisions_of(row: CapabilityVersion, *, tenant: str | None = None) -> list[LifecycleDecision]:
    """``row``'s decisions, newest first, as a viewer of ``tenant`` may read them: the run
    ids a retirement or deprecation recorded (of every tenant) are shown for ``tenant``'s
    runs only, the others counted (``other_tenant_runs``, ``other_tenant_effects``)."""
    decisions = list(row.decisions.select_related("reviewer").order_by("-created_at", "-id"))
    for decision in decisions:
        details = decision.details
        if isinstance(details, dict) and ("active_runs" in details or "unknown_effects" in details):
            decision.details = _recorded_for_tenant(details, tenant)
    return decisions


def _recorded_for_tenant(details: dict[str, Any], tenant: str | None) -> dict[str, Any]:
    """Recorded ``details`` with their lists of runs and unknown effects cut to ``tenant``'s
    (read in memory for the page; the record itself is never changed)."""
    from runs.pins import run_tenants

    runs = [str(r) for r in details.get("active_runs") or []]
    effects = [e for e in details.get("unknown_effects") or [] if isinstance(e, dict)]
    tenants = run_tenants([*runs, *(str(e.get("run", "")) for e in effects)])
    mine = [r for r in runs if tenant and tenants.get(r) == tenant]
    mine_effects = [e for e in effects if tenant and tenants.get(str(e.get("run", ""))) == tenant]
    return {
        **details,
        "active_runs": mine,
        "unknown_effects": mine_effects,
        "other_tenant_runs": len(runs) - len(mine),
        "other_tenant_effects": len(effects) - len(mine_effects),
    }


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def is_trusted_control(row: CapabilityVersion) -> bool:
    """A reviewed control outcome (ask_user, wait_for_event, ...): never deprecated or
    retired in the catalog (the service refuses it as ``trusted_control``)."""
    from catalog.services import TRUSTED_CONTROLS

    return row.source == Source.REVIEWED and row.capability_id in TRUSTED_CONTROLS


def lifecycle_actions(row: CapabilityVersion) -> list[str]:
    """The lifecycle steps the console offers for ``row``: those from its state, less the
    ones the service would refuse for a trusted control."""
    actions = lifecycle.actions_from(row.lifecycle)
    if is_trusted_control(row):
        actions = [a for a in actions if a not in ("deprecate", "retire")]
    return actions


def contract_view(row: CapabilityVersion, *, tenant: str | None = None) -> dict[str, Any]:
    """Everything the contract page shows about a reviewed version."""
    code = local_contract(row.capability_id, row.version)
    data: dict[str, Any] = {
        "row": row,
        "contract": row.contract,
        "contract_json": pretty(row.contract),
        "in_code": code is not None,
        "code_agrees": code is not None and code.digest == row.digest,
        "dispatch": dispatch_status_of(row, newest_admitted_versions()),
        "actions": lifecycle_actions(row),
        "trusted_control": is_trusted_control(row),
        "decisions": decisions_of(row, tenant=tenant),
        "siblings": _with_dispatch(
            CapabilityVersion.objects.filter(capability_id=row.capability_id)
            .exclude(pk=row.pk)
            .order_by("source", "version")
        ),
        "inventory": None,
    }
    if code is not None:
        data["model_projection"] = pretty(model_projection(code))
        data["enforcement_projection"] = pretty(enforcement_projection(code))
        data["parity"] = projection_parity(code)
    if row.lifecycle in (Lifecycle.ADMITTED, Lifecycle.DEPRECATED, Lifecycle.RETIRED):
        from catalog.services import retirement_inventory

        data["inventory"] = retirement_inventory(row, tenant=tenant)
    return data


def _with_dispatch(rows: QuerySet[CapabilityVersion]) -> list[CapabilityVersion]:
    out = list(rows)
    newest = newest_admitted_versions()
    for other in out:
        other.dispatch = dispatch_status_of(other, newest)
    return out


def retire_view(row: CapabilityVersion, *, viewer: Any = None) -> dict[str, Any]:
    """The retire page: live pinned runs, unknown effects, successor and the two-person
    state, read now (never from an earlier decision). ``own_request`` is True when
    ``viewer`` requested the pending retirement (they may withdraw it, never confirm it)."""
    from catalog.services import retirement_inventory, retirement_request_stamp

    inventory = retirement_inventory(row, tenant=tenant_of(viewer))
    return {
        "row": row,
        "dispatch": dispatch_status_of(row, newest_admitted_versions()),
        "inventory": inventory,
        "risks": [(r, versions.RETIREMENT_RISKS[r]) for r in inventory["risks"]],
        "can_retire": "retire" in lifecycle_actions(row),
        "trusted_control": is_trusted_control(row),
        "requested_by": row.retire_requested_by,
        "requested_at": row.retire_requested_at,
        "confirms": retirement_request_stamp(row),  # the request this page shows
        "own_request": row.retire_requested_by_id is not None
        and row.retire_requested_by_id == getattr(viewer, "pk", None),
        # Why the pending request was made: the second admin decides on it.
        "requested_reason": (
            LifecycleDecision.objects.filter(version=row, action="retire_requested")
            .order_by("-pk")
            .values_list("reason", flat=True)
            .first()
            if row.retire_requested_by_id
            else None
        ),
    }


def candidate_view(row: CapabilityVersion, *, tenant: str | None = None) -> dict[str, Any]:
    """Everything the candidate page shows about a discovered definition."""
    definition = dict(row.definition)
    notes = dict(row.discovery)
    same_name = [c for c in LOCAL_CONTRACTS.values() if c.id == row.capability_id]
    return {
        "row": row,
        "definition": definition,
        "description": definition.get("description", ""),
        "input_schema": pretty(definition.get("inputSchema", {})),
        "output_schema": pretty(definition["outputSchema"]) if "outputSchema" in definition else "",
        "definition_json": pretty(definition),
        "hints": notes.get("hints", {}),
        "flags": notes.get("flags", []),
        "previously_rejected": notes.get("previously_rejected", ""),
        "earlier": notes.get("earlier_definitions", []),
        "actions": lifecycle.actions_from(row.lifecycle),
        "decisions": decisions_of(row, tenant=tenant),
        "local_choices": local_choices(),
        "default_local": (same_name[-1].ref if same_name else ""),
        "hint_checks": [hint_check(row, c) for c in same_name],
        "local_url": _contract_url(row.local_contract_ref),
        "sightings": sightings_of(row),
        "unknown_fields": {
            k: pretty(definition[k]) for k in notes.get("unknown_fields", []) if k in definition
        },
        "unknown_annotations": {
            k: pretty(definition.get("annotations", {}).get(k))
            for k in notes.get("unknown_annotations", [])
        },
        "execution": pretty(definition["execution"]) if "execution" in definition else "",
        "icons": [icon for icon in definition.get("icons", []) or [] if isinstance(icon, Mapping)],
        **_title(definition),
        "drifts": list(row.drifts_from.select_related("after").all()[:20])
        + list(row.drifts_to.select_related("before").all()[:20]),
    }


def _title(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's title as MCP says to show it: ``title``, else ``annotations.title``."""
    annotations = definition.get("annotations")
    if definition.get("title") or not isinstance(annotations, Mapping):
        return {"title": definition.get("title", ""), "title_in_annotations": False}
    title = annotations.get("title") or ""
    return {"title": title, "title_in_annotations": bool(title)}


def _contract_url(ref: str) -> str:
    from django.urls import reverse

    parsed = parse_ref(ref)
    return reverse("catalog-contract", args=list(parsed)) if parsed else ""


def local_choices() -> list[tuple[str, str]]:
    """Reviewed local contracts a discovered tool may be mapped to (not controls)."""
    from catalog.services import TRUSTED_CONTROLS

    return [
        (ref, f"{ref} ({c.effect_class.value})")
        for ref, c in sorted(LOCAL_CONTRACTS.items())
        if c.id not in TRUSTED_CONTROLS
    ]


def hint_check(row: CapabilityVersion, contract: Contract) -> dict[str, Any]:
    """How the untrusted hints compare with one local contract's classification."""
    return {
        "ref": contract.ref,
        "effect_class": contract.effect_class.value,
        "conflicts": lifecycle.hint_conflicts(row.hints, contract.effect_class.value),
        "warnings": lifecycle.hint_warnings(
            row.hints, contract.effect_class.value, contract.open_world
        ),
    }


def parse_ref(ref: str) -> tuple[str, str] | None:
    capability_id, sep, version = (ref or "").rpartition("@")
    if not sep or not capability_id or not version:
        return None
    return capability_id, version


def version_by_ref(ref: str) -> CapabilityVersion | None:
    parsed = parse_ref(ref)
    if parsed is None:
        return None
    return CapabilityVersion.objects.filter(capability_id=parsed[0], version=parsed[1]).first()


def as_definition(row: CapabilityVersion) -> dict[str, Any]:
    """A version in tool-list form: a discovered definition as imported, a reviewed
    contract as its model projection (what a model would be shown) plus output schema."""
    if row.discovered:
        return dict(row.definition)
    code = local_contract(row.capability_id, row.version)
    projection = model_projection(code) if code is not None else {}
    return {
        "name": row.capability_id,
        "description": projection.get("description", row.contract.get("intent", "")),
        "inputSchema": projection.get("input_schema", {}),
        "outputSchema": row.contract.get("output_schema", {}),
    }


def diff_view(left: CapabilityVersion, right: CapabilityVersion) -> dict[str, Any]:
    """A classified diff and its side-by-side rows.

    Two reviewed versions compare as contracts (the change table applies). When either
    side is a discovered definition both compare in tool-list form: a discovered
    definition has no reviewed semantics, so its changes are never lightly classified.
    """
    if left.discovered or right.discovered:
        left_doc, right_doc = as_definition(left), as_definition(right)
        result = diffing.diff_definitions(left_doc, right_doc)
        kind = "definition"
    else:
        left_doc, right_doc = left.contract, right.contract
        result = diffing.diff_contracts(left_doc, right_doc)
        kind = "contract"
    rows = diffing.side_by_side(left_doc, right_doc)
    return {
        "left": left,
        "right": right,
        "kind": kind,
        "diff": result,
        "summary": result.summary(),
        "changes": [
            {
                "change": c,
                "label": diffing.LABELS[c.change_class],
                "requirement": c.requirement,
                "before": _short(c.before),
                "after": _short(c.after),
            }
            for c in result.changes
        ],
        "rows": rows,
        "changed_rows": diffing.changed_rows(rows),
        "table": [
            {"label": diffing.LABELS[cls], "requirement": req, "present": cls in result.classes}
            for cls, req in diffing.CHANGE_TABLE.items()
        ],
    }


def _short(value: Any, limit: int = 240) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def diff_choices() -> list[str]:
    return [v.ref for v in CapabilityVersion.objects.order_by("capability_id", "source", "version")]


def default_diff_pair() -> tuple[str, str]:
    """An instructive default: the admitted search_manual against its reviewed 1.1.0."""
    return "search_manual@1.0.0", "search_manual@1.1.0"


def rejection_log() -> dict[str, Any]:
    rejected_rows = list(
        CapabilityVersion.objects.filter(lifecycle=Lifecycle.REJECTED).order_by("capability_id")
    )
    reasons = {
        d.version_id: d
        for d in LifecycleDecision.objects.filter(
            version__in=rejected_rows, action="reject"
        ).select_related("reviewer")
    }
    return {
        "log": REJECTION_LOG,
        "rows": [(row, reasons.get(row.pk)) for row in rejected_rows],
    }


# -- routing report ----------------------------------------------------------------------
# -- tool servers, discoveries and drift ------------------------------------------------
def tool_servers() -> list[Any]:
    """Registered servers, each with its latest discovery (``latest``) and open drift count."""
    from django.db.models import Count, Q

    from catalog.models import Discovery, ToolServer

    servers = list(
        ToolServer.objects.annotate(
            open_drift=Count("drifts", filter=Q(drifts__resolved_at__isnull=True))
        )
    )
    latest: dict[int, Discovery] = {}
    for run in Discovery.objects.filter(server__in=servers).order_by("server_id", "-id"):
        latest.setdefault(run.server_id, run)
    for server in servers:
        server.latest = latest.get(server.pk)
    return servers


def open_drifts(limit: int = 200) -> list[Any]:
    """Unreviewed drift, the ones under an admitted mapping first (the runbook's data)."""
    from catalog.models import ToolDrift

    rows = list(
        ToolDrift.objects.filter(resolved_at__isnull=True)
        .select_related("before", "after", "tool_server", "discovery")
        .order_by("-detected_at", "-id")[:limit]
    )
    rows.sort(key=lambda d: not d.paused)
    return rows


def server_view(server: Any) -> dict[str, Any]:
    """The server page: identity, history, what it serves now and what it stopped serving."""
    from catalog.models import ToolSighting

    sightings = list(
        ToolSighting.objects.filter(server_label=server.name)
        .select_related("version")
        .order_by("version__capability_id", "-last_seen")
    )
    discoveries = list(server.discoveries.select_related("requested_by")[:30])
    latest_ok = next((d for d in discoveries if d.ok), None)
    return {
        "server": server,
        "current": [s for s in sightings if s.gone_at is None],
        "gone": [s for s in sightings if s.gone_at is not None],
        "discoveries": discoveries,
        "identity": latest_ok.identity if latest_ok else {},
        "identity_json": pretty(latest_ok.identity) if latest_ok else "",
        "drifts": list(
            server.drifts.select_related("before", "after").order_by("-detected_at", "-id")[:50]
        ),
    }


def discovery_view(run: Any) -> dict[str, Any]:
    """One discovery's outcome with links: what is new, changed (with diffs), gone, refused."""
    summary = dict(run.summary)
    refs = {
        ref
        for key in ("created", "unchanged", "also_seen", "gone", "paused")
        for ref in summary.get(key, [])
    }
    refs |= {ref for pair in summary.get("changed", []) for ref in pair}
    rows = {r.ref: r for r in _versions_by_refs(refs)}
    running = run.outcome == DiscoveryOutcome.RUNNING
    return {
        "run": run,
        "server": run.server,
        "running": running and not servers.is_lost(run),
        "lost": running and servers.is_lost(run),
        "elapsed_seconds": int((timezone.now() - run.started_at).total_seconds()),
        "deadline_seconds": int(servers.limits_from_settings().timeout_seconds),
        "summary": summary,
        "rows": rows,
        "created": [rows[r] for r in summary.get("created", []) if r in rows],
        "unchanged": [rows[r] for r in summary.get("unchanged", []) if r in rows],
        "also_seen": [rows[r] for r in summary.get("also_seen", []) if r in rows],
        "changed": [
            (rows[a], rows[b]) for a, b in summary.get("changed", []) if a in rows and b in rows
        ],
        "gone": [rows[r] for r in summary.get("gone", []) if r in rows],
        "paused": [rows[r] for r in summary.get("paused", []) if r in rows],
        "refused": summary.get("refused", []),
        "identity_json": pretty(run.identity) if run.identity else "",
        "drifts": list(run.drifts.select_related("before", "after")),
    }


def tool_list_import_for(*, import_id: int, tenant: str | None) -> ToolListImport | None:
    """The import record ``import_id`` of ``tenant`` (None: no tenant), or None when there
    is none or it is another tenant's."""
    return ToolListImport.objects.filter(pk=import_id, tenant=tenant or "").first()


def tool_list_import_view(record: ToolListImport) -> dict[str, Any]:
    """An import's result page as it was when the list was imported (the versions' current
    pages are linked): the rows of each outcome, the refused tools, the warnings."""
    summary = dict(record.result)
    refs = {
        ref
        for key in ("created", "unchanged", "also_seen", "paused")
        for ref in summary.get(key, [])
    }
    refs |= {ref for pair in summary.get("changed", []) for ref in pair}
    rows = {r.ref: r for r in _versions_by_refs(refs)}
    result = {
        key: [rows[r] for r in summary.get(key, []) if r in rows]
        for key in ("created", "unchanged", "also_seen", "paused")
    }
    result["changed"] = [
        (rows[a], rows[b]) for a, b in summary.get("changed", []) if a in rows and b in rows
    ]
    result["refused"] = [
        discovery.RefusedTool(int(r["index"]), str(r["name"]), tuple(r["reasons"]))
        for r in summary.get("refused", [])
    ]
    result["warnings"] = list(summary.get("warnings", []))
    return {"record": record, "server": record.server, "result": result}


def _versions_by_refs(refs: set[str]) -> list[CapabilityVersion]:
    """The rows of ``refs`` in one query: by names and versions, then paired here (one OR
    per ref is an expression SQLite refuses past about a thousand refs)."""
    wanted = {parsed for parsed in map(parse_ref, refs) if parsed}
    if not wanted:
        return []
    rows = CapabilityVersion.objects.filter(
        capability_id__in={name for name, _ in wanted},
        version__in={version for _, version in wanted},
    )
    return [row for row in rows if (row.capability_id, row.version) in wanted]


def sightings_of(row: CapabilityVersion) -> list[Any]:
    return list(row.sightings.select_related("tool_server").order_by("gone_at", "server_label"))
