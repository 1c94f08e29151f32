"""The effect attempt lifecycle (SPEC §3): statuses, legal moves, and what each outcome means.

An effect attempt is the dispatch record of one consequential request (``reserve_part``),
written with the ``proposal.allowed`` event that admits it and moved only together with
the run event that records its outcome (one transaction). Like the run, it is a small
state machine whose table is data: the runner, the sweeper, the recovery page, the
terminal record and the explorer all read this one vocabulary.

Fencing rule (the ledger side lives in the world double and the reserve_part contract):
every dispatch carries a fencing token, the run sequence of the ``proposal.allowed``
event that recorded it. A reconciliation read fences the key at the run's current
revision, which is higher than the token of every dispatch recorded before it. The
ledger refuses a commit whose token is lower than the highest token it has seen for the
key (``FENCED``, no effect), so a read that finds nothing is proof of absence: no older
attempt can commit afterwards.

Pure module: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from .states import EventType


class AttemptStatus(StrEnum):
    DISPATCH_RECORDED = "DISPATCH_RECORDED"
    SENDING = "SENDING"
    NOT_SENT = "NOT_SENT"
    REJECTED = "REJECTED"
    AMBIGUOUS = "AMBIGUOUS"
    CONFIRMED = "CONFIRMED"
    ABSENT = "ABSENT"
    CONFLICT = "CONFLICT"
    UNRESOLVED = "UNRESOLVED"


S = AttemptStatus

MEANING: Mapping[AttemptStatus, str] = {
    S.DISPATCH_RECORDED: "recorded with proposal.allowed; nothing sent yet",
    S.SENDING: "passed the last cancellation and effect-gate check: the request may have left",
    S.NOT_SENT: "cancelled before sending, or refused before dispatch: no effect",
    S.REJECTED: "the service answered a definite typed rejection: no effect",
    S.AMBIGUOUS: "the request may have committed: reconcile by the same key",
    S.CONFIRMED: "the ledger holds the effect and the run records it",
    S.ABSENT: "a fenced ledger read proved that no effect exists under the key",
    S.CONFLICT: "the ledger holds the key with another intent: integrity failure",
    S.UNRESOLVED: "the ledger could not answer: reconcile again later",
}

# Where a reconciliation may start from: every status whose outcome is still unknown.
RECONCILABLE: frozenset[AttemptStatus] = frozenset(
    {S.DISPATCH_RECORDED, S.SENDING, S.AMBIGUOUS, S.UNRESOLVED}
)
# The outcome of a reconciliation read, from any reconcilable status.
_RECONCILED: frozenset[AttemptStatus] = frozenset({S.CONFIRMED, S.ABSENT, S.CONFLICT, S.UNRESOLVED})

MOVES: Mapping[AttemptStatus, frozenset[AttemptStatus]] = {
    S.DISPATCH_RECORDED: frozenset({S.SENDING, S.NOT_SENT, S.AMBIGUOUS}) | _RECONCILED,
    S.SENDING: frozenset({S.CONFIRMED, S.NOT_SENT, S.REJECTED, S.AMBIGUOUS}) | _RECONCILED,
    S.AMBIGUOUS: _RECONCILED,
    S.UNRESOLVED: _RECONCILED,
    S.NOT_SENT: frozenset(),
    S.REJECTED: frozenset(),
    S.CONFIRMED: frozenset(),
    S.ABSENT: frozenset(),
    S.CONFLICT: frozenset(),
}

# An obligation: the effect of the attempt is not known to be settled.
UNRESOLVED: frozenset[AttemptStatus] = RECONCILABLE | {S.CONFLICT}
# Unresolved, and the sweeper reconciles it by itself once the run has ended.
SWEEPER_PICKUP: frozenset[AttemptStatus] = RECONCILABLE
# Unresolved, and only an operator can settle it (listed on the recovery page).
OPERATOR_OWNED: frozenset[AttemptStatus] = UNRESOLVED - SWEEPER_PICKUP
# The request may have reached the service.
MAYBE_SENT: frozenset[AttemptStatus] = frozenset({S.SENDING, S.AMBIGUOUS, S.UNRESOLVED, S.CONFLICT})
# Proven to have produced no effect.
NO_EFFECT: frozenset[AttemptStatus] = frozenset({S.NOT_SENT, S.REJECTED, S.ABSENT})

# How the runbooks group the attempts of one semantic intent (worst first wins).
INTENT_CLASS: Mapping[AttemptStatus, str] = {
    S.DISPATCH_RECORDED: "not dispatched",
    S.NOT_SENT: "not dispatched",
    S.REJECTED: "rejected",
    S.ABSENT: "rejected",
    S.CONFIRMED: "confirmed",
    S.SENDING: "ambiguous",
    S.AMBIGUOUS: "ambiguous",
    S.UNRESOLVED: "ambiguous",
    S.CONFLICT: "conflicting",
}
INTENT_CLASS_ORDER: tuple[str, ...] = (
    "not dispatched",
    "rejected",
    "confirmed",
    "ambiguous",
    "conflicting",
)


class IllegalMove(ValueError):
    """An attempt was asked to move along an edge the lifecycle does not declare."""


def can_move(source: AttemptStatus | str, target: AttemptStatus | str) -> bool:
    return AttemptStatus(target) in MOVES[AttemptStatus(source)]


def sources_of(target: AttemptStatus) -> frozenset[AttemptStatus]:
    """Every status an attempt may move to ``target`` from (for compare-and-set filters)."""
    return frozenset(s for s, targets in MOVES.items() if target in targets)


def check_move(source: AttemptStatus | str, target: AttemptStatus | str) -> None:
    if not can_move(source, target):
        raise IllegalMove(f"effect attempt cannot move {source} -> {target}")


# -- what a dispatch outcome means ---------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    """How one outcome settles an attempt: its new status and the run event that records it.

    ``event`` is the event appended while the run is live; after the run ended the same
    outcome is recorded as ``effect.reconciled`` with ``reconciled`` as its outcome.
    ``effect`` is True when the outcome proves the effect exists (counted once).
    """

    status: AttemptStatus
    event: EventType | None
    reason: str
    effect: bool = False
    reconciled: str = ""


def resolve_dispatch(*, ok: bool, stage: str, error: str, declared: str | None) -> Resolution:
    """What the answer to a dispatch means.

    ``stage`` is how far the request got (``pre_dispatch``: certainly not sent; ``definite``
    or ``ambiguous``: it may have reached the service); ``declared`` is the event the
    capability contract declares for ``error`` (None when undeclared). After a possible
    dispatch only a declared ``effect.rejected`` is believed; everything else, including an
    error the contract does not know, is ambiguous and goes to reconciliation.
    """
    if ok:
        return Resolution(S.CONFIRMED, EventType.EFFECT_RECORDED, "committed", True, "matched")
    if stage == "pre_dispatch":
        return Resolution(S.NOT_SENT, EventType.EFFECT_REJECTED, error, reconciled="not_sent")
    if stage == "definite" and declared == EventType.EFFECT_REJECTED.value:
        return Resolution(S.REJECTED, EventType.EFFECT_REJECTED, error, reconciled="rejected")
    return Resolution(S.AMBIGUOUS, EventType.EFFECT_AMBIGUOUS, error or "outcome_unknown")


class Found(StrEnum):
    """What a reconciliation read of the ledger found."""

    MATCHED = "matched"  # the key holds this intent's effect
    ABSENT = "absent"  # nothing under the key, and the key is fenced
    CONFLICT = "conflict"  # the key holds another intent
    UNRESOLVED = "unresolved"  # the ledger could not answer
    BUSY = "busy"  # a commit of this key is in progress: ask again shortly


RECONCILIATION: Mapping[Found, Resolution] = {
    Found.MATCHED: Resolution(
        S.CONFIRMED, EventType.RECONCILIATION_MATCHED, "ledger_matched", True, "matched"
    ),
    Found.ABSENT: Resolution(
        S.ABSENT, EventType.RECONCILIATION_ABSENT, "ledger_absent", reconciled="absent"
    ),
    Found.CONFLICT: Resolution(
        S.CONFLICT,
        EventType.RECONCILIATION_CONFLICT,
        "same_key_different_intent",
        reconciled="conflict",
    ),
    Found.UNRESOLVED: Resolution(
        S.UNRESOLVED,
        EventType.RECONCILIATION_UNRESOLVED,
        "ledger_unavailable",
        reconciled="unresolved",
    ),
}


def resolve_reconciliation(found: Found | str) -> Resolution | None:
    """The resolution of a reconciliation read; None when the read must be repeated later."""
    return RECONCILIATION.get(Found(found))


# Events that record an effect as existing (each effect is referenced by exactly one).
def records_effect(event_type: EventType | str, outcome: str = "") -> bool:
    kind = EventType(event_type)
    if kind in (EventType.EFFECT_RECORDED, EventType.RECONCILIATION_MATCHED):
        return True
    return kind is EventType.EFFECT_RECONCILED and outcome == "matched"


# -- cancellation and the terminal record ----------------------------------------------------
def cancel_qualification(
    *, effects_counted: int, recovering: bool, statuses: Iterable[AttemptStatus | str]
) -> str:
    """Qualify a cancellation from authoritative records (SPEC §1 Cancellation)."""
    if effects_counted > 0:
        return "cancelled_after_effect"
    if recovering or any(AttemptStatus(s) in MAYBE_SENT for s in statuses):
        return "cancelled_effect_unknown"
    return "cancelled_no_dispatch"


@dataclass(frozen=True)
class EffectAccount:
    """The effects of an ended run: counted at its end, and reconciled since; its attempts
    still unresolved (CONFLICT included), how many of those are conflicts (final:
    reconciling cannot move them; an operator reviews them), and how many of those an
    operator reviewed (nothing is left to do about them)."""

    counted_at_end: int
    reconciled_after_end: int
    unresolved: int
    conflicts: int = 0
    reviewed_conflicts: int = 0

    @property
    def total(self) -> int:
        return self.counted_at_end + self.reconciled_after_end


def follow_up(
    *, completed: bool, account: EffectAccount, follow_up_taken: bool = False
) -> tuple[str, ...]:
    """What may follow an ended run: reconcile first while an effect is unknown (a conflict
    is not unknown: reconciling cannot move it); review a conflict no operator reviewed yet;
    a follow-up run only when the run did not complete and no effect of it exists (it would
    reserve again), nor may exist (a conflict, reviewed or not: the ledger holds its key,
    MAYBE_SENT), nor a follow-up of it that is still running or has (or may have) reserved
    (``follow_up_taken``: a second follow-up would reserve again)."""
    if account.unresolved > account.conflicts:
        return ("reconcile_effect",)
    if account.conflicts > account.reviewed_conflicts:
        return ("review_conflict",)
    if completed or account.total or account.conflicts or follow_up_taken:
        return ()
    return ("start_follow_up_run",)
