"""Catalog writes: sync reviewed contracts, import discovered definitions, lifecycle steps
and the effect gate. Every write is one transaction ending in a LifecycleDecision row
(the audit record: who, what, from/to, why).

The rules live in ``catalog.domain.lifecycle`` (legal steps, admission records, hint
conflicts) and ``catalog.domain.discovery`` (tool-list parsing); these functions are the
transaction shell around them. Authorization is the view's job (``access`` helpers); the
two-person rule is a domain rule and is enforced here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from capabilities import registry
from capabilities.controls import CONTROL_CONTRACTS
from capabilities.registry import ALL_CONTRACTS
from capabilities.rejected import REJECTED
from capabilities.reviewed import LOCAL_CONTRACTS, REVIEWED_VERSIONS, local_contract
from catalog import schemas
from catalog.domain import discovery, lifecycle, versions
from catalog.domain.diff import diff_contracts
from catalog.domain.lifecycle import Refusal
from catalog.models import (
    CapabilityVersion,
    Discovery,
    DriftKind,
    Lifecycle,
    LifecycleDecision,
    Source,
    TenantEffectGate,
    ToolDrift,
    ToolListImport,
    ToolServer,
    ToolSighting,
)
from kernel.text import bidi_control_refusal, nothing_shown_note, shows_nothing
from runs import pins

SYSTEM_REVIEWER = "system:reviewed-source"
TRUSTED_CONTROLS = frozenset(c.id for c in CONTROL_CONTRACTS)
# The most a person may write as the reason of a lifecycle decision, a gate change or a
# drift review (LifecycleDecision.reason and the forms' maxlength). A longer reason is
# refused (``reason_too_long``), never cut.
MAX_REASON = 1000


@transaction.atomic
def catalog_sync() -> list[str]:
    """Store every reviewed contract version if absent: the dispatchable ones ADMITTED
    (with an admission record), the reviewed-but-not-admitted ones DISCOVERED.

    An existing version is never overwritten: a changed contract under an unchanged version
    is drift, which runs detect against their pinned digest.
    """
    made = []
    for contract in ALL_CONTRACTS.values():
        row, created = CapabilityVersion.objects.get_or_create(
            capability_id=contract.id,
            version=contract.version,
            defaults={
                "digest": contract.digest,
                "contract": contract.as_dict(),
                "lifecycle": Lifecycle.ADMITTED,
            },
        )
        if created:
            LifecycleDecision.objects.create(
                version=row,
                action="admit",
                from_state=Lifecycle.DISCOVERED,
                to_state=Lifecycle.ADMITTED,
                reviewer_ref=SYSTEM_REVIEWER,
                reason="Admitted from the reviewed source in capabilities/.",
                admission=admission_record(contract.as_dict()),
            )
            made.append(contract.ref)
    for contract in REVIEWED_VERSIONS:
        row, created = CapabilityVersion.objects.get_or_create(
            capability_id=contract.id,
            version=contract.version,
            defaults={
                "digest": contract.digest,
                "contract": contract.as_dict(),
                "lifecycle": Lifecycle.DISCOVERED,
            },
        )
        if created:
            LifecycleDecision.objects.create(
                version=row,
                action="record",
                from_state="",
                to_state=Lifecycle.DISCOVERED,
                reviewer_ref=SYSTEM_REVIEWER,
                reason="Reviewed local contract stored as a candidate; it awaits an admission "
                "decision and serves no run until then.",
            )
            made.append(contract.ref)
    return made


def admission_record(contract: dict[str, Any]) -> dict[str, Any]:
    """The admission record of a capability admitted from the reviewed source."""
    return {
        "task_transition": TASK_TRANSITIONS.get(contract["id"], "ANY -> CONTROL_OUTCOME"),
        "intent": contract["intent"],
        "non_intents": contract["non_intents"],
        "effect_class": contract["effect_class"],
        "operational_effects": contract["operational_effects"],
        "alternatives": ["human lookup", "preloaded snapshot"],
        "decision": "ADMIT_BOUNDED",
        "expiry": "expires on contract change (digest) or owner change",
        "reviewer": SYSTEM_REVIEWER,
        "local_contract": f"{contract['id']}@{contract['version']}",
    }


TASK_TRANSITIONS = {
    "read_equipment": "NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE",
    "search_manual": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
    "check_inventory": "NEED_INVENTORY -> HAVE_INVENTORY_EVIDENCE",
    "propose_reservation": "HAVE_EVIDENCE -> HAVE_EXACT_PROPOSAL",
    "reserve_part": "APPROVED_PROPOSAL -> RESERVED",
}


def reviewer_ref(user: Any) -> str:
    return f"user:{user.get_username()}" if user is not None else SYSTEM_REVIEWER


def _reason(reason: str, *, required: str = "every lifecycle decision needs a reason") -> str:
    """The reason as it is recorded (runs of white space as one space); raise Refusal when it
    is empty (saying ``required``) or longer than MAX_REASON (nothing is written then)."""
    reason = " ".join((reason or "").split())
    if shows_nothing(reason):
        raise Refusal("reason_required", required + nothing_shown_note(reason))
    return _fitting(reason)


def _fitting(reason: str) -> str:
    """``reason``; raise Refusal (``reason_too_long``) when it is longer than MAX_REASON,
    (``reason_bidi_control``) when it holds a bidirectional control character."""
    if len(reason) > MAX_REASON:
        raise Refusal(
            "reason_too_long",
            f"a reason may be at most {MAX_REASON} characters and this one has {len(reason)}",
        )
    refused = bidi_control_refusal(reason)
    if refused:
        raise Refusal("reason_bidi_control", refused)
    return reason


def _decision_row(
    row: CapabilityVersion,
    *,
    action: str,
    from_state: str,
    to_state: str,
    user: Any,
    reason: str,
    details: Mapping[str, Any] | None = None,
) -> LifecycleDecision:
    """An unsaved decision (for bulk inserts); ``_decision`` saves one at once."""
    return LifecycleDecision(
        version=row,
        action=action,
        from_state=from_state,
        to_state=to_state,
        reviewer=user,
        reviewer_ref=reviewer_ref(user),
        reason=reason,
        details=dict(details or {}),
    )


def _decision(
    row: CapabilityVersion,
    *,
    action: str,
    from_state: str,
    to_state: str,
    user: Any,
    reason: str,
    admission: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
) -> LifecycleDecision:
    return LifecycleDecision.objects.create(
        version=row,
        action=action,
        from_state=from_state,
        to_state=to_state,
        reviewer=user,
        reviewer_ref=reviewer_ref(user),
        reason=reason,
        admission=dict(admission or {}),
        details=dict(details or {}),
    )


# -- import ------------------------------------------------------------------------------
@dataclass
class ImportResult:
    """What one import or discovery did, tool by tool.

    ``created``: new candidates. ``unchanged``: the same definition, already served by this
    server. ``also_seen``: a definition already stored (from another server, or served
    again) now sighted here too. ``changed``: (earlier, new) pairs under one name.
    ``gone``: definitions this server no longer lists (complete listings only).
    ``refused``: tools refused alone, with reasons. ``paused``: admitted mappings paused.
    """

    created: list[CapabilityVersion] = field(default_factory=list)
    unchanged: list[CapabilityVersion] = field(default_factory=list)
    also_seen: list[CapabilityVersion] = field(default_factory=list)
    changed: list[tuple[CapabilityVersion, CapabilityVersion]] = field(default_factory=list)
    gone: list[CapabilityVersion] = field(default_factory=list)
    refused: list[discovery.RefusedTool] = field(default_factory=list)
    paused: list[CapabilityVersion] = field(default_factory=list)
    drifts: list[ToolDrift] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The plain-data record of this result (kept on the Discovery or ToolListImport row)."""
        return {
            "created": [r.ref for r in self.created],
            "unchanged": [r.ref for r in self.unchanged],
            "also_seen": [r.ref for r in self.also_seen],
            "changed": [[a.ref, b.ref] for a, b in self.changed],
            "gone": [r.ref for r in self.gone],
            "refused": [r.as_dict() for r in self.refused],
            "paused": [r.ref for r in self.paused],
            "drifts": [d.pk for d in self.drifts],
            "warnings": list(self.warnings),
        }


