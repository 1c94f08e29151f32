"""Catalog writes: sync reviewed contracts into stored versions, gate and lifecycle steps."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from catalog.capabilities.registry import ALL_CONTRACTS
from catalog.models import CapabilityVersion, Lifecycle, LifecycleDecision

SYSTEM_REVIEWER = "system:reviewed-source"


@transaction.atomic
def catalog_sync() -> list[str]:
    """Store every reviewed contract version (ADMITTED with an admission record) if absent.

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
    return made


def admission_record(contract: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_transition": {
            "read_equipment": "NEED_EQUIPMENT -> HAVE_EQUIPMENT_EVIDENCE",
            "search_manual": "NEED_PROCEDURE -> HAVE_COMPATIBILITY_EVIDENCE",
            "check_inventory": "NEED_INVENTORY -> HAVE_INVENTORY_EVIDENCE",
            "propose_reservation": "HAVE_EVIDENCE -> HAVE_EXACT_PROPOSAL",
            "reserve_part": "APPROVED_PROPOSAL -> RESERVED",
        }.get(contract["id"], "ANY -> CONTROL_OUTCOME"),
        "intent": contract["intent"],
        "non_intents": contract["non_intents"],
        "effect_class": contract["effect_class"],
        "operational_effects": contract["operational_effects"],
        "alternatives": ["human lookup", "preloaded snapshot"],
        "decision": "ADMIT_BOUNDED",
        "expires_on": "contract change (digest) or owner change",
    }


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
