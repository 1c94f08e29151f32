"""The port governed code reaches the world through: what a resource service answers, and
the reference facts about the world (tenants, locations, equipment, parts).

Capability adapters, the engine and the console speak only to these types. The
deterministic world double (``sim/world``) implements them and installs itself at start-up
(``sim.apps.SimConfig.ready``); a real deployment would install adapters for real
services instead. Nothing in governed code imports the double.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class ServiceFault(Exception):
    """A typed failure of a resource service. ``stage`` says how far the request got:
    ``pre_dispatch`` (nothing sent), ``definite`` (the service answered) or ``ambiguous``."""

    def __init__(self, code: str, stage: str, detail: str = "", *, point: str = "") -> None:
        self.code = code
        self.stage = stage
        self.detail = detail
        self.point = point  # the fault-schedule point that caused it, if any
        super().__init__(f"{code} ({stage}) {detail}".strip())


class FaultPlanError(ValueError):
    """A run's fault plan names a point or an entry the world does not know."""


@dataclass(frozen=True)
class LedgerRecord:
    """One committed effect in the authoritative ledger."""

    namespace: str
    idempotency_key: str
    intent_hash: str
    effect_id: str
    tenant: str
    principal_ref: str
    task_id: str
    run_id: str
    proposal_hash: str
    part_id: str
    slot_id: str
    quantity: int
    status: str
    committed_at: dt.datetime


@dataclass(frozen=True)
class LedgerLookup:
    found: bool
    entry: LedgerRecord | None


class WorldPort(Protocol):
    """One run's view of the resource service: its requests, their faults, its answers."""

    namespace: str
    run_id: str

    def next_call_index(self, capability: str) -> int:
        """The call's number for the fault plan; a service may answer 0 when no fault
        counts this capability's calls, and number the call when it logs it."""
        ...

    def fires(self, point: str, capability: str, call_index: int) -> bool: ...

    def log(
        self,
        *,
        capability: str,
        call_index: int,
        args: Mapping[str, Any],
        outcome: str,
        fault: str = "",
        key: str = "",
        operation: str = "invoke",
    ) -> None: ...

    def read_equipment(
        self, *, call_index: int, equipment_id: str, tenant: str
    ) -> dict[str, Any]: ...

    def search_manual(
        self,
        *,
        call_index: int,
        query: str,
        family: str,
        max_passages: int,
        tenant: str,
        scored: bool = False,
    ) -> dict[str, Any]: ...

    def check_inventory(
        self, *, call_index: int, part_id: str, location_id: str, tenant: str
    ) -> dict[str, Any]: ...

    def reserve(
        self,
        *,
        call_index: int,
        key: str,
        intent: Mapping[str, Any],
        intent_hash: str,
        fencing_token: int,
    ) -> dict[str, Any]: ...

    def ledger_lookup(self, *, key: str, fence: int) -> LedgerLookup: ...


@dataclass(frozen=True)
class Reference:
    """Static facts about the world: ids a run may name, and what they are."""

    live_namespace: str
    tenants: Mapping[str, Mapping[str, Any]]
    locations: Mapping[str, Mapping[str, Any]]
    equipment: Mapping[str, Mapping[str, Any]]
    parts: Mapping[str, Mapping[str, Any]]

    def locations_of(self, tenant: str) -> list[str]:
        return sorted(k for k, v in self.locations.items() if v["tenant"] == tenant)

    def equipment_of(self, tenant: str) -> list[str]:
        return sorted(k for k, v in self.equipment.items() if v["tenant"] == tenant)


class LedgerReader(Protocol):
    def __call__(
        self,
        *,
        namespace: str | None = None,
        run_id: str | None = None,
        tenant: str | None = None,
        keys: Iterable[str] = (),
        effect_id: str = "",
        limit: int = 200,
    ) -> list[LedgerRecord]: ...


@dataclass(frozen=True)
class World:
    """What an installed world provides."""

    reference: Reference
    # (namespace, run_id, fault plan as stored on the run) -> that run's service view
    open: Callable[[str, str, Sequence[Mapping[str, Any]]], WorldPort]
    # Validate and normalise a fault plan (raise FaultPlanError); world points only.
    parse_fault_plan: Callable[[Any], list[dict[str, Any]]]
    ledger: LedgerReader


_installed: World | None = None


def install(world: World) -> None:
    global _installed
    _installed = world


def world() -> World:
    """The installed world; raise RuntimeError when none was installed (a set-up error)."""
    if _installed is None:
        raise RuntimeError("no world is installed: add an app that installs one (e.g. 'sim')")
    return _installed


def for_run(namespace: str, run_id: str, fault_plan: Sequence[Mapping[str, Any]]) -> WorldPort:
    """The service view of one run (its namespace and fault plan)."""
    return world().open(namespace, run_id, fault_plan)