def clean_server_label(server: str) -> str:
    server = " ".join((server or "").split())
    if not discovery.valid_server(server):
        raise discovery.ImportRefused(
            ["name the server the list came from (letters, digits, . _ : / @ + -; 200 max)"]
        )
    return server


def candidate_import(*, text: str, server: str, user: Any, source: str = "") -> ImportResult:
    """Store each acceptable tool of an untrusted tool list as a DISCOVERED candidate.

    A definition already stored is left as it is (and sighted on this server); a changed
    definition under a known name is a *new* candidate, never an upgrade, and pauses the
    earlier admitted mapping. Tools refused alone are reported in ``refused``. Raise
    ``discovery.ImportRefused`` (nothing stored) when the list cannot be read or no tool
    is acceptable. A pasted list is one page at most: nothing is marked gone.
    """
    server = clean_server_label(server)
    listing = discovery.parse_tool_list(text, schemas.meta_problem)
    return candidates_record(
        listing=listing, server_label=server, user=user, source=(source or "pasted")[:200]
    )


def tool_list_import(
    *, text: str, server: str, user: Any, tenant: str, source: str = ""
) -> ToolListImport:
    """Import a tool list (``candidate_import``) and store what its result page shows, in
    one transaction: the page is then a GET of the record, which a reload does not repeat.

    ``tenant`` is the importer's (``""``: none); only that tenant reads the record. Raise
    ``discovery.ImportRefused`` as ``candidate_import`` does (nothing stored, no record).
    """
    with transaction.atomic():
        result = candidate_import(text=text, server=server, user=user, source=source)
        return ToolListImport.objects.create(
            tenant=tenant,
            imported_by=user,
            imported_by_ref=reviewer_ref(user),
            server=clean_server_label(server),
            source=(source or "pasted")[:200],
            result=result.summary(),
        )


def _identity_summary(identity: Mapping[str, Any]) -> dict[str, Any]:
    info = identity.get("server_info") or {}
    return {
        "server_name": str(info.get("name", ""))[:200],
        "server_version": str(info.get("version", ""))[:100],
        "protocol_version": str(identity.get("protocol_version", ""))[:40],
    }


