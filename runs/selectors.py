"""Reads for the console: run lists, timelines, recovery and runbook data.

Every selector is scoped to a tenant and runs a fixed number of queries whatever the size
of the data (lists are keyset-paginated on ``(created_at, id)``, never counted).
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from approvals.models import Checkpoint, Decision, DecisionRefusal
from capabilities import ports
from capabilities.ports import LedgerRecord
from capabilities.registry import ALL_CONTRACTS
from catalog.models import CapabilityVersion
from kernel import clock
from runs.domain import effects
from runs.domain.budgets import Budget, exhausted_reason
from runs.domain.states import CONTROL_EVENTS, REJECTION_EVENTS, EventType, State
from runs.models import EffectAttempt, Event, Evidence, FaultLabResult, Run, TerminalRecord
from runs.policies import MODEL_SCENARIO, scenario_names
from runs.policies import registry as policy_registry

PAGE_SIZE = 50
TIMELINE_LIMIT = 1000
AGES: Mapping[str, tuple[str, dt.timedelta, bool]] = {
    # key: (label, span, newer-than (True) or older-than (False))
    "1h": ("last hour", dt.timedelta(hours=1), True),
    "24h": ("last 24 hours", dt.timedelta(days=1), True),
    "7d": ("last 7 days", dt.timedelta(days=7), True),
    "older-7d": ("older than 7 days", dt.timedelta(days=7), False),
}
DISPOSITIONS = ("COMPLETED", "FAILED", "CANCELLED", "ESCALATED")
# The synthetic world a run acts in: the console's live world, the fault lab's, or an
# isolated execution simulation (namespace "sim-..."). Lists and the approval queue show
# the live world unless asked for another (or for every world).
WORLDS: Mapping[str, str] = {
    "live": "live world",
    "faultlab": "fault lab",
    "simulation": "execution simulations",
    "all": "every world",
}
DEFAULT_WORLD = "live"


def world_from_query(value: str | None) -> str:
    """The world a list shows for the query value ``value`` (unknown or empty: live)."""
    return value if value in WORLDS else DEFAULT_WORLD


def in_world(qs: QuerySet[Any], world: str, *, field: str = "namespace") -> QuerySet[Any]:
    """Narrow ``qs`` to rows whose ``field`` (a run namespace) belongs to ``world``."""
    if world == "all":
        return qs
    if world == "simulation":
        return qs.filter(**{f"{field}__startswith": "sim-"})
    return qs.filter(**{field: world})


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
@dataclass(frozen=True)
class RunFilters:
    state: str = ""
    disposition: str = ""
    scenario: str = ""
    age: str = ""
    world: str = DEFAULT_WORLD
    q: str = ""

    @classmethod
    def from_query(cls, data: Mapping[str, str]) -> RunFilters:
        """Keep only values the list understands; anything else is ignored, not an error."""
        state = data.get("state", "")
        disposition = data.get("disposition", "")
        scenario = data.get("scenario", "")
        age = data.get("age", "")
        world = data.get("world", "")
        return cls(
            state=state if state in State.__members__ else "",
            disposition=disposition if disposition in DISPOSITIONS else "",
            scenario=scenario if scenario in scenario_names() else "",
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


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    next_cursor: str
    filters: RunFilters
    search_error: str = ""


ID_SEARCH_ERROR = "A run id is hexadecimal (a full id or a prefix)."


def id_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """Return the UUID range a full id or hex prefix covers, or None if it is not hex."""
    digits = text.replace("-", "").lower()
    if not digits or len(digits) > 32 or any(c not in "0123456789abcdef" for c in digits):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def encode_cursor(run: Run) -> str:
    raw = f"{clock.iso(run.created_at)}|{run.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, _, run_id = raw.partition("|")
        return clock.parse(stamp), uuid.UUID(run_id)
    except (ValueError, UnicodeDecodeError):
        return None


def run_list_for_tenant(
    *, tenant: str, filters: RunFilters, cursor: str = "", page_size: int = PAGE_SIZE
) -> RunPage:
    """Return one page of the tenant's runs, newest first, after ``cursor``.

    One query: filters map onto the (tenant, <field>, -created_at, -id) indexes and the
    page is a keyset seek, so the cost does not grow with the number of runs.
    """
    qs = Run.objects.filter(tenant=tenant)
    if filters.state:
        qs = qs.filter(state=filters.state)
    if filters.disposition:
        qs = qs.filter(disposition=filters.disposition)
    if filters.scenario:
        qs = qs.filter(scenario=filters.scenario)
    qs = in_world(qs, filters.world)
    if filters.age:
        _, span, newer = AGES[filters.age]
        since = clock.now() - span
        qs = qs.filter(created_at__gte=since) if newer else qs.filter(created_at__lt=since)
    if filters.q:
        bounds = id_range(filters.q)
        if bounds is None:
            return RunPage([], "", filters, ID_SEARCH_ERROR)
        qs = qs.filter(pk__gte=bounds[0], pk__lte=bounds[1])
    position = decode_cursor(cursor) if cursor else None
    if position is not None:
        created, run_id = position
        # The redundant ``created_at <= created`` bound is what the index range starts
        # from; without it PostgreSQL walks (and filters) every row before the cursor.
        qs = qs.filter(created_at__lte=created).filter(
            Q(created_at__lt=created) | Q(created_at=created, pk__lt=run_id)
        )
    rows = list(
        qs.order_by("-created_at", "-id").only(
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
    next_cursor = encode_cursor(rows[page_size - 1]) if len(rows) > page_size else ""
    return RunPage(rows[:page_size], next_cursor, filters)


def run_filter_choices() -> dict[str, Any]:
    return {
        "states": [s.value for s in State],
        "dispositions": DISPOSITIONS,
        "scenarios": [
            (name, s.description) for name, s in sorted(policy_registry.scenarios().items())
        ]
        + [(MODEL_SCENARIO, "the configured OpenAI-compatible model endpoint")],
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
    control = [e.value for e in CONTROL_EVENTS]
    if kind == "transitions":
        return ~Q(type__in=control)
    if kind == "control":
        return Q(type__in=control)
    if kind == "rejected":
        return Q(type__in=[e.value for e in REJECTION_EVENTS])
    return Q()


def run_timeline(
    *, run: Run, kind: str = "all", limit: int = TIMELINE_LIMIT
) -> list[TimelineEntry]:
    """The run's events in order (the latest ``limit`` of them), filtered by kind."""
    rows = list(
        Event.objects.filter(run=run)
        .filter(_kind_filter(kind if kind in TIMELINE_KINDS else "all"))
        .order_by("-sequence")[:limit]
    )
    rows.reverse()
    control = {e.value for e in CONTROL_EVENTS}
    rejected = {e.value for e in REJECTION_EVENTS}
    return [
        TimelineEntry(
            event=e,
            refs=ref_links(e.refs),
            is_control=e.type in control,
            is_rejected=e.type in rejected,
            changes_state=e.prev_state != e.next_state,
        )
        for e in rows
    ]


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


