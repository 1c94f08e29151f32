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

from django.db import transaction

from catalog.capabilities.controls import CONTROL_CONTRACTS
from catalog.capabilities.registry import ALL_CONTRACTS
from catalog.capabilities.rejected import REJECTED
from catalog.capabilities.reviewed import LOCAL_CONTRACTS, REVIEWED_VERSIONS, local_contract
from catalog.domain import discovery, lifecycle
from catalog.domain.diff import diff_contracts
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion, Lifecycle, LifecycleDecision, Source

SYSTEM_REVIEWER = "system:reviewed-source"
TRUSTED_CONTROLS = frozenset(c.id for c in CONTROL_CONTRACTS)
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
                reason="Admitted from the reviewed source in catalog/capabilities.",
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


def _reason(reason: str) -> str:
    reason = " ".join((reason or "").split())
    if not reason:
        raise Refusal("reason_required", "every lifecycle decision needs a reason")
    return reason[:MAX_REASON]


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
    created: list[CapabilityVersion] = field(default_factory=list)
    unchanged: list[CapabilityVersion] = field(default_factory=list)
    paused: list[CapabilityVersion] = field(default_factory=list)


def candidate_import(*, text: str, server: str, user: Any, source: str = "") -> ImportResult:
    """Store each tool of an untrusted tool list as a DISCOVERED candidate.

    A definition already stored (same name, same digest) is left as it is; a changed
    definition under a known name is a *new* candidate, never an upgrade. Raise
    ``discovery.ImportRefused`` (nothing stored) on any invalid input.
    """
    server = " ".join((server or "").split())
    if not discovery.valid_server(server):
        raise discovery.ImportRefused(
            ["name the server the list came from (letters, digits, . _ : / @ + -; 200 max)"]
        )
    tools = discovery.parse_tool_list(text)
    result = ImportResult()
    with transaction.atomic():
        for tool in tools:
            existing = CapabilityVersion.objects.filter(
                capability_id=tool.name, version=tool.version
            ).first()
            if existing is not None:
                result.unchanged.append(existing)
                continue
            earlier = list(
                CapabilityVersion.objects.filter(
                    capability_id=tool.name, source=Source.DISCOVERED
                ).values_list("version", flat=True)
            )
            notes: dict[str, Any] = {
                "hints": dict(tool.hints),
                "flags": list(tool.flags),
                "source": (source or "pasted")[:200],
            }
            rejected = REJECTED.get(tool.name)
            if rejected is not None:
                notes["previously_rejected"] = rejected.reason
            if earlier:
                notes["earlier_definitions"] = [f"{tool.name}@{v}" for v in earlier]
            if any(c.id == tool.name for c in LOCAL_CONTRACTS.values()):
                notes["local_contract_exists"] = True
            row = CapabilityVersion.objects.create(
                capability_id=tool.name,
                version=tool.version,
                digest=tool.digest,
                contract={},
                lifecycle=Lifecycle.DISCOVERED,
                source=Source.DISCOVERED,
                server=server,
                definition=dict(tool.definition),
                discovery=notes,
                imported_by=user,
                effect_gate_open=False,
            )
            _decision(
                row,
                action="import",
                from_state="",
                to_state=Lifecycle.DISCOVERED,
                user=user,
                reason=f"Imported from {server}: a candidate only; nothing is exposed.",
                details={"server": server, "digest": tool.digest, "source": notes["source"]},
            )
            result.created.append(row)
            result.paused.extend(_pause_mappings(row, user))
    return result


def _pause_mappings(new: CapabilityVersion, user: Any) -> list[CapabilityVersion]:
    """A changed remote definition pauses the admitted mapping of the old one.

    The old candidate is deprecated (it serves no new run and no new mapping) until the
    new definition has been reviewed on its own; it never inherits the old admission.
    """
    paused = []
    for old in CapabilityVersion.objects.select_for_update().filter(
        capability_id=new.capability_id,
        source=Source.DISCOVERED,
        server=new.server,
        lifecycle=Lifecycle.ADMITTED,
    ):
        old.lifecycle = Lifecycle.DEPRECATED
        old.save(update_fields=["lifecycle"])
        _decision(
            old,
            action="deprecate",
            from_state=Lifecycle.ADMITTED,
            to_state=Lifecycle.DEPRECATED,
            user=user,
            reason=f"The server changed the definition (new candidate {new.ref}): this "
            "mapping is paused until the new definition is reviewed on its own.",
            details={"superseded_by": new.ref},
        )
        paused.append(old)
    return paused