def candidates_record(
    *,
    listing: discovery.ToolListing,
    server_label: str,
    user: Any,
    source: str,
    tool_server: ToolServer | None = None,
    identity: Mapping[str, Any] | None = None,
    run: Discovery | None = None,
    complete: bool = False,
) -> ImportResult:
    """Record a parsed listing of one server in one transaction (see ``ImportResult``).

    ``complete`` says the listing is the server's whole tool list (a live discovery read
    every page): only then does a tool this server served before and no longer lists count
    as gone. Drift (changed, gone, refused) is recorded as ToolDrift and pauses the
    admitted mapping of the earlier definition; discovery never admits anything.

    New candidates, their decisions and sightings are written in bulk (a few statements
    for hundreds of tools). Another import storing the same new definition at the same
    moment makes the insert fail; the whole recording is then retried once, and finds it.
    """
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                return _record(
                    listing=listing,
                    server_label=server_label,
                    user=user,
                    source=source,
                    tool_server=tool_server,
                    identity=dict(identity or {}),
                    run=run,
                    complete=complete,
                )
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _record(
    *,
    listing: discovery.ToolListing,
    server_label: str,
    user: Any,
    source: str,
    tool_server: ToolServer | None,
    identity: dict[str, Any],
    run: Discovery | None,
    complete: bool,
) -> ImportResult:
    result = ImportResult(refused=list(listing.refused), warnings=list(listing.warnings))
    now = timezone.now()
    current: dict[str, list[ToolSighting]] = {}
    live = list(
        ToolSighting.objects.select_for_update().filter(server_label=server_label, gone_at=None)
    )
    names = dict(
        CapabilityVersion.objects.filter(pk__in=[s.version_id for s in live]).values_list(
            "pk", "capability_id"
        )
    )
    for sighting in live:
        current.setdefault(names[sighting.version_id], []).append(sighting)

    known = _stored_candidates(listing)
    fresh = [t for t in listing.tools if (t.name, t.version) not in known]
    for row in _create_candidates(fresh, server_label, user, source, identity, run):
        known[(row.capability_id, row.version)] = row
        result.created.append(row)
    created = {row.pk for row in result.created}
    here = {
        s.version_id: s
        for s in ToolSighting.objects.select_for_update().filter(
            server_label=server_label, version_id__in=[r.pk for r in known.values()]
        )
    }
    seen_again: list[int] = []
    new_sightings: list[ToolSighting] = []
    decisions: list[LifecycleDecision] = []
    for tool in listing.tools:
        row = known[(tool.name, tool.version)]
        sighting = here.get(row.pk)
        if sighting is not None:
            seen_again.append(sighting.pk)
            (result.also_seen if sighting.gone_at is not None else result.unchanged).append(row)
        else:
            new_sightings.append(
                ToolSighting(
                    version=row,
                    server_label=server_label,
                    tool_server=tool_server,
                    identity=identity,
                    last_seen=now,
                    discovery=run,
                )
            )
            if row.pk not in created:
                result.also_seen.append(row)
                decisions.append(
                    _decision_row(
                        row,
                        action="sighting",
                        from_state=row.lifecycle,
                        to_state=row.lifecycle,
                        user=user,
                        reason=f"The same definition is also served by {server_label}.",
                        details={"server": server_label, **_identity_summary(identity)},
                    )
                )
        for old in current.get(tool.name, []):
            if old.version_id == row.pk:
                continue
            old.gone_at = now
            old.save(update_fields=["gone_at"])
            result.changed.append((old.version, row))
            _drift(
                result,
                kind=DriftKind.CHANGED,
                before=old.version,
                after=row,
                server_label=server_label,
                tool_server=tool_server,
                run=run,
                user=user,
                reason=f"The server changed the definition (new candidate {row.ref}): this "
                "mapping is paused until the new definition is reviewed on its own.",
                details={"superseded_by": row.ref},
            )
    ToolSighting.objects.bulk_create(new_sightings)
    LifecycleDecision.objects.bulk_create(decisions)
    updates: dict[str, Any] = {"last_seen": now, "gone_at": None, "discovery": run}
    if identity:
        updates["identity"] = identity
    if tool_server is not None:
        updates["tool_server"] = tool_server
    ToolSighting.objects.filter(pk__in=seen_again).update(**updates)

    refused_names = listing.refused_names
    for name, sightings in current.items():
        if name in listing.names:
            continue
        if name in refused_names:
            reasons = list(next(r.reasons for r in listing.refused if r.name == name))
            kind, details = DriftKind.REFUSED, {"refused_on": server_label, "reasons": reasons}
            why = "The server now serves a definition the catalog refuses"
        elif complete:
            kind, details = DriftKind.GONE, {"gone_from": server_label}
            why = "The server no longer lists this tool"
        else:
            continue
        for old in sightings:
            old.gone_at = now
            old.save(update_fields=["gone_at"])
            result.gone.append(old.version)
            _drift(
                result,
                kind=kind,
                before=old.version,
                after=None,
                server_label=server_label,
                tool_server=tool_server,
                run=run,
                user=user,
                reason=f"{why} ({server_label}): this mapping is paused until it is "
                "reviewed again.",
                details=details,
            )
    return result


def _stored_candidates(
    listing: discovery.ToolListing,
) -> dict[tuple[str, str], CapabilityVersion]:
    """The listing's definitions already stored, by (name, version): one query."""
    rows = CapabilityVersion.objects.filter(
        capability_id__in=[t.name for t in listing.tools],
        version__in=[t.version for t in listing.tools],
    )
    return {(r.capability_id, r.version): r for r in rows}


