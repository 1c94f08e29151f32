"""Reads for the runs pages: the keyset-paged list, the run page (identity, gauges, timeline,
terminal record) and its export.
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from django.db.models import Q, QuerySet

from approvals.models import Checkpoint
from capabilities.registry import CAPABILITIES
from kernel import clock
from operations.reviews import conflict_reviews
from runs import runbooks as runbook_data
from runs.console import jsonstream
from runs.console.filters import (
    AGES,
    DEFAULT_WORLD,
    DISPOSITIONS,
    ID_SEARCH_ERROR,
    WORLDS,
    digits_range,
    id_digits,
    in_world,
    world_from_query,
)
from runs.console.stalls import Stalled, run_stalled
from runs.domain import effects
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.states import CONTROL_EVENTS, REJECTION_EVENTS, State
from runs.models import (
    CONTROL_TYPES,
    ID_PREFIX_DIGITS,
    REJECTED_TYPES,
    RUNBOOK_SIGNS,
    EffectAttempt,
    Event,
    Evidence,
    Run,
    TerminalRecord,
    id_prefix,
)
from runs.policies import MODEL_SCENARIO, scenario_names
from runs.policies import registry as policy_registry
from runs.runbooks import Runbook
from runs.terminal import FollowUpTaken, effect_account_with, follow_up_taken

PAGE_SIZE = 50


TIMELINE_LIMIT = 1000

# The run page shows a run's latest checkpoints, effect attempts and follow-ups, this many
# of each, and links the full lists (paged, RELATED_PAGE a page).
RELATED_LIMIT = 10
RELATED_PAGE = 100


TIMELINE_KINDS = ("all", "transitions", "control", "rejected")


# Event refs that name an evidence row (openable); the rest name other records.
EVIDENCE_REFS = frozenset(
    {
        "observation",
        "proposal",
        "raw_output",
        "commentary",
        "validation",
        "completion",
        "artifact",
    }
)


# -- runs list -------------------------------------------------------------------------
def callable_capabilities() -> tuple[str, ...]:
    """The capabilities a run can call (the capability filter's choices), sorted."""
    return tuple(sorted(CAPABILITIES))


@dataclass(frozen=True)
class RunFilters:
    state: str = ""
    disposition: str = ""
    scenario: str = ""
    capability: str = ""  # runs that called it (``CapabilityUse``)
    age: str = ""
    world: str = DEFAULT_WORLD
    q: str = ""

    @classmethod
    def from_query(cls, data: Mapping[str, str]) -> RunFilters:
        """Keep only values the list understands; anything else is ignored, not an error."""
        state = data.get("state", "")
        disposition = data.get("disposition", "")
        scenario = data.get("scenario", "")
        capability = data.get("capability", "")
        age = data.get("age", "")
        world = data.get("world", "")
        return cls(
            state=state if state in State.__members__ else "",
            disposition=disposition if disposition in DISPOSITIONS else "",
            scenario=scenario if scenario in scenario_names() else "",
            capability=capability if capability in callable_capabilities() else "",
            age=age if age in AGES else "",
            world=world_from_query(world),
            q=(data.get("q") or "").strip()[:36],
        )

    @property
    def world_label(self) -> str:
        return WORLDS[self.world]

    def as_query(self) -> dict[str, str]:
        """The filters that differ from the defaults (the live world is the default)."""
        defaults = vars(RunFilters())
        return {k: v for k, v in vars(self).items() if v and v != defaults[k]}


# The query keys the runs list's filters read (saved views and bulk operations keep these).
FILTER_KEYS: tuple[str, ...] = tuple(f.name for f in fields(RunFilters))


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    next_cursor: str  # the page of older runs after this one ("" when none)
    filters: RunFilters
    search_error: str = ""
    prev_cursor: str = ""  # the page of newer runs before this one ("" on the first page)


def encode_position(created_at: dt.datetime, pk: Any) -> str:
    """A keyset cursor for a list ordered by (created_at, id), newest first."""
    raw = f"{clock.iso(created_at)}|{pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_position(cursor: str) -> tuple[dt.datetime, str] | None:
    """The (created_at, id) of a cursor from ``encode_position``; None if it is not one.

    Ours always carry a UTC offset; a moment without one, or one that has no UTC
    equivalent (``9999-12-31T23:59:59-14:00``: the database adapter's conversion would
    overflow), or an id with a NUL, is not ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, sep, pk = raw.partition("|")
        # A NUL cannot be a parameter of a PostgreSQL query (the query fails).
        if not sep or not pk or "\x00" in pk:
            return None
        moment = clock.parse(stamp)
        if moment.tzinfo is None:
            return None
        return moment.astimezone(dt.UTC), pk
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None


def encode_cursor(run: Run) -> str:
    return encode_position(run.created_at, run.pk)


def decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID] | None:
    position = decode_position(cursor)
    if position is None:
        return None
    try:
        return position[0], uuid.UUID(position[1])
    except ValueError:
        return None


def keyset_after(created: dt.datetime, pk: Any, *, by: tuple[str, str] = ("created_at", "pk")) -> Q:
    """The condition for rows after (created, pk) in (-created_at, -id) order: a keyset
    seek (``by``: the two columns that order, if not the row's own creation time and id).

    The redundant ``created_at <= created`` bound is what the index range starts from;
    without it PostgreSQL walks (and filters) every row before the cursor."""
    at, key = by
    return Q(**{f"{at}__lte": created}) & (
        Q(**{f"{at}__lt": created}) | Q(**{at: created, f"{key}__lt": pk})
    )


def keyset_before(
    created: dt.datetime, pk: Any, *, by: tuple[str, str] = ("created_at", "pk")
) -> Q:
    """The condition for rows before (created, pk) in (-created_at, -id) order (newer):
    ``keyset_after``'s mirror, read in ascending order from the same index backwards."""
    at, key = by
    return Q(**{f"{at}__gte": created}) & (
        Q(**{f"{at}__gt": created}) | Q(**{at: created, f"{key}__gt": pk})
    )


def older_than(qs: QuerySet[Any], created: dt.datetime, pk: Any) -> QuerySet[Any]:
    """The rows of ``qs`` after (created, pk) in (-created_at, -id) order (``keyset_after``)."""
    return qs.filter(keyset_after(created, pk))


# With the capability filter the list is ordered by the capability's uses, which hold
# each run's creation time and id: ``capability_use_listing`` gives that order, so a page
# is a seek in it whatever share of the runs called the capability.
USE_ORDER = ("capability_uses__run_created_at", "capability_uses__run_id")


def runs_matching(
    *,
    tenant: str,
    filters: RunFilters,
    after: tuple[dt.datetime, Any] | None = None,
    newer: bool = False,
) -> QuerySet[Run] | None:
    """The tenant's runs the list's ``filters`` select (unordered); None for an id search
    that is not hexadecimal. The list pages it; bulk operations and exports walk all of it.

    ``after``: a keyset position (see ``run_list_for_tenant``), only with a capability
    filter, whose use it seeks in: the runs older than it, or newer with ``newer``. A use
    is joined once, by one ``filter`` with all its conditions: Django joins a reverse
    relation again for each ``filter`` call.
    """
    qs = Run.objects.filter(tenant=tenant)
    if filters.state:
        qs = qs.filter(state=filters.state)
    if filters.disposition:
        qs = qs.filter(disposition=filters.disposition)
    if filters.scenario:
        qs = qs.filter(scenario=filters.scenario)
    if filters.capability:
        # A run has at most one use of a capability: the join repeats no run.
        called = Q(
            capability_uses__tenant=tenant, capability_uses__capability_id=filters.capability
        )
        if after is not None:
            called &= (keyset_before if newer else keyset_after)(*after, by=USE_ORDER)
        qs = qs.filter(called)
    qs = in_world(qs, filters.world)
    if filters.age:
        _, span, newer = AGES[filters.age]
        since = clock.now() - span
        qs = qs.filter(created_at__gte=since) if newer else qs.filter(created_at__lt=since)
    if filters.q:
        return _id_search(qs, filters.q, live=filters.world == DEFAULT_WORLD)
    return qs


def _id_search(qs: QuerySet[Run], text: str, *, live: bool) -> QuerySet[Run] | None:
    """Narrow ``qs`` to ids starting with the hex digits of ``text`` (None: not hex).

    Ids are random, so the shape of the condition decides what a page reads at millions
    of runs. A prefix of ID_PREFIX_DIGITS or more digits names its first digits, which
    ``run_tenant_live_id_prefix`` (live world) orders by creation: the page seeks to them.
    With exactly that many digits this is the whole condition: an id range next to it
    would be estimated at one row (a range inside one histogram bucket), and the primary
    key would be chosen and read every match. Longer prefixes add the range, whose few
    matches either index finds. Shorter ones are the range alone: the creation order
    finds a page of their many matches after reading 16x (one digit) or 256x the page.
    Every form selects exactly the runs whose id starts with the digits."""
    digits = id_digits(text)
    if digits is None:
        return None
    if live and len(digits) >= ID_PREFIX_DIGITS:
        qs = qs.alias(id_prefix=id_prefix()).filter(id_prefix=digits[:ID_PREFIX_DIGITS])
        if len(digits) == ID_PREFIX_DIGITS:
            return qs
    low, high = digits_range(digits)
    return qs.filter(pk__gte=low, pk__lte=high)


def runs_by_short_id(tenant: str, text: str) -> list[uuid.UUID]:
    """The ids of at most two of ``tenant``'s runs, in any world, whose id starts with the
    hex digits of ``text`` (a short id as the lists show it, or any prefix; none when it is
    not hex): one names its run, two say the prefix is shared."""
    digits = id_digits(text)
    if digits is None:
        return []
    low, high = digits_range(digits)
    return list(
        Run.objects.filter(tenant=tenant, pk__gte=low, pk__lte=high)
        .order_by("pk")
        .values_list("pk", flat=True)[:2]
    )


def run_list_for_tenant(
    *,
    tenant: str,
    filters: RunFilters,
    cursor: str = "",
    before: str = "",
    page_size: int = PAGE_SIZE,
) -> RunPage:
    """Return one page of the tenant's runs, newest first: the page after ``cursor`` (older
    runs), or the page before ``before`` (newer runs: "Newer" on a later page).

    One query: filters map onto the (tenant, <field>, -created_at, -id) indexes and the
    page is a keyset seek (a page before its position reads the same index backwards and
    is put in list order here), so the cost does not grow with the number of runs.
    """
    newer = bool(before) and not cursor
    position = decode_cursor(before if newer else cursor) if (before or cursor) else None
    newer = newer and position is not None
    by_use = bool(filters.capability)
    qs = runs_matching(
        tenant=tenant, filters=filters, after=position if by_use else None, newer=newer
    )
    if qs is None:
        return RunPage([], "", filters, ID_SEARCH_ERROR)
    if position is not None and not by_use:
        qs = qs.filter((keyset_before if newer else keyset_after)(*position))
    order = USE_ORDER if by_use else ("created_at", "pk")
    rows = list(
        qs.order_by(*(column if newer else f"-{column}" for column in order)).only(
            "id",
            "scenario",
            "namespace",
            "state",
            "disposition",
            "terminal_reason",
            "revision",
            "attempt",
            "owner_epoch",
            "created_at",
            "updated_at",
            "principal_ref",
            "counters",
            "budget_limits",
        )[: page_size + 1]
    )
    more = len(rows) > page_size
    shown = rows[:page_size]
    if newer:
        # Read oldest first from the position: the page is the newest ``page_size`` of
        # them, in list order; the position's own run (and those after it) are older.
        shown.reverse()
        older = encode_cursor(shown[-1]) if shown else ""
        return RunPage(shown, older, filters, prev_cursor=encode_cursor(shown[0]) if more else "")
    next_cursor = encode_cursor(shown[-1]) if more else ""
    prev_cursor = encode_cursor(shown[0]) if position is not None and shown else ""
    return RunPage(shown, next_cursor, filters, prev_cursor=prev_cursor)


def run_filter_choices() -> dict[str, Any]:
    return {
        "states": [s.value for s in State],
        "dispositions": DISPOSITIONS,
        "scenarios": [
            (name, s.description) for name, s in sorted(policy_registry.scenarios().items())
        ]
        + [(MODEL_SCENARIO, "the configured OpenAI-compatible model endpoint")],
        "capabilities": callable_capabilities(),
        "ages": [(key, label) for key, (label, _, _) in AGES.items()],
        "worlds": list(WORLDS.items()),
    }


# -- one run ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RefLink:
    name: str
    value: str
    kind: str  # "evidence" | "checkpoint" | "attempt" | "effect" | "other"


@dataclass(frozen=True)
class TimelineEntry:
    event: Event
    refs: tuple[RefLink, ...]
    is_control: bool
    is_rejected: bool
    changes_state: bool


def ref_links(refs: Mapping[str, str]) -> tuple[RefLink, ...]:
    out = []
    for name, value in sorted(refs.items()):
        if not value:
            continue
        if name in EVIDENCE_REFS:
            kind = "evidence"
        elif name in ("checkpoint", "approval"):
            kind = "checkpoint"
        elif name in ("attempt", "effect"):
            kind = name
        else:
            kind = "other"
        out.append(RefLink(name, str(value), kind))
    return tuple(out)


def _kind_filter(kind: str) -> Q:
    """The events of a timeline kind: exactly the conditions of the partial indexes
    ``event_run_transition``, ``event_run_control`` and ``event_run_rejected`` (see
    ``runs.models``), so a page of any kind reads only its own rows."""
    if kind == "transitions":
        return ~Q(type__in=CONTROL_TYPES)
    if kind == "control":
        return Q(type__in=CONTROL_TYPES)
    if kind == "rejected":
        return Q(type__in=REJECTED_TYPES)
    return Q()


@dataclass(frozen=True)
class TimelinePage:
    """One page of a run's timeline, oldest first, and the keyset cursors next to it.

    ``older``: page with ``before=older`` for the events before this page (None: this
    page starts at the run's first event of the kind); ``newer``: ``after=newer`` for the
    events after it (None: this page ends at the latest). Iterating gives the entries."""

    entries: list[TimelineEntry]
    older: int | None
    newer: int | None

    def __iter__(self) -> Iterator[TimelineEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> TimelineEntry:
        return self.entries[index]

    def __bool__(self) -> bool:
        return bool(self.entries)


def run_timeline(
    *,
    run: Run,
    kind: str = "all",
    limit: int = TIMELINE_LIMIT,
    before: int | None = None,
    after: int | None = None,
) -> TimelinePage:
    """One page of the run's events, filtered by kind, in one query at any history length.

    Keyset pagination by sequence (the (run, sequence) index): the latest ``limit``
    events; with ``before``, the ``limit`` events just before that sequence; with
    ``after``, the ``limit`` events just after it. One row more than a page is read to
    know whether the page has a neighbour in the direction it was reached from."""
    events = Event.objects.filter(run=run).filter(
        _kind_filter(kind if kind in TIMELINE_KINDS else "all")
    )
    if after is not None:
        rows = list(events.filter(sequence__gt=after).order_by("sequence")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        newer = rows[-1].sequence if more and rows else None
        older = rows[0].sequence if rows else None
    else:
        if before is not None:
            events = events.filter(sequence__lt=before)
        rows = list(events.order_by("-sequence")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        rows.reverse()
        older = rows[0].sequence if more and rows else None
        newer = rows[-1].sequence if before is not None and rows else None
    control = {e.value for e in CONTROL_EVENTS}
    rejected = {e.value for e in REJECTION_EVENTS}
    entries = [
        TimelineEntry(
            event=e,
            refs=ref_links(e.refs),
            is_control=e.type in control,
            is_rejected=e.type in rejected,
            changes_state=e.prev_state != e.next_state,
        )
        for e in rows
    ]
    return TimelinePage(entries, older=older, newer=newer)


@dataclass(frozen=True)
class Gauge:
    """One budget of a run as the run page shows it, coloured by what it means.

    ``level`` is "alarm" only when this budget's exhaustion ended the run; "done" for the
    effects budget once an effect happened (the run exists for it: 1/1 is success, not an
    alarm); "near" for another budget of an active run at 75 % or more (its next charge
    may be refused); "" otherwise."""

    budget: str
    used: int
    limit: int
    initial: int
    exhausted: bool = False  # the run ended with this budget's exhaustion reason
    active: bool = True  # the run has not ended

    @property
    def percent(self) -> int:
        if self.limit <= 0:
            return 100 if self.used else 0
        return min(100, round(100 * self.used / self.limit))

    @property
    def level(self) -> str:
        if self.exhausted:
            return "alarm"
        if self.budget == Budget.EFFECTS:
            return "done" if self.used else ""
        return "near" if self.active and self.percent >= 75 else ""

    @property
    def meaning(self) -> str:
        """The level in words (shown next to the gauge and read out with it)."""
        return {
            "alarm": "exhausted: this ended the run",
            "done": "the run's effect happened" if self.used == 1 else "effects happened",
            "near": "close to the limit: the next charge may be refused",
        }.get(self.level, "")

    @property
    def changed(self) -> bool:
        return self.limit != self.initial


def run_gauges(run: Run) -> list[Gauge]:
    return [
        Gauge(
            budget=b.value,
            used=int(run.counters.get(b.value, 0)),
            limit=int(run.budget_limits.get(b.value, 0)),
            initial=int(run.limits.get(b.value, 0)),
            exhausted=run.is_terminal and run.terminal_reason == exhausted_reason(b),
            active=not run.is_terminal,
        )
        for b in Budget
    ]


@dataclass(frozen=True)
class Latest:
    """The latest rows of one of a run's lists, oldest first, and whether it has earlier
    ones (the run page then links the whole list). Iterating gives the rows."""

    rows: list[Any]
    earlier: bool

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)


def _latest(qs: QuerySet[Any], limit: int = RELATED_LIMIT) -> Latest:
    """The newest ``limit`` rows of ``qs`` by (created_at, id), in one query that reads
    ``limit + 1`` index entries (each list has a (run, -created_at, -id) index)."""
    rows = list(qs.order_by("-created_at", "-id")[: limit + 1])
    earlier = len(rows) > limit
    rows = rows[:limit]
    rows.reverse()
    return Latest(rows, earlier)


# A run's lists the run page shows the latest of, and the full list pages: the rows of
# each for a run (the run page's and the full list's query are the same, ordered and cut).
RELATED = ("checkpoints", "attempts", "follow-ups")


def related_rows(run: Run, what: str) -> QuerySet[Any]:
    """The run's checkpoints, effect attempts or follow-up runs (``what`` in RELATED)."""
    if what == "checkpoints":
        return Checkpoint.objects.filter(run=run)
    if what == "attempts":
        return EffectAttempt.objects.filter(run=run)
    if what == "follow-ups":
        return Run.objects.filter(follows_run=run).only("id", "state", "created_at")
    raise ValueError(f"no list {what!r} on the run page")


@dataclass(frozen=True)
class RelatedPage:
    """One page of a run's full list, newest first; ``older`` is the cursor of the next
    page ("" on the last)."""

    rows: list[Any]
    older: str


def related_page(
    *, run: Run, what: str, cursor: str = "", page_size: int = RELATED_PAGE
) -> RelatedPage | None:
    """One page of the run's ``what`` list (see ``related_rows``) after ``cursor``, newest
    first, in one query at any length; None for a cursor that is not one of ours."""
    qs = related_rows(run, what)
    if cursor:
        position = decode_position(cursor)
        if position is None:
            return None
        created, pk = position
        if what == "follow-ups":
            try:
                pk = str(uuid.UUID(pk))
            except ValueError:
                return None
        qs = older_than(qs, created, pk)
    rows = list(qs.order_by("-created_at", "-id")[: page_size + 1])
    if len(rows) <= page_size:
        return RelatedPage(rows, "")
    last = rows[page_size - 1]
    return RelatedPage(rows[:page_size], encode_position(last.created_at, last.pk))


@dataclass
class RunDetail:
    run: Run
    terminal: TerminalRecord | None
    checkpoints: Latest
    attempts: Latest
    follow_ups: Latest
    waiting: Checkpoint | None = None
    gauges: list[Gauge] = field(default_factory=list)
    # For an ended run: its effects (counted at the end + reconciled since) and what may
    # follow it now.
    effect_account: effects.EffectAccount | None = None
    follow_up: tuple[str, ...] = ()
    # The follow-up of it that rules out another one (still running, or it reserved).
    follow_up_taken: FollowUpTaken | None = None
    # The incident runbooks its record shows it is part of (ledger outage, ...).
    runbooks: tuple[Runbook, ...] = ()
    # The operator's review of each conflicting attempt shown that has one, by attempt id.
    reviews: dict[str, Any] = field(default_factory=dict)
    # For an ended run: its conflicting attempts (final: reviewed, never reconciled) and how
    # many of its unresolved effects are unknown (an operator reconciles those).
    conflicts: tuple[str, ...] = ()
    effects_unknown: int = 0
    # For an active run no worker moves (Recovery's "should be moving and are not"): why.
    stalled: Stalled | None = None

    @property
    def conflicts_to_review(self) -> list[str]:
        """The run's conflicting attempts no operator has reviewed yet."""
        return [c for c in self.conflicts if c not in self.reviews]


def run_detail(run: Run) -> RunDetail:
    """Everything the run page shows besides the timeline, in a fixed number of queries
    that each read a bounded number of rows: the latest RELATED_LIMIT checkpoints,
    attempts and follow-ups (the page links the rest), however many the run has."""
    terminal = TerminalRecord.objects.filter(run=run).first() if run.is_terminal else None
    checkpoints = _latest(related_rows(run, "checkpoints"))
    attempts = _latest(related_rows(run, "attempts"))
    follow_ups = _latest(related_rows(run, "follow-ups"))
    waiting = None
    if run.waiting_checkpoint:
        # The checkpoint a run waits on is its newest; read it if the list somehow is not.
        waiting = next((c for c in checkpoints if c.pk == run.waiting_checkpoint), None) or (
            Checkpoint.objects.filter(run=run, pk=run.waiting_checkpoint).first()
        )
    account = effect_account_with(run, terminal) if terminal is not None else None
    conflicts = run_conflicts(run) if account is not None and account.unresolved else ()
    # A follow-up that rules out another is looked for only where one could be offered.
    taken = (
        follow_up_taken(run)
        if account is not None
        and not (account.unresolved or account.total or run.state == State.COMPLETED.value)
        else None
    )
    return RunDetail(
        run=run,
        terminal=terminal,
        checkpoints=checkpoints,
        attempts=attempts,
        follow_ups=follow_ups,
        waiting=waiting,
        gauges=run_gauges(run),
        effect_account=account,
        follow_up=effects.follow_up(
            completed=run.state == State.COMPLETED.value,
            account=account,
            follow_up_taken=taken is not None,
        )
        if account is not None
        else (),
        follow_up_taken=taken,
        runbooks=run_runbooks(run),
        reviews=attempt_reviews(attempts, also=[*terminal_attempt_ids(terminal), *conflicts]),
        conflicts=conflicts,
        effects_unknown=account.unresolved - len(conflicts) if account is not None else 0,
        stalled=run_stalled(run),
    )


def run_conflicts(run: Run) -> tuple[str, ...]:
    """The ids of the run's conflicting effect attempts (the ledger holds their key with
    another intent), oldest first."""
    return tuple(
        EffectAttempt.objects.filter(run=run, status=effects.AttemptStatus.CONFLICT)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)
    )


def attempt_reviews(attempts: Iterable[Any], *, also: Iterable[str] = ()) -> dict[str, Any]:
    """The operator's review of each of ``attempts`` that is a reviewed conflict, and of each
    attempt id in ``also`` that has one, by attempt id (one query, none when there is
    nothing to look up)."""
    conflicts = [a.pk for a in attempts if a.status == effects.AttemptStatus.CONFLICT]
    conflicts += [pk for pk in also if pk not in conflicts]
    return conflict_reviews(attempt_ids=conflicts) if conflicts else {}


def terminal_attempt_ids(terminal: TerminalRecord | None) -> list[str]:
    """The attempts a terminal record lists as unresolved at the run's end (a conflict among
    them may have been reviewed since: the page says so beside it)."""
    if terminal is None:
        return []
    return [u["attempt"] for u in terminal.unresolved if "attempt" in u]


def run_runbooks(run: Run) -> tuple[Runbook, ...]:
    """The runbooks whose incident the run's events show: one query, on the partial index
    of the events that show one (``event_run_runbook_sign``: its condition, term for term,
    so both databases plan it), never on the run's whole history."""
    signs = RUNBOOK_SIGNS
    found = (
        Event.objects.filter(run=run)
        .filter(Q(type__in=signs) | Q(reason_code__in=signs))
        .values_list("type", "reason_code")
        .distinct()
    )
    return runbook_data.runbooks_with_signs({value for pair in found for value in pair})


def run_evidence(*, run: Run, evidence_id: str) -> Evidence | None:
    return Evidence.objects.filter(run=run, pk=evidence_id).first()


# Rows read per round trip of the export's server-side cursors.
EXPORT_CHUNK = 2000


def run_export(run: Run) -> Iterator[str]:
    """The run's identity, events and the evidence references they carry (not payloads), as
    the pieces of one JSON document: byte for byte what ``JsonResponse`` (indent 2) writes
    for the whole document, but the events and evidence references are read through
    server-side cursors and written as they are read, so memory stays flat at any history
    length (the document of a 1,000,000-event run is over a gigabyte)."""
    head = {
        "format": "fieldops-run-export@1",
        "exported_at": clock.iso(clock.now()),
        "run": _export_identity(run),
        "events": [],
        "evidence_refs": [],
    }
    events = (
        _export_event(e)
        for e in Event.objects.filter(run=run).order_by("sequence").iterator(EXPORT_CHUNK)
    )
    evidence = (
        {**row, "created_at": clock.iso(row["created_at"])}
        for row in Evidence.objects.filter(run=run)
        .order_by("created_at", "id")
        .values("id", "kind", "content_hash", "redaction_class", "size", "created_at")
        .iterator(EXPORT_CHUNK)
    )
    return jsonstream.document(head, {"events": events, "evidence_refs": evidence})


def _export_identity(run: Run) -> dict[str, Any]:
    return {
        "run_id": str(run.pk),
        "task_id": run.task_id,
        "tenant": run.tenant,
        "principal_ref": run.principal_ref,
        "scenario": run.scenario,
        "state": run.state,
        "revision": run.revision,
        "attempt": run.attempt,
        "owner_epoch": run.owner_epoch,
        "contract_version": run.contract_version,
        "policy_version": run.policy_version,
        "model_adapter_version": run.model_adapter_version,
        "component_set": run.component_set,
        "components": run.components,
        "limits": run.limits,
        "budget_limits": run.budget_limits,
        "counters": run.counters,
        "cancel_revision": run.cancel_revision,
        "disposition": run.disposition,
        "terminal_reason": run.terminal_reason,
        "created_at": clock.iso(run.created_at),
    }


def _export_event(e: Event) -> dict[str, Any]:
    return {
        "event_id": str(e.event_id),
        "sequence": e.sequence,
        "attempt": e.attempt,
        "owner_epoch": e.owner_epoch,
        "type": e.type,
        "actor": e.actor,
        "prev_state": e.prev_state,
        "next_state": e.next_state,
        "reason_code": e.reason_code,
        "refs": e.refs,
        "payload": e.payload,
        "budget": e.budget,
        "cancel_revision": e.cancel_revision,
        "occurred_at": e.occurred_at,
        "schema_version": e.schema_version,
        "prev_hash": e.prev_hash,
        "content_hash": e.content_hash,
        "hash": e.hash,
    }