# -- lifecycle ---------------------------------------------------------------------------
def _locked(version_id: int) -> CapabilityVersion:
    row = CapabilityVersion.objects.select_for_update().filter(pk=version_id).first()
    if row is None:
        raise Refusal("unknown_version", "no such capability version")
    return row


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
) -> CapabilityVersion:
    """Admit a version with an admission record; raise Refusal with a clear reason.

    Refused: an illegal step; no local reviewed contract (a discovered definition has
    none: it must be mapped to one); a stored contract that disagrees with the reviewed
    source; hints that contradict the local effect classification; an admin admitting a
    candidate they imported themselves (two people are required).
    """
    reason = _reason(reason)
    with transaction.atomic():
        row = _locked(version_id)
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
    code = ALL_CONTRACTS.get(str(contract["id"]))
    return code is not None and code.version == contract["version"]


def capability_decide(*, version_id: int, user: Any, action: str, reason: str) -> CapabilityVersion:
    """Reject, defer, deprecate or retire a version; raise Refusal with a clear reason.

    Retirement removes the version from new runs and model contexts and blocks new
    dispatch (validation step 8); it is never refused because effects are unknown:
    those stay owned and reconcilable, and the decision records them.
    """
    reason = _reason(reason)
    if action == lifecycle.Action.ADMIT:
        raise Refusal("admission_record_required", "admission needs an admission record")
    with transaction.atomic():
        row = _locked(version_id)
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
            details = retirement_inventory(row)
        from_state = row.lifecycle
        row.lifecycle = target
        row.save(update_fields=["lifecycle"])
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


def retirement_inventory(row: CapabilityVersion) -> dict[str, Any]:
    """Runs pinned to ``row`` that have not ended, and unknown effects under it."""
    from runs.domain import effects
    from runs.models import EffectAttempt, Run

    pin_prefix = f"{row.version}#"
    active = [
        str(r.pk)
        for r in Run.objects.filter(disposition="").only("id", "components")
        if str(r.components.get(row.capability_id, "")).startswith(pin_prefix)
    ]
    unknown = []
    for attempt in EffectAttempt.objects.filter(status__in=effects.UNRESOLVED).select_related(
        "run"
    ):
        if str(attempt.run.components.get(row.capability_id, "")).startswith(pin_prefix):
            unknown.append(
                {"attempt": attempt.pk, "run": str(attempt.run_id), "status": attempt.status}
            )
    return {
        "active_runs": active[:200],
        "active_run_count": len(active),
        "unknown_effects": unknown[:200],
        "unknown_effect_count": len(unknown),
        "note": "Unknown effects stay owned and reconcilable (Recovery); new dispatch and "
        "model contexts lose this version at once.",
    }


def capability_gate(
    *, version_id: int, user: Any, open_gate: bool, reason: str
) -> CapabilityVersion:
    """Open or close the effect gate of an effect version from the console."""
    reason = _reason(reason)
    row = CapabilityVersion.objects.filter(pk=version_id).first()
    if row is None:
        raise Refusal("unknown_version", "no such capability version")
    if not row.is_effect:
        raise Refusal(
            "no_effect_gate",
            f"{row.ref} has no approval-gated effect; its gate would change nothing",
        )
    return capability_gate_set(
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

    Audited as a LifecycleDecision. Raise ValueError on an empty reason or unknown version.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("a gate change needs a reason")
    with transaction.atomic():
        row = CapabilityVersion.objects.select_for_update().get(
            capability_id=capability_id, version=version
        )
        if row.effect_gate_open == open_gate:
            return row
        row.effect_gate_open = open_gate
        row.save(update_fields=["effect_gate_open"])
        LifecycleDecision.objects.create(
            version=row,
            action="open_gate" if open_gate else "close_gate",
            from_state=row.lifecycle,
            to_state=row.lifecycle,
            reviewer=reviewer,
            reviewer_ref=f"user:{reviewer.get_username()}" if reviewer else SYSTEM_REVIEWER,
            reason=reason[:1000],
        )
    return row