def _create_candidates(
    tools: list[discovery.DiscoveredTool],
    server_label: str,
    user: Any,
    source: str,
    identity: Mapping[str, Any],
    run: Discovery | None,
) -> list[CapabilityVersion]:
    """New DISCOVERED rows for ``tools`` and their import decisions (two inserts)."""
    if not tools:
        return []
    earlier: dict[str, list[str]] = {}
    for capability_id, version in CapabilityVersion.objects.filter(
        capability_id__in=[t.name for t in tools], source=Source.DISCOVERED
    ).values_list("capability_id", "version"):
        earlier.setdefault(capability_id, []).append(version)
    local_ids = {c.id for c in LOCAL_CONTRACTS.values()}
    rows = []
    for tool in tools:
        notes: dict[str, Any] = {**tool.notes(), "source": source[:200]}
        if identity:
            notes["identity"] = _identity_summary(identity)
        rejected = REJECTED.get(tool.name)
        if rejected is not None:
            notes["previously_rejected"] = rejected.reason
        if earlier.get(tool.name):
            notes["earlier_definitions"] = [f"{tool.name}@{v}" for v in earlier[tool.name]]
        if tool.name in local_ids:
            notes["local_contract_exists"] = True
        rows.append(
            CapabilityVersion(
                capability_id=tool.name,
                version=tool.version,
                digest=tool.digest,
                contract={},
                lifecycle=Lifecycle.DISCOVERED,
                source=Source.DISCOVERED,
                server=server_label,
                definition=dict(tool.definition),
                discovery=notes,
                imported_by=user,
                effect_gate_open=False,
            )
        )
    rows = CapabilityVersion.objects.bulk_create(rows)
    LifecycleDecision.objects.bulk_create(
        _decision_row(
            row,
            action="import",
            from_state="",
            to_state=Lifecycle.DISCOVERED,
            user=user,
            reason=f"Imported from {server_label}: a candidate only; nothing is exposed.",
            details={
                "server": server_label,
                "digest": row.digest,
                "source": source[:200],
                **({"discovery": run.pk} if run is not None else {}),
                **_identity_summary(identity),
            },
        )
        for row in rows
    )
    return rows


def _drift(
    result: ImportResult,
    *,
    kind: str,
    before: CapabilityVersion,
    after: CapabilityVersion | None,
    server_label: str,
    tool_server: ToolServer | None,
    run: Discovery | None,
    user: Any,
    reason: str,
    details: dict[str, Any],
) -> None:
    paused = _pause_mapping(before, user, reason, details)
    if paused is not None:
        result.paused.append(paused)
    result.drifts.append(
        ToolDrift.objects.create(
            server_label=server_label,
            tool_server=tool_server,
            capability_id=before.capability_id,
            kind=kind,
            before=before,
            after=after,
            discovery=run,
            paused=[paused.ref] if paused is not None else [],
            details=details,
        )
    )


def _pause_mapping(
    old: CapabilityVersion, user: Any, reason: str, details: dict[str, Any]
) -> CapabilityVersion | None:
    """A changed (or vanished) remote definition pauses its admitted mapping.

    The old candidate is deprecated (it serves no new run and no new mapping) until the
    new definition has been reviewed on its own; it never inherits the old admission.
    """
    row = CapabilityVersion.objects.select_for_update().get(pk=old.pk)
    if row.source != Source.DISCOVERED or row.lifecycle != Lifecycle.ADMITTED:
        return None
    row.lifecycle = Lifecycle.DEPRECATED
    row.save(update_fields=["lifecycle"])
    _decision(
        row,
        action="deprecate",
        from_state=Lifecycle.ADMITTED,
        to_state=Lifecycle.DEPRECATED,
        user=user,
        reason=reason,
        details=details,
    )
    return row


def drift_resolve(*, drift_id: int, user: Any, reason: str) -> ToolDrift:
    """Mark a drift reviewed (it leaves the catalog page and the runbook). Raise Refusal."""
    reason = _reason(reason)
    with transaction.atomic():
        drift = ToolDrift.objects.select_for_update().filter(pk=drift_id).first()
        if drift is None:
            raise Refusal("unknown_drift", "no such drift")
        if drift.resolved_at is not None:
            raise Refusal("drift_resolved", "this drift was already marked reviewed")
        drift.resolved_at = timezone.now()
        drift.resolved_by = user
        drift.resolution = reason
        drift.save(update_fields=["resolved_at", "resolved_by", "resolution"])
    return drift


# -- lifecycle ---------------------------------------------------------------------------
def _locked(version_id: int) -> CapabilityVersion:
    row = CapabilityVersion.objects.select_for_update().filter(pk=version_id).first()
    if row is None:
        raise Refusal("unknown_version", "no such capability version")
    return row


def _bind_state(row: CapabilityVersion, shown: str | None) -> None:
    """Refuse (``lifecycle_changed``) a decision taken on a page that showed another
    lifecycle state than ``row`` (locked) has now. ``shown`` is the state the console form
    carried ("" when the post carried none: an older page or a script); ``None`` is a
    service caller that binds no page (commands, the fault lab). The lifecycle never
    returns to a state it left, so the state alone names what the page described."""
    if shown is None or shown == row.lifecycle:
        return
    last = (
        row.decisions.filter(to_state=row.lifecycle)
        .exclude(from_state=row.lifecycle)
        .order_by("-created_at", "-id")
        .first()
    )
    by = f" (by {last.reviewer_ref} at {last.created_at:%Y-%m-%d %H:%M:%S} UTC)" if last else ""
    seen = f"the page you decided on showed {shown}" if shown else "your post named no state"
    raise Refusal(
        "lifecycle_changed",
        f"this version is {row.lifecycle} now{by}; {seen}. Reload the page to decide on "
        "what it is now",
    )