@dataclass
class RunDetail:
    run: Run
    terminal: TerminalRecord | None
    checkpoints: list[Checkpoint]
    attempts: list[EffectAttempt]
    follow_ups: list[Run]
    waiting: Checkpoint | None = None
    gauges: list[Gauge] = field(default_factory=list)
    # For an ended run: its effects (counted at the end + reconciled since) and what may
    # follow it now.
    effect_account: effects.EffectAccount | None = None
    follow_up: tuple[str, ...] = ()


def run_detail(run: Run) -> RunDetail:
    """Everything the run page shows besides the timeline, in a fixed number of queries."""
    terminal = TerminalRecord.objects.filter(run=run).first() if run.is_terminal else None
    checkpoints = list(Checkpoint.objects.filter(run=run).order_by("created_at"))
    attempts = list(EffectAttempt.objects.filter(run=run).order_by("created_at"))
    follow_ups = list(Run.objects.filter(follows_run=run).only("id", "state", "created_at"))
    waiting = next((c for c in checkpoints if c.pk == run.waiting_checkpoint), None)
    account = effect_account(run) if terminal is not None else None
    return RunDetail(
        run=run,
        terminal=terminal,
        checkpoints=checkpoints,
        attempts=attempts,
        follow_ups=follow_ups,
        waiting=waiting,
        gauges=run_gauges(run),
        effect_account=account,
        follow_up=effects.follow_up(completed=run.state == State.COMPLETED.value, account=account)
        if account is not None
        else (),
    )


