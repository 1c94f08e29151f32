"""Completion is a proof obligation (SPEC §5).

The verifier evaluates named, versioned predicates against authoritative records (never
model context) and returns pass / fail / insufficient for each. Only a full pass may
complete a run; ``insufficient`` never becomes success. A model's "done" is one
observation and nothing more.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from capabilities import evidence as ev
from kernel.canonical import digest


class Result(StrEnum):
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    INSUFFICIENT = "insufficient"


class Verdict(StrEnum):
    VERIFIED = "verified"  # completion.verified -> COMPLETED
    REJECTED = "rejected"  # completion.rejected -> OBSERVING (or failed when out of budget)
    MISMATCH = "mismatch"  # verification.mismatch -> ESCALATED


@dataclass(frozen=True)
class LedgerFact:
    effect_id: str
    idempotency_key: str
    intent_matches: bool
    part_id: str
    slot_id: str
    quantity: int
    tenant: str
    status: str
    committed_at: str


@dataclass(frozen=True)
class CompletionInputs:
    """Authoritative facts gathered by the shell: evidence store, approvals, ledger."""

    tenant: str
    observations: Mapping[str, Mapping[str, Any]]
    canonical_proposal: Mapping[str, Any] | None
    canonical_hash: str
    approval_status: str | None  # status of the approval bound to canonical_hash
    expected_key: str
    ledger: Sequence[LedgerFact]  # every ledger entry written for this run
    recorded_effect_id: str  # what the run's events say the effect is
    unresolved_attempts: int
    parts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class PredicateResult:
    id: str
    version: int
    result: Result
    detail: str


@dataclass(frozen=True)
class Assessment:
    verdict: Verdict
    predicates: tuple[PredicateResult, ...]
    artifact: Mapping[str, Any] | None

    @property
    def reasons(self) -> list[str]:
        return [f"{p.id}: {p.detail}" for p in self.predicates if p.result is not Result.PASS]

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "predicates": [
                {"id": p.id, "version": p.version, "result": p.result.value, "detail": p.detail}
                for p in self.predicates
            ],
            "artifact": dict(self.artifact) if self.artifact else None,
        }


Predicate = Callable[[CompletionInputs], tuple[Result, str]]


def _observations(i: CompletionInputs) -> tuple[Result, str]:
    proposal = i.canonical_proposal
    if proposal is None:
        return Result.INSUFFICIENT, "no canonical proposal names the evidence"
    proposed_at = dt.datetime.fromisoformat(proposal["proposed_at"])
    found = ev.reservation_evidence(
        refs=proposal["evidence_refs"],
        observations=i.observations,
        part_id=proposal["part_id"],
        slot_id=proposal["slot_id"],
        quantity=proposal["quantity"],
        part_info=i.parts.get(proposal["part_id"]),
        now=proposed_at,
    )
    if found.missing:
        return Result.INSUFFICIENT, "; ".join(found.missing)
    if found.stale:
        return Result.FAIL, "; ".join(found.stale)
    return Result.PASS, f"{len(proposal['evidence_refs'])} observations, fresh at proposal"


def _proposal(i: CompletionInputs) -> tuple[Result, str]:
    if i.canonical_proposal is None:
        return Result.INSUFFICIENT, "no canonical proposal"
    if digest(dict(i.canonical_proposal)) != i.canonical_hash:
        return Result.FAIL, "stored proposal does not hash to its recorded hash"
    return Result.PASS, f"canonical, version {i.canonical_proposal.get('canonicalization')}"


def _approval(i: CompletionInputs) -> tuple[Result, str]:
    if i.approval_status is None:
        return Result.INSUFFICIENT, "no approval bound to the proposal hash"
    if i.approval_status != "USED":
        return Result.INSUFFICIENT, f"approval is {i.approval_status}, not consumed by dispatch"
    return Result.PASS, "exact approval consumed with the dispatch record"


def _ledger(i: CompletionInputs) -> tuple[Result, str]:
    if not i.ledger:
        return Result.INSUFFICIENT, "the ledger holds no effect for this run"
    keyed = [e for e in i.ledger if e.idempotency_key == i.expected_key]
    if len(i.ledger) > 1:
        return Result.FAIL, f"the ledger holds {len(i.ledger)} effects for this run"
    if not keyed:
        return Result.FAIL, "the run's only effect is not under the proposal's key"
    if not keyed[0].intent_matches:
        return Result.FAIL, "same key, different intent"
    return Result.PASS, f"exactly one effect {keyed[0].effect_id}"


def _state(i: CompletionInputs) -> tuple[Result, str]:
    proposal = i.canonical_proposal
    keyed = [e for e in i.ledger if e.idempotency_key == i.expected_key]
    if proposal is None or not keyed:
        return Result.INSUFFICIENT, "no authoritative reservation to compare"
    entry = keyed[0]
    expected = (
        proposal["part_id"],
        proposal["slot_id"],
        proposal["quantity"],
        i.tenant,
        "RESERVED",
    )
    actual = (entry.part_id, entry.slot_id, entry.quantity, entry.tenant, entry.status)
    if expected != actual:
        return Result.FAIL, f"authoritative state {actual} contradicts expected {expected}"
    if i.recorded_effect_id and i.recorded_effect_id != entry.effect_id:
        return Result.FAIL, (f"run recorded {i.recorded_effect_id}, ledger holds {entry.effect_id}")
    return Result.PASS, f"{entry.quantity} x {entry.part_id} in {entry.slot_id}, RESERVED"


def _unresolved(i: CompletionInputs) -> tuple[Result, str]:
    if i.unresolved_attempts:
        return Result.FAIL, f"{i.unresolved_attempts} effect attempt(s) unresolved"
    return Result.PASS, "no unresolved effects or escalations"


PREDICATES: tuple[tuple[str, int, str, Predicate], ...] = (
    (
        "observations.present_fresh",
        1,
        "compatibility and inventory observations exist with provenance, fresh at proposal",
        _observations,
    ),
    ("proposal.canonical", 1, "the proposal is canonical and versioned", _proposal),
    (
        "approval.exact_consumed",
        1,
        "an exact approval exists and was consumed by dispatch",
        _approval,
    ),
    (
        "ledger.exactly_one_effect",
        1,
        "the ledger holds exactly one matching semantic effect",
        _ledger,
    ),
    (
        "state.matches",
        1,
        "authoritative state shows expected part, slot, quantity, tenant, status",
        _state,
    ),
    ("effects.none_unresolved", 1, "no unresolved effects or mandatory escalations", _unresolved),
)
ARTIFACT_PREDICATE = (
    "artifact.references_verified_state",
    1,
    "the final artifact is rendered from, and references, verified state",
)

# A failure of these means authoritative state contradicts what the run recorded.
_MISMATCH = frozenset({"ledger.exactly_one_effect", "state.matches"})


def verify(inputs: CompletionInputs) -> Assessment:
    """Evaluate every predicate and return the assessment with its verdict."""
    results = [
        PredicateResult(pid, version, *check(inputs)) for pid, version, _, check in PREDICATES
    ]
    verified_state = all(r.result is Result.PASS for r in results)
    artifact = _render_artifact(inputs) if verified_state else None
    pid, version, _ = ARTIFACT_PREDICATE
    results.append(
        PredicateResult(
            pid,
            version,
            Result.PASS if artifact else Result.INSUFFICIENT,
            "rendered from the ledger entry" if artifact else "no verified state to render",
        )
    )
    if any(r.result is Result.FAIL and r.id in _MISMATCH for r in results) and inputs.ledger:
        verdict = Verdict.MISMATCH
    elif all(r.result is Result.PASS for r in results):
        verdict = Verdict.VERIFIED
    else:
        verdict = Verdict.REJECTED
    return Assessment(verdict=verdict, predicates=tuple(results), artifact=artifact)


def _render_artifact(i: CompletionInputs) -> dict[str, Any]:
    entry = next(e for e in i.ledger if e.idempotency_key == i.expected_key)
    return {
        "kind": "reservation_confirmation",
        "text": (
            f"Reserved {entry.quantity} x {entry.part_id} in slot {entry.slot_id} for "
            f"tenant {entry.tenant}. Effect {entry.effect_id}, committed "
            f"{entry.committed_at}."
        ),
        "effect_id": entry.effect_id,
        "idempotency_key": entry.idempotency_key,
        "proposal_hash": i.canonical_hash,
        "verified_state": {
            "part_id": entry.part_id,
            "slot_id": entry.slot_id,
            "quantity": entry.quantity,
            "tenant": entry.tenant,
            "status": entry.status,
        },
    }