def capability_admit(
    *,
    version_id: int,
    user: Any,
    task_transition: str,
    alternatives: list[str],
    decision: str,
    expiry: str,
    reason: str,
    local_ref: str = "",
    shown_state: str | None = None,
) -> CapabilityVersion:
    """Admit a version with an admission record; raise Refusal with a clear reason.

    Refused: an illegal step; no local reviewed contract (a discovered definition has
    none: it must be mapped to one); a stored contract that disagrees with the reviewed
    source; hints that contradict the local effect classification; an admin admitting a
    candidate they imported themselves (two people are required); a console form whose
    page showed another state than the version has now (``shown_state``, see
    ``_bind_state``: ``lifecycle_changed``).
    """
    with transaction.atomic():
        row = _locked(version_id)
        # A stale page hears that first: fixing its reason would not make it current.
        _bind_state(row, shown_state)
        reason = _reason(reason)
        target = lifecycle.next_state(row.lifecycle, lifecycle.Action.ADMIT)
        if row.imported_by_id is not None and row.imported_by_id == getattr(user, "pk", None):
            raise Refusal(
                "two_person_rule",
                "you imported this candidate; another catalog admin must review and admit it",
            )
        local_row: CapabilityVersion | None = None
        if row.discovered:
            if not local_ref:
                raise Refusal(
                    "no_local_contract",
                    "a discovered tool has no local reviewed contract; discovery never "
                    "activates a contract. Map it to a reviewed local contract version, or "
                    "defer or reject it",
                )
            contract = LOCAL_CONTRACTS.get(local_ref)
            if contract is None:
                raise Refusal("no_local_contract", f"{local_ref} is not a reviewed local contract")
            if contract.id in TRUSTED_CONTROLS:
                raise Refusal(
                    "trusted_control",
                    "control outcomes come from trusted local configuration; a discovered "
                    "tool cannot become one",
                )
            local_row = CapabilityVersion.objects.select_for_update().get(
                capability_id=contract.id, version=contract.version, source=Source.REVIEWED
            )
            if local_row.lifecycle in lifecycle.FINAL:
                raise Refusal(
                    "lifecycle_final",
                    f"{local_row.ref} is {local_row.lifecycle}; it cannot serve a new admission",
                    field="local_ref",  # the chosen contract is final, not this version
                )
            conflicts = lifecycle.hint_conflicts(row.hints, contract.effect_class.value)
            if conflicts:
                raise Refusal(
                    "hint_contradicts_local_classification",
                    "; ".join(conflicts)
                    + ". Annotations are untrusted and never set the effect class: resolve "
                    "the mismatch (defer or reject) before admitting",
                )
        else:
            contract = local_contract(row.capability_id, row.version)
            if contract is None:
                raise Refusal(
                    "no_local_contract", f"{row.ref} has no reviewed local contract in code"
                )
            if contract.digest != row.digest:
                raise Refusal(
                    "contract_drift",
                    f"the stored contract of {row.ref} disagrees with the reviewed source",
                )
        record = lifecycle.admission_record(
            contract=contract.as_dict(),
            local_ref=f"{contract.ref}#{contract.digest[:16]}",
            reviewer=reviewer_ref(user),
            task_transition=task_transition,
            alternatives=alternatives,
            decision=decision,
            expiry=expiry,
            discovered_from=f"{row.ref} from {row.server}" if row.discovered else "",
        ).as_dict()
        details = _admission_details(row, contract.as_dict())
        from_state = row.lifecycle
        row.lifecycle = target
        if row.discovered:
            row.local_contract_ref = contract.ref
        row.save(update_fields=["lifecycle", "local_contract_ref"])
        _decision(
            row,
            action="admit",
            from_state=from_state,
            to_state=target,
            user=user,
            reason=reason,
            admission=record,
            details=details,
        )
        if local_row is not None and local_row.lifecycle in (
            Lifecycle.DISCOVERED,
            Lifecycle.DEFERRED,
        ):
            local_from = local_row.lifecycle
            local_row.lifecycle = Lifecycle.ADMITTED
            local_row.save(update_fields=["lifecycle"])
            _decision(
                local_row,
                action="admit",
                from_state=local_from,
                to_state=Lifecycle.ADMITTED,
                user=user,
                reason=reason,
                admission=record,
                details={**details, "via_candidate": row.ref},
            )
    return row


def _admission_details(row: CapabilityVersion, contract: dict[str, Any]) -> dict[str, Any]:
    """What the admission changes relative to the currently admitted version of the id."""
    current = (
        CapabilityVersion.objects.filter(
            capability_id=contract["id"], source=Source.REVIEWED, lifecycle=Lifecycle.ADMITTED
        )
        .exclude(version=contract["version"])
        .order_by("-created_at")
        .first()
    )
    details: dict[str, Any] = {"dispatchable": _dispatchable(contract)}
    if current is not None:
        diff = diff_contracts(current.contract, contract)
        details["compared_with"] = current.ref
        details["change_classes"] = [c.value for c in diff.classes]
        details["requires"] = diff.summary()
    if row.discovered:
        details["untrusted_hints"] = row.hints
        details["hint_warnings"] = lifecycle.hint_warnings(
            row.hints, contract["effect_class"], bool(contract.get("open_world"))
        )
    return details