def effect_account(run: Run) -> effects.EffectAccount:
    """The effects of an ended run: counted by its terminal record, reconciled since, and
    still unknown (SPEC §7: terminal records are never edited; corrections are appended)."""
    record = TerminalRecord.objects.filter(run=run).first()
    counted = int((record.final_counters if record else run.counters).get(Budget.EFFECTS, 0))
    after = record.deciding_sequence if record else run.revision
    reconciled = sum(
        1
        for payload in Event.objects.filter(
            run=run, type=EventType.EFFECT_RECONCILED.value, sequence__gt=after
        ).values_list("payload", flat=True)
        if effects.records_effect(EventType.EFFECT_RECONCILED, payload.get("outcome", ""))
    )
    unresolved = EffectAttempt.objects.filter(run=run, status__in=effects.UNRESOLVED).count()
    return effects.EffectAccount(counted, reconciled, unresolved)


def run_evidence(*, run: Run, evidence_id: str) -> Evidence | None:
    return Evidence.objects.filter(run=run, pk=evidence_id).first()


def run_export(run: Run) -> dict[str, Any]:
    """The run's identity, events and the evidence references they carry (not payloads)."""
    events = list(Event.objects.filter(run=run).order_by("sequence"))
    evidence = list(
        Evidence.objects.filter(run=run)
        .order_by("created_at", "id")
        .values("id", "kind", "content_hash", "redaction_class", "size", "created_at")
    )
    return {
        "format": "fieldops-run-export@1",
        "exported_at": clock.iso(clock.now()),
        "run": {
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
        },
        "events": [
            {
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
            for e in events
        ],
        "evidence_refs": [{**row, "created_at": clock.iso(row["created_at"])} for row in evidence],
    }


# -- approvals -------------------------------------------------------------------------
QUEUE_LIMIT = 200


def checkpoint_queue(
    *,
    tenant: str,
    kind: str = "",
    run_ids: tuple[uuid.UUID, uuid.UUID] | None = None,
    world: str = DEFAULT_WORLD,
    limit: int = QUEUE_LIMIT,
) -> list[Checkpoint]:
    """Pending checkpoints of the tenant, soonest expiry first; ``kind``, a run id range
    (see ``id_range``) and the runs' world (``WORLDS``, live by default) narrow it. The
    (tenant, status, expires_at) index serves every form."""
    qs = Checkpoint.objects.filter(tenant=tenant, status=Checkpoint.Status.PENDING)
    qs = in_world(qs, world, field="run__namespace")
    if kind:
        qs = qs.filter(kind=kind)
    if run_ids is not None:
        qs = qs.filter(run_id__gte=run_ids[0], run_id__lte=run_ids[1])
    return list(qs.select_related("run").order_by("expires_at", "id")[:limit])


def decision_history(*, tenant: str, limit: int = 100) -> tuple[list[Decision], list[Any]]:
    decisions = list(
        Decision.objects.filter(checkpoint__tenant=tenant)
        .select_related("checkpoint", "checkpoint__run")
        .order_by("-created_at", "-id")[:limit]
    )
    refusals = list(
        DecisionRefusal.objects.filter(checkpoint__tenant=tenant)
        .select_related("checkpoint", "user")
        .order_by("-created_at", "-id")[:limit]
    )
    return decisions, refusals


@dataclass(frozen=True)
class EvidenceAge:
    ref: str
    capability: str
    observed_at: dt.datetime | None
    age_s: int | None
    limit_s: int | None

    @property
    def fresh(self) -> bool | None:
        if self.limit_s is None or self.age_s is None:
            return None
        return self.age_s <= self.limit_s


def evidence_ages(checkpoint: Checkpoint) -> list[EvidenceAge]:
    now = clock.now()
    out = []
    for item in checkpoint.evidence_view:
        observed = clock.parse(item["observed_at"]) if item.get("observed_at") else None
        out.append(
            EvidenceAge(
                ref=item.get("ref", ""),
                capability=item.get("capability", "?"),
                observed_at=observed,
                age_s=int((now - observed).total_seconds()) if observed else None,
                limit_s=item.get("freshness_limit_s"),
            )
        )
    return out


# -- recovery --------------------------------------------------------------------------
def recovery_attempts(*, tenant: str, limit: int = 200) -> list[EffectAttempt]:
    """Attempts with an unknown or conflicting outcome, and every attempt of an escalated run."""
    return list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .filter(Q(status__in=effects.UNRESOLVED) | Q(run__state=State.ESCALATED.value))
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass(frozen=True)
class LedgerLookup:
    query: str
    keys: tuple[str, ...]
    entries: list[LedgerRecord]
    attempts: list[EffectAttempt]


def ledger_lookup(*, tenant: str, query: str) -> LedgerLookup:
    """Find the ledger record and attempts for an idempotency key, attempt id or effect id.

    The ledger is searched in the namespaces of the tenant's runs that used the key.
    """
    query = query.strip()[:64]
    attempts = list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .filter(Q(idempotency_key=query) | Q(pk=query) | Q(effect_id=query))
        .select_related("run")
        .order_by("created_at")[:50]
    )
    keys = tuple(sorted({a.idempotency_key for a in attempts} | {query}))
    more = [
        a
        for a in EffectAttempt.objects.filter(run__tenant=tenant, idempotency_key__in=keys)
        .select_related("run")
        .order_by("created_at")[:50]
    ]
    seen = {a.pk for a in attempts}
    attempts += [a for a in more if a.pk not in seen]
    entries = ports.world().ledger(tenant=tenant, keys=keys, effect_id=query, limit=50)
    return LedgerLookup(query, keys, entries, attempts)


