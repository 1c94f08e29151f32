"""The rejection log: broad or mixed tools FieldOps refuses to expose, and why.

Data, not prose: the catalog page, validation (step 3) and the routing evaluation all
read this list. A future proposal to add one of these must answer its recorded reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Rejection:
    name: str
    reason: str
    instead: str


REJECTION_LOG: tuple[Rejection, ...] = (
    Rejection(
        "run_sql",
        "Free-form SQL can read unrelated records or mutate data; the "
        "statement, not a task contract, would decide authority.",
        "typed domain reads with fixed resources (check_inventory, read_equipment)",
    ),
    Rejection(
        "execute_shell",
        "A shell reaches capabilities far beyond the catalog; no "
        "effect class or scope can be stated.",
        "none: out of scope for FieldOps",
    ),
    Rejection(
        "call_arbitrary_api",
        "Moves destination, method and payload, and so authority, into model-generated text.",
        "one narrow capability per intent",
    ),
    Rejection(
        "browser",
        "Too broad for this scope: navigation can reach any effect.",
        "a task-specific capability behind a separately reviewed boundary",
    ),
    Rejection(
        "inventory_admin",
        "Mixes read, reservation, adjustment, transfer and release behind one name.",
        "check_inventory (read) + reserve_part (approved effect)",
    ),
    Rejection(
        "find_and_reserve_part",
        "Mixes search, domain choice, inventory read, proposal, authority and effect in one call.",
        "compose bounded reads, one proposal and one approval-gated effect",
    ),
    Rejection(
        "get_or_create_reservation",
        "Consequence depends on hidden state: cannot be "
        "treated as read-only, retries may create effects.",
        "check_inventory + propose_reservation + reserve_part",
    ),
    Rejection(
        "send_service_message",
        "Real external communication is outside FieldOps; no "
        "recipient scope, content policy or verification exists.",
        "none: FieldOps has no communication effect",
    ),
)

REJECTED: Mapping[str, Rejection] = {r.name: r for r in REJECTION_LOG}