def _dispatchable(contract: Mapping[str, Any]) -> bool:
    return registry.dispatchable(str(contract["id"]), str(contract["version"]))


def retirement_request_stamp(row: CapabilityVersion) -> str:
    """What names the pending retirement request of ``row`` ("" when none): the retire
    page sends it back, so a confirmation binds the request its sender read."""
    if row.retire_requested_by_id is None or row.retire_requested_at is None:
        return ""
    return row.retire_requested_at.isoformat()


def capability_decide(
    *,
    version_id: int,
    user: Any,
    action: str,
    reason: str,
    acknowledge: bool = False,
    confirms: str | None = None,
    shown_state: str | None = None,
) -> CapabilityVersion:
    """Reject, defer, deprecate or retire a version; raise Refusal with a clear reason.

    Retirement removes the version from new runs and model contexts and blocks new
    dispatch (validation step 8); it is never refused because effects are unknown:
    those stay owned and reconcilable, and the decision records them. A risky
    retirement (``catalog.domain.versions.retirement_risks``: consequential, no admitted
    successor, pinned runs or unknown effects) needs an explicit ``acknowledge`` and two
    catalog admins: the first call records the request (the version is unchanged), a
    second admin's call retires it. A console form sends ``confirms``, the request its
    page showed ("" for none, ``retirement_request_stamp``): a call that would confirm
    another request, or one withdrawn since, is refused (``retirement_request_changed``),
    so two admins who press "Request retirement" together do not retire the version.
    A form of the candidate, contract or retire page sends ``shown_state``, the lifecycle
    state its page showed: a decision on a version that moved on since is refused
    (``lifecycle_changed``, ``_bind_state``), so two admins who press "Reject" and "Defer"
    together do not both apply.
    """
    if action == lifecycle.Action.ADMIT:
        raise Refusal("admission_record_required", "admission needs an admission record")
    with transaction.atomic():
        row = _locked(version_id)
        # A stale page hears that first: fixing its reason would not make it current.
        _bind_state(row, shown_state)
        reason = _reason(reason)
        target = lifecycle.next_state(row.lifecycle, action)
        if (
            row.source == Source.REVIEWED
            and row.capability_id in TRUSTED_CONTROLS
            and action in (lifecycle.Action.DEPRECATE, lifecycle.Action.RETIRE)
        ):
            raise Refusal(
                "trusted_control",
                "control outcomes come from trusted local configuration and stay visible "
                "in every phase; they are not retired in the catalog",
            )
        details: dict[str, Any] = {}
        if action in (lifecycle.Action.RETIRE, lifecycle.Action.DEPRECATE):
            details = retirement_inventory(row, every_tenant=True)
        if action == lifecycle.Action.RETIRE and details["risks"]:
            if not acknowledge:
                raise Refusal(
                    "acknowledgement_required",
                    "this retirement needs an explicit acknowledgement: "
                    + "; ".join(versions.RETIREMENT_RISKS[r] for r in details["risks"]),
                )
            pending = retirement_request_stamp(row)
            if confirms and not pending:
                raise Refusal(
                    "retirement_request_changed",
                    f"the retirement request you were confirming was withdrawn"
                    f"{_withdrawn_by(row)}: read the retire page again",
                )
            if row.retire_requested_by_id is None:
                return _retirement_request(row, user=user, reason=reason, details=details)
            if row.retire_requested_by_id == getattr(user, "pk", None):
                raise Refusal(
                    "two_person_rule",
                    "you requested this retirement; another catalog admin must confirm it",
                )
            if confirms is not None and confirms != pending:
                raise Refusal(
                    "retirement_request_changed",
                    f"{reviewer_ref(row.retire_requested_by)} requested this retirement at "
                    f"{row.retire_requested_at:%Y-%m-%d %H:%M:%S} UTC, after the page you "
                    "sent was loaded: read that request on the retire page, then confirm it",
                )
            details["requested_by"] = reviewer_ref(row.retire_requested_by)
            details["confirmed_by"] = reviewer_ref(user)
        from_state = row.lifecycle
        row.lifecycle = target
        row.retire_requested_by = None
        row.retire_requested_at = None
        row.save(update_fields=["lifecycle", "retire_requested_by", "retire_requested_at"])
        _decision(
            row,
            action=str(action),
            from_state=from_state,
            to_state=target,
            user=user,
            reason=reason,
            details=details,
        )
    return row


def _retirement_request(
    row: CapabilityVersion, *, user: Any, reason: str, details: dict[str, Any]
) -> CapabilityVersion:
    """Record the first admin's retirement request (the version keeps its state)."""
    row.retire_requested_by = user
    row.retire_requested_at = timezone.now()
    row.save(update_fields=["retire_requested_by", "retire_requested_at"])
    _decision(
        row,
        action="retire_requested",
        from_state=row.lifecycle,
        to_state=row.lifecycle,
        user=user,
        reason=reason,
        details={**details, "acknowledged": True},
    )
    return row