# -- runbooks: live data ----------------------------------------------------------------
INTENT_CLASSES: Mapping[str, str] = {s.value: c for s, c in effects.INTENT_CLASS.items()}
INTENT_CLASS_ORDER = effects.INTENT_CLASS_ORDER


@dataclass(frozen=True)
class IntentRow:
    key: str
    run: Run
    attempts: tuple[EffectAttempt, ...]
    classification: str
    ledger: LedgerRecord | None


def classify_intents(
    attempts: Iterable[EffectAttempt], ledger: Iterable[LedgerRecord]
) -> list[IntentRow]:
    """Group attempts by semantic intent (idempotency key) and classify each intent.

    The worst status wins: conflicting > ambiguous > confirmed > rejected > not dispatched,
    so several spans of one intent count once (effect identity, not call count).
    """
    by_key: dict[str, list[EffectAttempt]] = {}
    for a in attempts:
        by_key.setdefault(a.idempotency_key, []).append(a)
    entries = {e.idempotency_key: e for e in ledger}
    rows = []
    for key, group in by_key.items():
        classes = [INTENT_CLASSES.get(a.status, "ambiguous") for a in group]
        worst = max(classes, key=INTENT_CLASS_ORDER.index)
        rows.append(IntentRow(key, group[0].run, tuple(group), worst, entries.get(key)))
    rows.sort(key=lambda r: (-INTENT_CLASS_ORDER.index(r.classification), r.key))
    return rows


def in_flight_intents(*, tenant: str, limit: int = 200) -> dict[str, Any]:
    """Recent intents of the tenant, classified; plus the counts per class."""
    attempts = list(
        EffectAttempt.objects.filter(run__tenant=tenant)
        .select_related("run")
        .order_by("-created_at", "-id")[:limit]
    )
    keys = {a.idempotency_key for a in attempts}
    ledger = ports.world().ledger(tenant=tenant, keys=keys)
    rows = classify_intents(attempts, ledger)
    counts = {c: 0 for c in INTENT_CLASS_ORDER}
    for row in rows:
        counts[row.classification] += 1
    return {"rows": rows, "counts": counts}


