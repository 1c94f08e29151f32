"""Fast, realistic benchmark data: valid long histories and bulk runs through COPY.

``long_history`` builds a hash-linked history that audit replay accepts (events built by
the domain's own ``build_event`` and folded with ``apply``, with payloads copied from a
real reservation run) and stores it with one COPY. ``bulk_runs`` loads many runs with the
shape of real ones (column values copied from a real run row) plus their events and
approval checkpoints, also with COPY; their events are realistic rows but are not
hash-chained (nothing replays them; the console only lists and shows them).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

CYCLE = ("observation.recorded", "proposal.emitted", "proposal.allowed", "observation.received")


@dataclass(frozen=True)
class Template:
    """Column values and event payloads copied from one real reservation run."""

    run: dict[str, Any]
    events: list[dict[str, Any]]
    checkpoint: dict[str, Any]
    attempt: dict[str, Any]


def real_template() -> Template:
    """Run one real reservation run (policy, validation, approval, effect) and copy it."""
    from approvals.models import Checkpoint
    from runs.models import EffectAttempt, Event, Run
    from sim.faultlab import Lab

    lab = Lab()
    run = lab.start("reservation")
    lab.approve_until_done(run)
    run.refresh_from_db()
    assert run.state == "COMPLETED", run.state
    row = Run.objects.filter(pk=run.pk).values().get()
    events = list(Event.objects.filter(run=run).order_by("sequence").values())
    checkpoint = Checkpoint.objects.filter(run=run).values().first()
    attempt = EffectAttempt.objects.filter(run=run).values().first()
    assert checkpoint is not None and attempt is not None
    return Template(run=row, events=events, checkpoint=checkpoint, attempt=attempt)


# -- a long, valid history -----------------------------------------------------------------
def long_history(run: Any, count: int, template: Template, *, control_every: int = 0) -> Any:
    """Give ``run`` (fresh, CREATED) a valid history of ``count`` events; return the run.

    The events cycle OBSERVING -> DECIDING -> VALIDATING -> EXECUTING -> OBSERVING with the
    real run's payloads; every reference points at evidence stored for this run. With
    ``control_every``, every that-many-th event is instead a control event the authority
    writes for outside inputs (state unchanged), alternately a refused transition
    (``transition.rejected``: a "rejected" event) and a deduplicated callback
    (``duplicate.deduplicated``: control, not rejected), so the timeline's kind filters
    have rare rows spread over the whole history.
    """
    from django.db import connection

    from kernel import clock
    from runs import event_rows
    from runs.authority import config_of, snapshot_of
    from runs.domain.events import apply, build_event
    from runs.domain.states import Actor, EventType, State
    from runs.models import CapabilityUse, Evidence, Run

    by_type = {e["type"]: e for e in template.events}
    evidence_ids = [f"ev-{uuid.uuid4().hex[:20]}" for _ in range(8)]
    now = clock.now()
    Evidence.objects.bulk_create(
        Evidence(
            id=i,
            run=run,
            kind="observation",
            content={"capability": "read_equipment", "ok": True, "data": {"n": n}},
            content_hash="0" * 64,
            size=64,
            created_at=now,
        )
        for n, i in enumerate(evidence_ids)
    )
    request_id = f"rq-{run.pk.hex[:20]}"
    snapshot = snapshot_of(run)
    assert snapshot.config == config_of(run)
    base = run.created_at
    deltas = {
        "proposal.emitted": {"turns": 1, "proposals": 1},
        "proposal.allowed": {"actions": 1},
    }
    actors = {
        "observation.recorded": Actor.HARNESS,
        "proposal.emitted": Actor.MODEL,
        "proposal.allowed": Actor.HARNESS,
        "observation.received": Actor.CAPABILITY_ADAPTER,
    }
    targets = {
        "observation.recorded": State.DECIDING,
        "proposal.emitted": State.VALIDATING,
        "proposal.allowed": State.EXECUTING,
        "observation.received": State.OBSERVING,
    }
    rows = []
    event_bytes = 0
    called: dict[str, int] = {}  # the capability uses the history records (audit checks them)
    step = 0  # position in the cycle (control events do not advance it)
    for i in range(count):
        if i == 0:
            etype, actor, target = "run.started", Actor.HARNESS, State.OBSERVING
            refs: dict[str, str] = {"observation": request_id}
            payload: dict[str, Any] = {}
            reason_code = (by_type.get(etype) or {}).get("reason_code", "contract_valid")
        elif control_every and i % control_every == 0:
            etype, actor, target, refs, payload, reason_code = _control_event(
                i // control_every, snapshot.state
            )
        else:
            etype = CYCLE[step % 4]
            step += 1
            actor, target = actors[etype], targets[etype]
            source = by_type[etype]
            refs = {k: evidence_ids[(i + n) % 8] for n, k in enumerate(sorted(source["refs"]))}
            payload = source["payload"]
            reason_code = (by_type.get(etype) or {}).get("reason_code", "contract_valid")
        event = build_event(
            snapshot,
            event_id=str(uuid.uuid4()),
            type=EventType(etype),
            actor=actor,
            next_state=target,
            occurred_at=clock.iso(base + dt.timedelta(milliseconds=5 * i + 5)),
            counters_delta=deltas.get(etype),
            elapsed_ms=5 * i + 5,
            reason_code=reason_code,
            refs=refs,
            payload=payload,
        )
        snapshot = apply(snapshot, event)
        capability = event_rows.capability_called(event)
        if capability is not None:
            called.setdefault(capability, event.sequence)
        rows.append(_event_row(event))
        if len(rows) >= 20_000:  # COPY in slices: a 1,000,000-event history fits in memory
            event_bytes += _copy_events(connection, rows)
            rows = []
    event_bytes += _copy_events(connection, rows)
    CapabilityUse.objects.bulk_create(
        CapabilityUse(
            run=run,
            capability_id=capability,
            tenant=run.tenant,
            run_created_at=run.created_at,
            first_sequence=sequence,
        )
        for capability, sequence in called.items()
    )
    Run.objects.filter(pk=run.pk).update(
        state=snapshot.state.value,
        revision=snapshot.revision,
        counters=dict(snapshot.counters),
        last_hash=snapshot.last_hash,
        current_proposal=snapshot.current_proposal,
        pending_observation=snapshot.pending_observation,
        event_bytes=event_bytes,
        updated_at=now,
    )
    run.refresh_from_db()
    return run


def _control_event(n: int, state: Any) -> tuple[Any, Any, Any, dict[str, str], dict[str, Any], str]:
    """The ``n``-th control event of a long history: what the authority records for a
    refused transition (odd ``n``) or a redelivered callback (even ``n``); state unchanged."""
    from runs.domain.states import Actor, EventType

    if n % 2:
        payload = {
            "attempted": EventType.APPROVAL_GRANTED.value,
            "attempted_reason": "approved",
            "refs": {},
            "detail": {},
        }
        return (
            EventType.TRANSITION_REJECTED,
            Actor.HARNESS,
            state,
            {},
            payload,
            "illegal_transition",
        )
    delivery = {"delivery_id": f"dl-{n:012d}", "first_outcome": "accepted"}
    return (
        EventType.DUPLICATE_DEDUPLICATED,
        Actor.HARNESS,
        state,
        {"correlation": f"co-{n:012d}"},
        delivery,
        "duplicate_callback",
    )


def run_records(run: Any, template: Template, *, checkpoints: int, attempts: int) -> None:
    """COPY ``checkpoints`` used approval checkpoints and ``attempts`` recorded effect
    attempts for ``run`` (the real run's rows with new ids and times, one a second): the
    run page must show a bounded list of each, not all of them."""
    from django.db import connection

    base, second, tag = run.created_at, dt.timedelta(seconds=1), run.pk.hex[:12]
    checkpoint = _Row(
        CHECKPOINT_COLUMNS,
        {**template.checkpoint, "status": "USED", "tenant": run.tenant},
        ("id", "run_id", "created_at", "expires_at", "closed_at"),
    )
    attempt_columns = tuple(template.attempt)
    attempt = _Row(
        attempt_columns,
        template.attempt,
        ("id", "run_id", "idempotency_key", "created_at", "resolved_at", "dispatch_sequence"),
    )
    with connection.cursor() as cursor:
        _copy_lines(
            cursor,
            "approvals_checkpoint",
            CHECKPOINT_COLUMNS,
            [
                checkpoint.fill(
                    f"cp-{tag}-{n:08d}",
                    str(run.pk),
                    (base + n * second).isoformat(),
                    (base + (n + 900) * second).isoformat(),
                    (base + (n + 30) * second).isoformat(),
                )
                for n in range(checkpoints)
            ],
        )
        _copy_lines(
            cursor,
            "runs_effectattempt",
            attempt_columns,
            [
                attempt.fill(
                    f"at-{tag}-{n:08d}",
                    str(run.pk),
                    f"key-{tag}-{n:08d}",
                    (base + n * second).isoformat(),
                    (base + (n + 1) * second).isoformat(),
                    str(n + 1),
                )
                for n in range(attempts)
            ],
        )


def _copy_lines(cursor: Any, table: str, columns: Sequence[str], lines: list[str]) -> None:
    """COPY rows already in COPY text format (Django cursor)."""
    if lines:
        with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            copy.write("\n".join(lines) + "\n")


def _copy_events(connection: Any, rows: list[list[Any]]) -> int:
    """COPY ``rows`` into runs_event; return their bytes as the authority counts them."""
    if not rows:
        return 0
    with connection.cursor() as cursor:
        copy_rows(cursor, "runs_event", event_columns(), rows)
    return sum(len(r[16]) + len(r[15]) + 600 for r in rows)


def event_columns() -> tuple[str, ...]:
    from runs import event_rows

    return event_rows.COLUMNS


def _event_row(event: Any) -> list[Any]:
    from runs import event_rows

    return event_rows.values(event, json_text=True)


# -- COPY ----------------------------------------------------------------------------------
def _text(value: Any) -> str:
    """One value in COPY text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    elif isinstance(value, dt.datetime):
        value = value.isoformat()
    text = str(value)
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
            text = text.replace(raw, escaped)
    return text


def copy_rows(
    cursor: Any, table: str, columns: Sequence[str], rows: Iterator[Sequence[Any]] | list[Any]
) -> int:
    """COPY ``rows`` into ``table`` (Django cursor); return how many were written."""
    raw = getattr(cursor, "cursor", cursor)
    written = 0
    buffer: list[str] = []
    with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            buffer.append("\t".join(_text(v) for v in row))
            written += 1
            if len(buffer) >= 5000:
                copy.write("\n".join(buffer) + "\n")
                buffer.clear()
        if buffer:
            copy.write("\n".join(buffer) + "\n")
    return written


# -- bulk runs for the console ----------------------------------------------------------------
# What the tenant's history looks like: mostly ended runs; the live ones are few.
DISPOSITIONS = (
    ("COMPLETED", "COMPLETED", "all_predicates_pass", 70),
    ("FAILED", "FAILED", "action_budget_exhausted", 15),
    ("CANCELLED", "CANCELLED", "cancelled_no_dispatch", 6),
    ("ESCALATED", "ESCALATED", "repeated_denial", 6),
    ("DECIDING", "", "", 1),
    ("OBSERVING", "", "", 1),
    ("WAITING_EXTERNAL", "", "", 1),
)
_WEIGHTED = [d for d in DISPOSITIONS for _ in range(d[3])]
RUN_COLUMNS = (
    "id",
    "task_id",
    "scenario",
    "objective",
    "contract_version",
    "policy_version",
    "model_adapter_version",
    "component_set",
    "components",
    "tenant",
    "principal_ref",
    "scope",
    "limits",
    "deadline",
    "created_at",
    "fault_plan",
    "namespace",
    "follows_run_id",
    "requested_by_id",
    "state",
    "revision",
    "attempt",
    "owner_epoch",
    "counters",
    "budget_limits",
    "cancel_revision",
    "last_hash",
    "disposition",
    "terminal_reason",
    "waiting_checkpoint",
    "waiting_correlation",
    "current_proposal",
    "pending_observation",
    "event_bytes",
    "updated_at",
    "lease_owner",
    "lease_expires_at",
)
CHECKPOINT_COLUMNS = (
    "id",
    "run_id",
    "tenant",
    "kind",
    "status",
    "requested_by_ref",
    "required_role",
    "opened_sequence",
    "proposal_hash",
    "canonical",
    "effect_summary",
    "evidence_view",
    "idempotency_note",
    "lost_response_note",
    "compensation_note",
    "data_crossing",
    "question",
    "prior_requested_change",
    "eligible_group",
    "eligible_users",
    "policy_name",
    "quorum",
    "expires_at",
    "created_at",
    "closed_at",
)


@dataclass
class BulkPlan:
    """Rows to add: ``count`` runs, ``waiting`` of them waiting for approval.

    ``events_per_run`` may be 0 when nothing measured reads the bulk runs' events;
    ``checkpoint_bodies=False`` stores the used checkpoints of completed runs with their
    ids, times, status and policy columns but empty bodies (proposal, evidence view,
    notes: what only that checkpoint's own page shows), so a 10M-run database fits on a
    shared disk; the
    pending checkpoints the approval queue shows always carry their bodies. ``scenarios``
    (name, weight) spreads the runs over scenarios (the template's own by default)."""

    count: int
    waiting: int
    events_per_run: int
    newest: dt.datetime
    spacing: dt.timedelta
    tenants: tuple[tuple[str, int], ...] = (("north", 9), ("south", 1))
    checkpoint_bodies: bool = True
    scenarios: tuple[tuple[str, int], ...] = ()


class _Row:
    """A COPY text row with constant columns rendered once; ``render`` fills the rest."""

    def __init__(self, columns: Sequence[str], values: dict[str, Any], variable: Sequence[str]):
        self.columns = tuple(columns)
        self.cells = [_text(values.get(c)) for c in self.columns]
        self.slots = [self.columns.index(c) for c in variable]

    def render(self, *values: Any) -> str:
        cells = self.cells.copy()
        for slot, value in zip(self.slots, values, strict=True):
            cells[slot] = _text(value)
        return "\t".join(cells)

    def fill(self, *texts: str | None) -> str:
        """Like ``render`` for values already in text form that need no escaping (ids,
        numbers, timestamps, state names); None is NULL."""
        cells = self.cells.copy()
        for slot, text in zip(self.slots, texts, strict=True):
            cells[slot] = "\\N" if text is None else text
        return "\t".join(cells)


_RUN_VARIABLE = (
    "id",
    "scenario",
    "task_id",
    "tenant",
    "principal_ref",
    "created_at",
    "deadline",
    "updated_at",
    "state",
    "disposition",
    "terminal_reason",
    "revision",
    "last_hash",
    "waiting_checkpoint",
)
_EVENT_VARIABLE = ("event_id", "run_id", "sequence", "next_state", "occurred_at")
# What only a checkpoint's own page shows: left empty in bulk used checkpoints when
# ``BulkPlan.checkpoint_bodies`` is off (JSON columns first, then text).
_CHECKPOINT_BODIES = (
    "canonical",
    "evidence_view",
    "data_crossing",
    "effect_summary",
    "idempotency_note",
    "lost_response_note",
    "compensation_note",
)
_CHECKPOINT_VARIABLE = ("id", "run_id", "tenant", "status", "created_at", "expires_at", "closed_at")
# The capability-use projection's rows (runs.models.CapabilityUse): completed bulk runs
# called the effect capability (the use the runs list's capability filter reads).
USE_COLUMNS = ("run_id", "capability_id", "tenant", "run_created_at", "first_sequence")
COMPLETED_CALLS = "reserve_part"


def bulk_runs(plan: BulkPlan, template: Template, *, seed: int = 7) -> dict[str, int]:
    """COPY ``plan.count`` runs (older than ``plan.newest``), their events and checkpoints.

    Every run gets ``events_per_run`` events of its real shape (the real run's first ones
    and its last); completed runs get their used approval checkpoint; ``plan.waiting`` runs
    of the first tenant wait for approval with a pending checkpoint. Constant columns are
    rendered once, so the database, not Python, sets the pace.
    """
    from django.db import connection

    rng = random.Random(seed)
    tenants = [t for t, weight in plan.tenants for _ in range(weight)]
    run_row = _Row(
        RUN_COLUMNS,
        # Live-world runs (the template is a fault-lab run): what the console's runs list
        # and approval queue show by default.
        {
            **template.run,
            "namespace": "live",
            "follows_run_id": None,
            "requested_by_id": None,
            "lease_owner": "",
        },
        _RUN_VARIABLE,
    )
    shown = (
        [*template.events[: plan.events_per_run - 1], template.events[-1]]
        if plan.events_per_run
        else []
    )
    event_rows = [
        _Row(
            event_columns(),
            {**e, "owner_epoch": 1, "prev_hash": "0" * 64, "content_hash": "1" * 64},
            _EVENT_VARIABLE,
        )
        for e in shown
    ]
    checkpoint_row = _Row(CHECKPOINT_COLUMNS, template.checkpoint, _CHECKPOINT_VARIABLE)
    used_row = (
        checkpoint_row
        if plan.checkpoint_bodies
        else _Row(
            CHECKPOINT_COLUMNS,
            {
                **template.checkpoint,
                **{c: {} if c == "canonical" else [] for c in _CHECKPOINT_BODIES[:3]},
                **{c: "" for c in _CHECKPOINT_BODIES[3:]},
            },
            _CHECKPOINT_VARIABLE,
        )
    )
    scenarios = [name for name, weight in plan.scenarios for _ in range(weight)] or [
        template.run["scenario"]
    ]
    pending_expiry = dt.datetime.now(tz=dt.UTC) + dt.timedelta(hours=6)
    writer = _CopyWriter(connection)
    runs: list[str] = []
    events: list[str] = []
    checkpoints: list[str] = []
    uses: list[str] = []
    waiting_left = plan.waiting
    stamp = plan.newest
    second = dt.timedelta(seconds=1)
    try:
        for n in range(plan.count):
            stamp = stamp - plan.spacing
            run_uuid = uuid.UUID(int=rng.getrandbits(128), version=4)
            run_id, hex_id = str(run_uuid), run_uuid.hex
            created = stamp.isoformat()
            tenant = tenants[n % len(tenants)]
            if waiting_left and tenant == plan.tenants[0][0]:
                state, disposition, reason = "WAITING_HUMAN", "", ""
                waiting_left -= 1
            else:
                state, disposition, reason, _ = _WEIGHTED[rng.randrange(len(_WEIGHTED))]
            checkpoint_id = ""
            if state in ("WAITING_HUMAN", "COMPLETED"):
                checkpoint_id = f"cp-{hex_id[:20]}"
                pending = state == "WAITING_HUMAN"
                checkpoints.append(
                    (checkpoint_row if pending else used_row).fill(
                        checkpoint_id,
                        run_id,
                        tenant,
                        "PENDING" if pending else "USED",
                        created,
                        (pending_expiry + n * second).isoformat()
                        if pending
                        else (stamp + 900 * second).isoformat(),
                        None if pending else (stamp + 30 * second).isoformat(),
                    )
                )
            runs.append(
                run_row.fill(
                    run_id,
                    scenarios[rng.randrange(len(scenarios))]
                    if len(scenarios) > 1 and state != "WAITING_HUMAN"
                    else template.run["scenario"],
                    f"task-{hex_id[:12]}",
                    tenant,
                    f"user:operator-{n % 17}",
                    created,
                    (stamp + 7200 * second).isoformat(),
                    (stamp + 40 * second).isoformat(),
                    state,
                    disposition,
                    reason,
                    str(len(event_rows) or template.run["revision"]),
                    f"{n:064x}",
                    checkpoint_id if state == "WAITING_HUMAN" else "",
                )
            )
            if state == "COMPLETED":
                uses.append(f"{run_id}\t{COMPLETED_CALLS}\t{tenant}\t{created}\t22")
            last = len(event_rows) - 1
            for i, row in enumerate(event_rows):
                events.append(
                    row.fill(
                        str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                        run_id,
                        str(i + 1),
                        state if i == last else shown[i]["next_state"],
                        (stamp + (i + 1) * second).isoformat(),
                    )
                )
            if len(runs) >= 10000:
                writer.put(runs, events, checkpoints, uses)
                runs, events, checkpoints, uses = [], [], [], []
        writer.put(runs, events, checkpoints, uses)
    finally:
        counts = writer.close()
    return counts


class _CopyWriter:
    """COPYs batches on this thread's database connection from a second thread, so Python
    renders the next batch while PostgreSQL ingests the last one (psycopg waits without
    the GIL)."""

    def __init__(self, connection: Any) -> None:
        import queue
        import threading

        connection.ensure_connection()
        self.raw = connection.connection
        self.queue: queue.Queue[tuple[list[str], ...] | None] = queue.Queue(2)
        self.counts = {"runs": 0, "events": 0, "checkpoints": 0, "uses": 0}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def put(
        self, runs: list[str], events: list[str], checkpoints: list[str], uses: list[str]
    ) -> None:
        if self.error is not None:
            raise RuntimeError("COPY failed") from self.error
        self.queue.put((runs, events, checkpoints, uses))

    def close(self) -> dict[str, int]:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise RuntimeError("COPY failed") from self.error
        return self.counts

    def _run(self) -> None:
        while (batch := self.queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                with self.raw.cursor() as cursor:
                    for table, columns, lines, key in (
                        ("runs_run", RUN_COLUMNS, batch[0], "runs"),
                        ("runs_event", event_columns(), batch[1], "events"),
                        ("approvals_checkpoint", CHECKPOINT_COLUMNS, batch[2], "checkpoints"),
                        ("runs_capabilityuse", USE_COLUMNS, batch[3], "uses"),
                    ):
                        if lines:
                            sql = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
                            with cursor.copy(sql) as copy:
                                copy.write("\n".join(lines) + "\n")
                        self.counts[key] += len(lines)
            except BaseException as exc:  # reported by put/close on the main thread
                self.error = exc


# -- runs ready to start, many at once ----------------------------------------------------------
def created_runs(
    scenario: str,
    count: int,
    *,
    principal_ref: str = "user:bench-operator",
    contract_version: str | None = None,
) -> list[str]:
    """``count`` runs in CREATED exactly as ``services.run_create`` makes them (its row and
    request evidence copied with new ids, times and genesis hash), by COPY; return ids.

    ``contract_version`` pins another task contract (e.g. a retired one: such a run fails
    at start with ``contract_version_unknown``). Nothing is enqueued: the caller sends
    ``runs.tasks.run_advance`` for each (as the outbox would).
    """
    from django.db import connection

    from kernel import clock
    from runs import services
    from runs.authority import config_of
    from runs.models import Evidence, Run

    model = services.run_create(
        scenario=scenario, tenant="north", principal_ref=principal_ref, start=False
    )
    if contract_version is not None:
        Run.objects.filter(pk=model.pk).update(contract_version=contract_version)
        model.contract_version = contract_version
    row = Run.objects.filter(pk=model.pk).values().get()
    request = Evidence.objects.filter(run=model, kind="request").values().get()
    evidence_columns = (*(c for c in request if c != "run_id"), "run_id")
    run_cells = _Row(
        RUN_COLUMNS, row, ("id", "task_id", "created_at", "deadline", "updated_at", "last_hash")
    )
    evidence_cells = _Row(evidence_columns, request, ("id", "run_id", "created_at"))
    now = clock.now()
    ids, runs, evidence = [], [], []
    for _ in range(count):
        run_id = uuid.uuid4()
        model.pk, model.task_id, model.created_at = run_id, f"task-{run_id.hex[:12]}", now
        model.deadline = now + (row["deadline"] - row["created_at"])
        genesis = config_of(model).genesis_hash()
        runs.append(run_cells.render(run_id, model.task_id, now, model.deadline, now, genesis))
        evidence.append(evidence_cells.render(f"rq-{run_id.hex[:20]}", run_id, now))
        ids.append(str(run_id))
    with connection.cursor() as cursor:
        for table, columns, lines in (
            ("runs_run", RUN_COLUMNS, runs),
            ("runs_evidence", evidence_columns, evidence),
        ):
            with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as c:
                c.write("\n".join(lines) + "\n")
    return ids


# -- bulk-load mode ------------------------------------------------------------------------------
@contextmanager
def bulk_load_mode(tables: Sequence[str], *, rebuild_indexes: bool) -> Iterator[None]:
    """What a restore does: no per-row trigger work while COPYing (foreign keys are
    guaranteed by the generator, which writes each run before its rows), and, for a big
    load, the secondary indexes and unique constraints dropped first and built once after
    (a sorted build instead of a random insert per row). Primary keys stay. Every index
    and constraint is recreated from its own definition, as it was."""
    from django.db import connection

    with connection.cursor() as cursor:
        saved: list[tuple[str, str, str]] = []
        if rebuild_indexes:
            cursor.execute(
                "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c WHERE c.contype = 'u' "
                "AND c.conrelid::regclass::text = ANY(%s)",
                [list(tables)],
            )
            constraints = cursor.fetchall()
            cursor.execute(
                "SELECT i.tablename, i.indexname, i.indexdef FROM pg_indexes i "
                "WHERE i.tablename = ANY(%s) AND i.indexname NOT IN "
                "(SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u'))",
                [list(tables)],
            )
            indexes = cursor.fetchall()
            for table, name, _ in constraints:
                cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
            for _, name, _ in indexes:
                cursor.execute(f'DROP INDEX "{name}"')
            saved = [
                ("constraint", t, f'ALTER TABLE {t} ADD CONSTRAINT "{n}" {d}')
                for t, n, d in constraints
            ] + [("index", t, d) for t, _, d in indexes]
        cursor.execute("SET session_replication_role = replica")
        try:
            yield
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")
            cursor.execute("SET maintenance_work_mem = '256MB'")
            for _, _, statement in saved:
                cursor.execute(statement)
            cursor.execute("RESET maintenance_work_mem")