def _withdrawn_by(row: CapabilityVersion) -> str:
    """Who withdrew the retirement request of ``row``, when and why (" by user:x at … UTC
    (reason)") when its latest retirement decision (a request, a withdrawal, the
    retirement) is a withdrawal: who took away the request a page showed; '' otherwise."""
    last = (
        row.decisions.filter(action__in=("retire_requested", "retire_withdrawn", "retire"))
        .order_by("-created_at", "-id")
        .first()
    )
    if last is None or last.action != "retire_withdrawn":
        return ""
    return f" by {last.reviewer_ref} at {last.created_at:%Y-%m-%d %H:%M:%S} UTC" + (
        f" ({last.reason})" if last.reason else ""
    )


def capability_retire_withdraw(*, version_id: int, user: Any, reason: str) -> CapabilityVersion:
    """Withdraw a pending two-person retirement request (the requester or any catalog
    admin); record ``retire_withdrawn`` with who asked, when, and who withdrew it.

    The version keeps its lifecycle; a later retirement starts again from a new request.
    Refused (``no_retirement_request``) when no request is pending.
    """
    reason = _reason(reason)
    with transaction.atomic():
        row = _locked(version_id)
        if row.retire_requested_by_id is None or row.lifecycle == Lifecycle.RETIRED:
            withdrawn = _withdrawn_by(row) if row.lifecycle != Lifecycle.RETIRED else ""
            raise Refusal(
                "no_retirement_request",
                f"no retirement of {row.ref} is waiting for confirmation"
                + (f"; the last request was withdrawn{withdrawn}" if withdrawn else "")
                + "; nothing to withdraw",
            )
        details = {
            "requested_by": reviewer_ref(row.retire_requested_by),
            "requested_at": row.retire_requested_at.isoformat() if row.retire_requested_at else "",
            "withdrawn_by": reviewer_ref(user),
            "by_requester": row.retire_requested_by_id == getattr(user, "pk", None),
        }
        row.retire_requested_by = None
        row.retire_requested_at = None
        row.save(update_fields=["retire_requested_by", "retire_requested_at"])
        _decision(
            row,
            action="retire_withdrawn",
            from_state=row.lifecycle,
            to_state=row.lifecycle,
            user=user,
            reason=reason,
            details=details,
        )
    return row


def successor_of(row: CapabilityVersion) -> str:
    """The version new runs would pin once ``row`` is gone ("" when none would)."""
    others = CapabilityVersion.objects.filter(
        capability_id=row.capability_id, source=Source.REVIEWED, lifecycle=Lifecycle.ADMITTED
    ).exclude(pk=row.pk)
    offers = [
        versions.Offer(o.capability_id, o.version, o.digest, o.lifecycle)
        for o in others
        if registry.dispatchable(o.capability_id, o.version)
    ]
    best = versions.newest_admitted(offers).get(row.capability_id)
    return f"{best.capability_id}@{best.version}" if best else ""


def retirement_inventory(
    row: CapabilityVersion, *, tenant: str | None = None, every_tenant: bool = False
) -> dict[str, Any]:
    """Live data a retirement decides on: runs pinned to ``row`` that have not ended,
    unknown effects under it, the admitted successor, and the risks that make it a
    two-person decision.

    The counts and risks cover every tenant (the catalog is shared: retiring a version
    stops it for all of them); the lists of runs and unknown effects hold only those of
    ``tenant`` (the viewer's: another tenant's run ids are never shown), or of every tenant
    with ``every_tenant`` (the decision record). ``other_tenant_runs`` and
    ``other_tenant_effects`` count what the lists leave out for that reason."""

    use = pins.version_use(capability_id=row.capability_id, version=row.version)
    active, unknown = use.active_runs, use.unknown_effects
    successor = successor_of(row)
    risks = versions.retirement_risks(
        consequential=row.effect_class == "consequential_external_mutation",
        successor=successor,
        pinned_runs=len(active),
        unknown_effects=len(unknown),
    )
    inventory: dict[str, Any] = {
        "active_runs": active[:200],
        "active_run_count": len(active),
        "unknown_effects": unknown[:200],
        "unknown_effect_count": len(unknown),
        "successor": successor,
        "risks": risks,
        "note": "Unknown effects stay owned and reconcilable (Recovery); new dispatch and "
        "model contexts lose this version at once.",
    }
    if not every_tenant:
        mine = [r for r in active if tenant and use.tenants.get(r) == tenant]
        mine_effects = [e for e in unknown if tenant and use.tenants.get(e["run"]) == tenant]
        inventory.update(
            active_runs=mine[:200],
            unknown_effects=mine_effects[:200],
            other_tenant_runs=len(active) - len(mine),
            other_tenant_effects=len(unknown) - len(mine_effects),
        )
    return inventory


@dataclass(frozen=True)
class GateChange:
    """What a gate post did: ``changed``, or nothing because the gate already was as asked
    (two people closing it at once, a page older than the gate): then ``set_by`` is the
    decision that set it so (None if nobody ever changed it)."""

    open: bool
    changed: bool
    set_by: LifecycleDecision | None = None

    def already(self, gate: str) -> str:
        """The message for a post that changed nothing (``gate`` names the gate)."""
        state = "open" if self.open else "closed"
        by = self.set_by
        who = (
            f" (by {by.reviewer_ref} at {by.created_at:%Y-%m-%d %H:%M:%S} UTC: “{by.reason}”)"
            if by is not None
            else ""
        )
        return (
            f"{gate} was already {state}{who}; nothing changed, and your reason was not recorded."
        )


def _gate_set_by(row: CapabilityVersion, actions: tuple[str, str], tenant: str = "") -> Any:
    decisions = LifecycleDecision.objects.filter(version=row, action__in=actions)
    if tenant:
        decisions = decisions.filter(details__tenant=tenant)
    return decisions.order_by("-created_at", "-id").first()