def effect_capability_versions() -> list[CapabilityVersion]:
    """Stored versions of capabilities that need approval (the effect gates)."""
    effect_ids = [c.id for c in ALL_CONTRACTS.values() if c.requires_approval]
    return list(CapabilityVersion.objects.filter(capability_id__in=effect_ids))


def events_with_reason(
    *, tenant: str, reasons: Iterable[str], types: Iterable[str] = (), limit: int = 50
) -> list[Event]:
    """Recent events of the tenant with one of ``reasons`` (and one of ``types`` if given)."""
    qs = Event.objects.filter(run__tenant=tenant, reason_code__in=list(reasons))
    types = list(types)
    if types:
        qs = qs.filter(type__in=types)
    return list(qs.select_related("run").order_by("-id")[:limit])


def stale_pending_checkpoints(*, tenant: str) -> list[tuple[Checkpoint, list[EvidenceAge]]]:
    """Pending approvals whose evidence has passed its freshness limit while waiting."""
    out = []
    for checkpoint in checkpoint_queue(tenant=tenant):
        ages = evidence_ages(checkpoint)
        if any(a.fresh is False for a in ages):
            out.append((checkpoint, ages))
    return out


def owning_runs(*, tenant: str, limit: int = 100) -> list[Run]:
    """Non-terminal runs that hold an effect attempt (candidates to cancel in an incident)."""
    ids = (
        EffectAttempt.objects.filter(run__tenant=tenant)
        .exclude(run__state__in=[s.value for s in State if s.value in DISPOSITIONS])
        .values("run_id")
    )
    return list(Run.objects.filter(pk__in=ids).order_by("-created_at", "-id")[:limit])


def faultlab_results() -> dict[str, FaultLabResult]:
    return {r.fixture: r for r in FaultLabResult.objects.all()}


def event_type_values(*types: EventType) -> list[str]:
    return [t.value for t in types]


def _open_tool_drift() -> list[Any]:
    from catalog.selectors import open_drifts

    return open_drifts()


def runbook_blocks(
    *, tenant: str, keys: Iterable[str], fixtures: Iterable[str] = ()
) -> dict[str, Any]:
    """The live data each named runbook block needs (one or two queries per block)."""
    from runs.runbooks import fixture_info

    fixtures = list(fixtures)
    results = {r.fixture: r for r in FaultLabResult.objects.filter(fixture__in=fixtures)}
    producers: dict[str, Any] = {
        "effect_gates": effect_capability_versions,
        "intents": lambda: in_flight_intents(tenant=tenant),
        "owning_runs": lambda: owning_runs(tenant=tenant),
        "unresolved_attempts": lambda: [
            a for a in recovery_attempts(tenant=tenant) if a.status in effects.UNRESOLVED
        ],
        "malformed": lambda: events_with_reason(tenant=tenant, reasons=["MALFORMED_RESULT"]),
        "stale_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["evidence_stale", "STALE", "CONFLICT"],
            types=event_type_values(EventType.PROPOSAL_DENIED, EventType.EFFECT_REJECTED),
        ),
        "stale_checkpoints": lambda: stale_pending_checkpoints(tenant=tenant),
        "repeated_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["repeated_denial", "retry_budget_exhausted"],
            types=event_type_values(EventType.ESCALATION_ADMITTED),
        ),
        "scope_denials": lambda: events_with_reason(
            tenant=tenant,
            reasons=["scope_denied"],
            types=event_type_values(EventType.PROPOSAL_DENIED),
        ),
        "ledger_outage": lambda: events_with_reason(
            tenant=tenant,
            reasons=["ledger_unavailable"],
            types=event_type_values(EventType.RECONCILIATION_UNRESOLVED),
        ),
        "fixtures": lambda: [(fixture_info(name), results.get(name)) for name in fixtures],
        "tool_drift": _open_tool_drift,
    }
    return {key: producers[key]() for key in keys}
