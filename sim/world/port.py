"""The world double behind ``capabilities.ports``: installed when the app is ready."""

from __future__ import annotations

from capabilities import ports
from sim.world import faults, fixtures, service


def world() -> ports.World:
    return ports.World(
        reference=ports.Reference(
            live_namespace=fixtures.LIVE_NAMESPACE,
            tenants=fixtures.TENANTS,
            locations=fixtures.LOCATIONS,
            equipment=fixtures.EQUIPMENT,
            parts=fixtures.PARTS,
        ),
        open=lambda namespace, run_id, plan: service.WorldService(
            namespace=namespace, run_id=run_id, fault_plan=plan
        ),
        parse_fault_plan=faults.normalise,
        ledger=service.ledger_entries,
    )
