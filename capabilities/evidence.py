"""Preconditions over admitted observations: freshness and reservation evidence.

One definition, used by validation step 5, by the proposing adapter, by the effect
adapter's dispatch-time recheck and by the completion verifier. Pure.

An observation, as stored in evidence, is a mapping:
``{"capability": str, "ok": bool, "data": {...}, "error": str, "observed_at": iso}``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Observation = Mapping[str, Any]

INVENTORY_MAX_AGE_S = 300


def observed_at(obs: Observation) -> dt.datetime | None:
    data = obs.get("data") or {}
    text = data.get("observed_at") or data.get("retrieved_at") or obs.get("observed_at")
    if not isinstance(text, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def is_fresh(obs: Observation, now: dt.datetime, max_age_s: int) -> bool:
    """Return True if ``obs`` carries an observation time no older than ``max_age_s``."""
    moment = observed_at(obs)
    return moment is not None and (now - moment).total_seconds() <= max_age_s


def age_seconds(obs: Observation, now: dt.datetime) -> int | None:
    moment = observed_at(obs)
    return None if moment is None else int((now - moment).total_seconds())


@dataclass(frozen=True)
class ReservationEvidence:
    inventory_ref: str | None
    location_id: str | None
    missing: tuple[str, ...]
    stale: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missing and not self.stale


def reservation_evidence(
    *,
    refs: Sequence[str],
    observations: Mapping[str, Observation],
    part_id: str,
    slot_id: str,
    quantity: int,
    part_info: Mapping[str, Any] | None,
    now: dt.datetime,
) -> ReservationEvidence:
    """Check that ``refs`` prove a fresh, compatible, available part in ``slot_id``.

    Needed: an equipment observation whose family/revision the part fits, an approved
    manual passage naming the part, and a fresh inventory observation of the slot with
    enough stock.
    """
    missing: list[str] = []
    stale: list[str] = []
    chosen = [observations[r] for r in refs if r in observations and observations[r].get("ok")]
    unknown = [r for r in refs if r not in observations]
    if unknown:
        missing.append(f"unknown evidence refs: {', '.join(sorted(unknown))}")
    if part_info is None:
        return ReservationEvidence(None, None, (f"unknown part {part_id}",), ())

    equipment = [o for o in chosen if o.get("capability") == "read_equipment"]
    if not any(
        o["data"].get("family") in part_info["families"]
        and o["data"].get("revision") in part_info["revisions"]
        for o in equipment
    ):
        missing.append("compatibility: no equipment observation that this part fits")

    manuals = [o for o in chosen if o.get("capability") == "search_manual"]
    if not any(
        p.get("trust_state") == "approved" and part_id in p.get("text", "")
        for o in manuals
        for p in o["data"].get("passages", [])
    ):
        missing.append("compatibility: no approved manual passage naming the part")

    inventory_ref = None
    location_id = None
    for ref in refs:
        obs = observations.get(ref)
        if not obs or obs.get("capability") != "check_inventory" or not obs.get("ok"):
            continue
        data = obs["data"]
        slot = next((s for s in data.get("slots", []) if s.get("slot_id") == slot_id), None)
        if data.get("part_id") != part_id or slot is None:
            continue
        inventory_ref, location_id = ref, data.get("location_id")
        if slot.get("available", 0) < quantity:
            missing.append(f"availability: slot {slot_id} shows {slot.get('available')}")
        if not is_fresh(obs, now, INVENTORY_MAX_AGE_S):
            stale.append(f"inventory {ref} is older than {INVENTORY_MAX_AGE_S} s")
        break
    if inventory_ref is None:
        missing.append(f"availability: no inventory observation of {part_id} in {slot_id}")
    return ReservationEvidence(inventory_ref, location_id, tuple(missing), tuple(stale))
