"""The terminal record of a run, written in the transaction of its terminal event (SPEC §7).

Exactly one per run, never edited: disposition, reason, deciding event, versions, final
counters, cancel revision, what stays unresolved and what may follow. Open waits are closed
with it; apps that keep their own rows for a run close them through ``register_closer``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from fieldops import sql
from fieldops.sql import Loader, with_lists
from kernel import clock
from operations.reviews import reviewed_conflict_ids
from runs import rows
from runs.domain import effects
from runs.domain.budgets import Budget
from runs.domain.events import EventRecord
from runs.domain.states import Disposition, EventType, State, is_terminal
from runs.models import EffectAttempt, Event, Run, TerminalRecord

# (run, terminal event) -> what that app leaves unresolved, e.g. [{"checkpoint": "cp-..."}]
Closer = Callable[[Run, EventRecord], list[dict[str, str]]]
# The same for many runs at once: [(run, terminal event)] -> {run id: what stays unresolved}
ManyCloser = Callable[[Sequence[tuple[Run, EventRecord]]], dict[str, list[dict[str, str]]]]
_CLOSERS: list[Closer] = []
_MANY: dict[Closer, ManyCloser] = {}


def register_closer(closer: Closer, *, many: ManyCloser | None = None) -> None:
    """Register an app's closer; ``many`` (optional) does the same for many runs in a few
    statements, for ``close_many`` (without it, ``close_many`` calls ``closer`` per run)."""
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)
    if many is not None:
        _MANY[closer] = many


# The statements of a close, for any number of runs (``IN`` lists: one prepared statement
# per batch size). Column names are constants, never input.
_UNRESOLVED_OF = Loader(EffectAttempt, ["run", "id"])
_UNRESOLVED_STATUSES = sorted(effects.UNRESOLVED)  # the partial index's own list, term by term
_UNRESOLVED_SQL = (
    "SELECT run_id, id FROM runs_effectattempt WHERE run_id IN ({runs}) AND status IN ({statuses})"
)
_CLOSE_CORRELATIONS_SQL = (
    "UPDATE runs_correlation SET status = %s WHERE run_id IN ({runs}) AND status = 'OPEN'"
)
# The leases still held (a run nobody claimed keeps its row as it is).
_RELEASE_SQL = (
    "UPDATE runs_run SET lease_owner = '', lease_expires_at = NULL WHERE id IN ({runs}) "
    "AND (lease_expires_at IS NOT NULL OR NOT (lease_owner = ''))"
)

_OWNERS = {
    Disposition.COMPLETED: "none",
    Disposition.FAILED: "operator",
    Disposition.CANCELLED: "operator",
    Disposition.ESCALATED: "operator",
}


def _conflicts_at_end(event: EventRecord, attempts: Sequence[str]) -> int:
    """How many of the run's unresolved ``attempts`` are conflicts when ``event`` ends it,
    for ``effects.follow_up`` (a conflict is reviewed, not reconciled). Read from the event,
    with no statement: the end of a run sends what it always did.

    A run meets a conflict in one way only, the reconciliation that finds it
    (``reconciliation.conflict``: RECOVERING to ESCALATED, runs/domain/transitions.py), and
    that event is the run's terminal event: no run goes on past a conflict, so none ends
    with an older one (one found by a reconciliation after the end comes after its record).
    The attempt is still in its previous status while the record is written (the event's
    ``within`` moves it to CONFLICT after ``close``, in the same transaction), so its
    status cannot say it. A conflict just found has not been reviewed."""
    if event.type is not EventType.RECONCILIATION_CONFLICT:
        return 0
    return int(event.refs.get("attempt", "") in attempts)


def close(run: Run, event: EventRecord) -> None:
    """Write the terminal record and close open waits, in the terminal event's transaction.

    Other apps close what they keep for the run through ``register_closer`` (approvals:
    its open checkpoints) and name what stays unresolved.
    """
    close_many([(run, event)])


def close_many(closing: Sequence[tuple[Run, EventRecord]]) -> None:
    """``close`` for many runs, each with its terminal event, in the events' transaction.

    The statements are the same for one run or a thousand (the unresolved attempts, each
    app's closer, correlations, the terminal records, the leases), so a bulk operation's
    batch closes its runs in a handful of statements and ``close`` is simply the batch of
    one: a run closed in a batch gets exactly the record it would have got alone.
    """
    if not closing:
        return
    now = clock.now()
    run_ids = [run.pk for run, _ in closing]
    run_pks = [rows.run_pk(pk) for pk in run_ids]
    unresolved_attempts: dict[str, list[str]] = {str(pk): [] for pk in run_ids}
    found = with_lists(_UNRESOLVED_SQL, runs=len(run_pks), statuses=len(_UNRESOLVED_STATUSES)).rows(
        [*run_pks, *_UNRESOLVED_STATUSES]
    )
    for row in found:
        run_id, attempt_id = _UNRESOLVED_OF.load_values(row)
        unresolved_attempts[str(run_id)].append(attempt_id)
    unresolved_elsewhere: dict[str, list[dict[str, str]]] = {str(pk): [] for pk in run_ids}
    for closer in _CLOSERS:
        many = _MANY.get(closer)
        if many is not None:
            for run_id, items in many(closing).items():
                unresolved_elsewhere[run_id].extend(items)
        else:
            for run, event in closing:
                unresolved_elsewhere[str(run.pk)].extend(closer(run, event))
    expired = [
        rows.run_pk(run.pk) for run, event in closing if event.type is EventType.EXTERNAL_EXPIRED
    ]
    closed = [
        rows.run_pk(run.pk)
        for run, event in closing
        if event.type is not EventType.EXTERNAL_EXPIRED
    ]
    for status, ids in (("EXPIRED", expired), ("CLOSED", closed)):
        if ids:
            with_lists(_CLOSE_CORRELATIONS_SQL, runs=len(ids)).write([status, *ids])
    records = []
    for run, event in closing:
        disposition = Disposition(event.next_state.value)
        attempts = unresolved_attempts[str(run.pk)]
        account = effects.EffectAccount(
            counted_at_end=int(event.budget.get(Budget.EFFECTS, 0)),
            reconciled_after_end=0,
            unresolved=len(attempts),
            conflicts=_conflicts_at_end(event, attempts),
        )
        follow_up = effects.follow_up(
            completed=disposition is Disposition.COMPLETED, account=account
        )
        records.append(
            TerminalRecord(
                run=run,
                disposition=disposition.value,
                reason_code=event.reason_code,
                deciding_sequence=event.sequence,
                versions={
                    "contract": run.contract_version,
                    "policy": run.policy_version,
                    "model_adapter": run.model_adapter_version,
                    "component_set": run.component_set,
                    "components": run.components,
                },
                final_counters=dict(event.budget),
                cancel_revision=event.cancel_revision,
                unresolved=[{"attempt": a} for a in attempts] + unresolved_elsewhere[str(run.pk)],
                evidence_complete=True,
                owner=str(event.payload.get("owner") or _OWNERS[disposition]),
                allowed_follow_up=list(follow_up),
                artifact_id=event.refs.get("artifact", ""),
                created_at=now,
            )
        )
    sql.create_many(TerminalRecord, records)
    with_lists(_RELEASE_SQL, runs=len(run_pks)).write(run_pks)


# Follow-ups looked at below an ended run, at most: each one that ended without an effect
# lets the next start, so a chain is as long as the retries an operator made.
FOLLOW_UP_CHAIN_MAX = 50


@dataclass(frozen=True)
class FollowUpTaken:
    """A follow-up of an ended run (or of one of its follow-ups) that is still running, or
    ended with an effect, or with one still unknown: another follow-up would reserve the
    same request again."""

    run: Run
    direct: bool  # a follow-up of the ended run itself (not of another run of its chain)
    account: effects.EffectAccount | None  # None while it runs

    @property
    def message(self) -> str:
        whose = "of this run" if self.direct else f"of run {self.run.follows_run_id.hex[:8]}"
        name = f"follow-up run {self.run.short_id} {whose}"
        if self.account is None:
            return (
                f"{name} is still {self.run.state}: it may reserve, and a second follow-up "
                "would reserve again. Wait for it to end, or cancel it"
            )
        if self.account.unresolved:
            return (
                f"an effect of {name} is still unknown: reconcile it on Recovery; a second "
                "follow-up would reserve again"
            )
        return f"{name} reserved already; a second follow-up would reserve again"


def follow_up_root(run: Run) -> Any:
    """The primary key of the run ``run`` follows up, through its chain of follow-ups (``run``
    itself when it follows none): the request every run of the chain serves."""
    pk, up = run.pk, run.follows_run_id
    for _ in range(FOLLOW_UP_CHAIN_MAX):
        if up is None:
            break
        pk, up = up, Run.objects.filter(pk=up).values_list("follows_run_id", flat=True).first()
    return pk


def follow_up_taken(run: Run) -> FollowUpTaken | None:
    """The follow-up in ``run``'s chain (every follow-up of the run it follows up, level by
    level: its own, its siblings', their follow-ups) that rules out another follow-up of
    it: one still running, one that completed or has an effect, one whose effect is
    unknown. None when every follow-up ended without an effect."""
    frontier, seen = [follow_up_root(run)], 0
    while frontier and seen < FOLLOW_UP_CHAIN_MAX:
        children = list(
            Run.objects.filter(follows_run__in=frontier)
            .only("id", "state", "counters", "revision", "created_at", "follows_run_id")
            .order_by("created_at", "id")[: FOLLOW_UP_CHAIN_MAX - seen]
        )
        seen += len(children)
        for child in children:
            direct = child.follows_run_id == run.pk
            if not is_terminal(child.state):
                return FollowUpTaken(child, direct, None)
            account = effect_account(child)
            if child.state == State.COMPLETED.value or account.total or account.unresolved:
                return FollowUpTaken(child, direct, account)
        frontier = [child.pk for child in children]
    return None


def effect_account(run: Run) -> effects.EffectAccount:
    """The effects of an ended run: counted by its terminal record, reconciled since, and
    still unknown (SPEC §7: terminal records are never edited; corrections are appended)."""
    return effect_account_with(run, TerminalRecord.objects.filter(run=run).first())


def effect_account_with(run: Run, record: TerminalRecord | None) -> effects.EffectAccount:
    """``effect_account`` for a caller that has read the run's terminal record (``record``,
    None if it has none). Both reads are served by partial indexes (``event_run_reconciled``,
    ``attempt_run_unresolved``): they cost the same at any history length."""
    counted = int((record.final_counters if record else run.counters).get(Budget.EFFECTS, 0))
    after = record.deciding_sequence if record else run.revision
    reconciled = sum(
        1
        for payload in Event.objects.filter(
            run=run, type=EventType.EFFECT_RECONCILED.value, sequence__gt=after
        ).values_list("payload", flat=True)
        if effects.records_effect(EventType.EFFECT_RECONCILED, payload.get("outcome", ""))
    )
    # Sorted: the exact list of ``attempt_run_unresolved`` (models.UNRESOLVED_STATUSES), which
    # SQLite needs term for term to use the partial index.
    unresolved = EffectAttempt.objects.filter(
        run=run, status__in=sorted(effects.UNRESOLVED)
    ).count()
    # Of those, the conflicts, and those an operator reviewed (read only when something is
    # unresolved).
    conflicts = (
        EffectAttempt.objects.filter(run=run, status=effects.AttemptStatus.CONFLICT).aggregate(
            conflicts=Count("pk"), reviewed=Count("pk", filter=Q(pk__in=reviewed_conflict_ids()))
        )
        if unresolved
        else {"conflicts": 0, "reviewed": 0}
    )
    return effects.EffectAccount(
        counted, reconciled, unresolved, conflicts["conflicts"], conflicts["reviewed"]
    )