def capability_gate(
    *, version_id: int, user: Any, open_gate: bool, reason: str
) -> CapabilityVersion:
    """Open or close the effect gate of an effect version from the console."""
    return capability_gate_change(
        version_id=version_id, user=user, open_gate=open_gate, reason=reason
    )[0]


def capability_gate_change(
    *, version_id: int, user: Any, open_gate: bool, reason: str
) -> tuple[CapabilityVersion, GateChange]:
    """``capability_gate``, also telling whether the post changed the gate (GateChange)."""
    reason = _reason(reason, required="a gate change needs a reason")
    row = CapabilityVersion.objects.filter(pk=version_id).first()
    if row is None:
        raise Refusal("unknown_version", "no such capability version")
    if not row.is_effect:
        raise Refusal(
            "no_effect_gate",
            f"{row.ref} has no approval-gated effect; its gate would change nothing",
        )
    return _capability_gate_apply(
        capability_id=row.capability_id,
        version=row.version,
        open_gate=open_gate,
        reviewer=user,
        reason=reason,
    )


def capability_gate_set(
    *, capability_id: str, version: str, open_gate: bool, reviewer: Any, reason: str
) -> CapabilityVersion:
    """Open or close a version's effect gate (new effect dispatch only; reads continue).

    Audited as a LifecycleDecision. Raise Refusal (``reason_required``, ``reason_too_long``)
    on an empty reason or one over MAX_REASON, CapabilityVersion.DoesNotExist on an unknown
    version.
    """
    return _capability_gate_apply(
        capability_id=capability_id,
        version=version,
        open_gate=open_gate,
        reviewer=reviewer,
        reason=reason,
    )[0]


def _capability_gate_apply(
    *, capability_id: str, version: str, open_gate: bool, reviewer: Any, reason: str
) -> tuple[CapabilityVersion, GateChange]:
    reason = _gate_reason(reason)
    with transaction.atomic():
        row = CapabilityVersion.objects.select_for_update().get(
            capability_id=capability_id, version=version
        )
        if row.effect_gate_open == open_gate:
            set_by = _gate_set_by(row, ("open_gate", "close_gate"))
            return row, GateChange(open_gate, changed=False, set_by=set_by)
        row.effect_gate_open = open_gate
        row.save(update_fields=["effect_gate_open"])
        LifecycleDecision.objects.create(
            version=row,
            action="open_gate" if open_gate else "close_gate",
            from_state=row.lifecycle,
            to_state=row.lifecycle,
            reviewer=reviewer,
            reviewer_ref=f"user:{reviewer.get_username()}" if reviewer else SYSTEM_REVIEWER,
            reason=reason,
        )
    return row, GateChange(open_gate, changed=True)


def _gate_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise Refusal("reason_required", "a gate change needs a reason")
    return _fitting(reason)


def tenant_gate_set(
    *, capability_id: str, version: str, tenant: str, open_gate: bool, reviewer: Any, reason: str
) -> TenantEffectGate:
    """Open or close one tenant's effect gate of a version (that tenant's new effect
    dispatch only; other tenants and reads continue). The caller has checked that
    ``reviewer`` operates ``tenant``. Audited as a LifecycleDecision naming the tenant.

    Raise Refusal (``reason_required``, ``reason_too_long``) on an empty reason or one over
    MAX_REASON, ValueError on a version without an approval-gated effect,
    CapabilityVersion.DoesNotExist on an unknown version.
    """
    return tenant_gate_change(
        capability_id=capability_id,
        version=version,
        tenant=tenant,
        open_gate=open_gate,
        reviewer=reviewer,
        reason=reason,
    )[0]


def tenant_gate_change(
    *, capability_id: str, version: str, tenant: str, open_gate: bool, reviewer: Any, reason: str
) -> tuple[TenantEffectGate, GateChange]:
    """``tenant_gate_set``, also telling whether the post changed the gate (GateChange)."""
    reason = _gate_reason(reason)
    with transaction.atomic():
        row = CapabilityVersion.objects.select_for_update().get(
            capability_id=capability_id, version=version
        )
        if not row.is_effect:
            raise ValueError(
                f"{row.ref} has no approval-gated effect; its gate would change nothing"
            )
        gate, _ = TenantEffectGate.objects.select_for_update().get_or_create(
            version=row, tenant=tenant
        )
        if gate.open == open_gate:
            actions = ("open_tenant_gate", "close_tenant_gate")
            set_by = _gate_set_by(row, actions, tenant=tenant)
            return gate, GateChange(open_gate, changed=False, set_by=set_by)
        gate.open = open_gate
        gate.changed_by = reviewer
        gate.reason = reason
        gate.save(update_fields=["open", "changed_by", "reason", "changed_at"])
        _decision(
            row,
            action="open_tenant_gate" if open_gate else "close_tenant_gate",
            from_state=row.lifecycle,
            to_state=row.lifecycle,
            user=reviewer,
            reason=reason,
            details={"tenant": tenant},
        )
    return gate, GateChange(open_gate, changed=True)


def tenant_gate_open(row: CapabilityVersion, tenant: str) -> bool:
    """Whether ``tenant``'s gate of ``row`` is open (no row: open)."""
    return not TenantEffectGate.objects.filter(version=row, tenant=tenant, open=False).exists()
