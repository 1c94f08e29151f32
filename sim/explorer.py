"""The effect schedule explorer: every crash, pause, cancellation and takeover order on
the reservation path, run in-process on the seeded clock, each followed by the
exactly-once audit (``runs/effect_audit.py``).

A schedule starts from a reservation run that an approver has just approved. Worker A
advances it in a thread of its own (its own database connection) and meets the named
points of ``fieldops.points`` on the way: the engine's step boundaries, the authority's
open transactions, the world double's commit. The explorer first traces the points A
reaches in each fault variant, then, for every point A reaches, runs:

- ``crash``: A dies there (its lease stays, its open transaction rolls back); worker B
  takes over once the lease expired.
- ``takeover``: A pauses there; B takes over and runs until it stops; A resumes.
- ``takeover-pause``: A pauses there; B takes over and pauses at each point of its own
  path; then both orders of resumption (old owner first, new owner first).
- ``cancel``: A pauses there; an operator cancels; A resumes.
- ``crash-cancel``: A dies there; an operator cancels.

Every schedule then settles: further owners advance the run until it ends, and the
sweeper takes its turn (obligations of ended runs). A schedule fails when the audit
finds anything, when a worker raised an unexpected exception, or when the run does not
end. Points inside an open transaction need two concurrent transactions, which only
PostgreSQL gives; on SQLite those schedules are skipped and counted as such.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection
from django.db.backends.signals import connection_created

from approvals import services as approvals
from approvals.models import Checkpoint
from fieldops import points
from kernel import clock
from runs import services
from runs.domain.states import is_terminal, is_waiting
from runs.engine import runner, sweeper
from runs.models import Run
from runs.replay import effect_audit
from sim.world import fixtures
from sim.world.models import InventorySlot
from sim.world.service import seed_world

NAMESPACE = "explore"
REQUESTER = "faultlab-operator"
APPROVER = "faultlab-approver"
LEASE_SECONDS = 2
LOCK_TIMEOUT_MS = 300
PARK_TIMEOUT_S = 20.0

# Fault plans the path is explored under (reserve_part's first call).
VARIANTS: Mapping[str, tuple[dict[str, Any], ...]] = {
    "answered": (),
    "lost_response": (
        {"point": "after_commit_before_response", "capability": "reserve_part", "on_call": 1},
    ),
    "no_commit": (
        {"point": "after_receipt_before_commit", "capability": "reserve_part", "on_call": 1},
    ),
}
KINDS = ("crash", "takeover", "takeover-pause", "cancel", "crash-cancel")


def in_transaction(point: str) -> bool:
    """Points reached while the worker holds an open transaction (and its locks)."""
    return point.startswith(("authority.in_transaction:", "world.after_ledger_insert"))


@dataclass(frozen=True)
class Schedule:
    variant: str
    kind: str
    point: str  # where A stops: "name#occurrence"
    second: str = ""  # where B pauses (takeover-pause)
    order: str = ""  # "old-first" | "new-first" (takeover-pause)

    @property
    def name(self) -> str:
        extra = f" / B@{self.second} {self.order}" if self.second else ""
        return f"{self.variant}: {self.kind} A@{self.point}{extra}"

    @property
    def needs_concurrent_transactions(self) -> bool:
        return in_transaction(self.point.split("#")[0]) or in_transaction(self.second.split("#")[0])


@dataclass
class ScheduleOutcome:
    schedule: Schedule
    run_id: str = ""
    state: str = ""
    reason: str = ""
    violations: list[str] = field(default_factory=list)
    reached: bool = True  # False: A never reached the point (nothing to explore)
    new_owner_trace: list[str] = field(default_factory=list)  # B's points (takeover)


@dataclass
class Report:
    outcomes: list[ScheduleOutcome] = field(default_factory=list)
    skipped: int = 0  # schedules that need concurrent transactions (not on SQLite)
    traces: dict[str, list[str]] = field(default_factory=dict)

    @property
    def explored(self) -> list[ScheduleOutcome]:
        return [o for o in self.outcomes if o.reached]

    @property
    def failures(self) -> list[ScheduleOutcome]:
        return [o for o in self.explored if o.violations]

    def counts(self) -> Counter[str]:
        return Counter(o.schedule.kind for o in self.explored)

    def dispositions(self) -> Counter[str]:
        return Counter(f"{o.state} {o.reason}".strip() for o in self.explored)


# -- workers in threads ----------------------------------------------------------------------
_current = threading.local()


def _dispatch(point: str, run_id: str) -> None:
    actor: Worker | None = getattr(_current, "worker", None)
    if actor is not None and actor.run_id == run_id:
        actor.reach(point)


class Worker:
    """One worker advancing one run in its own thread, stopping where it is told to.

    ``stops`` maps "point#occurrence" to "pause" or "kill". The scheduler and the worker
    never run at the same time: ``start`` and ``resume`` return once the worker parked at
    a pause or finished.
    """

    def __init__(self, name: str, run_id: str, stops: Mapping[str, str] | None = None):
        self.name = name
        self.run_id = run_id
        self.stops = dict(stops or {})
        self.trace: list[str] = []
        self.parked_at = ""
        self.killed = False
        self.error: BaseException | None = None
        self._seen: Counter[str] = Counter()
        self._parked = threading.Event()
        self._go = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"explorer-{name}", daemon=True)

    # In the worker's thread.
    def reach(self, point: str) -> None:
        self._seen[point] += 1
        key = f"{point}#{self._seen[point]}"
        self.trace.append(key)
        action = self.stops.get(key)
        if action == "kill":
            self.killed = True
            raise points.WorkerKilled(key)
        if action == "pause":
            self.parked_at = key
            self._go.clear()
            self._parked.set()
            self._go.wait()

    def _main(self) -> None:
        _current.worker = self
        try:
            _bound_lock_waits()
            runner.advance(self.run_id, worker=self.name)
        except points.WorkerKilled:
            pass
        except BaseException as exc:  # a worker must never raise: that is a finding
            self.error = exc
        finally:
            _current.worker = None
            connection.close()
            self._done.set()

    # In the scheduler's thread.
    def start(self) -> Worker:
        self._thread.start()
        self._wait()
        return self

    def resume(self) -> Worker:
        if not self._done.is_set():
            self._parked.clear()
            self.parked_at = ""
            self._go.set()
            self._wait()
        return self

    def finish(self) -> Worker:
        while not self._done.is_set():
            self.resume()
        return self

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _wait(self) -> None:
        deadline = time.monotonic() + PARK_TIMEOUT_S
        while not (self._parked.is_set() or self._done.is_set()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.name} neither parked nor finished")
            time.sleep(0.0005)


def _bound_lock_waits() -> None:
    """Keep every lock wait of this thread's connection short, so no schedule can hang."""
    connection.ensure_connection()


def _on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Every connection opened while exploring (any thread) bounds its lock waits."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, false)", [f"{LOCK_TIMEOUT_MS}ms"])


# -- one schedule -----------------------------------------------------------------------------
@contextmanager
def _exploring() -> Iterator[None]:
    """The process as the explorer needs it: its world seeded, deferred execution, short
    leases and lock waits, the point hook installed; everything restored afterwards."""
    from sim.setup import system_users

    system_users()
    seed_world(NAMESPACE)
    saved = {
        name: getattr(settings, name)
        for name in (
            "FIELDOPS_EXECUTION",
            "FIELDOPS_LEASE_SECONDS",
            "FIELDOPS_RECONCILE_LOCK_MS",
        )
    }
    settings.FIELDOPS_EXECUTION = "deferred"
    settings.FIELDOPS_LEASE_SECONDS = LEASE_SECONDS
    settings.FIELDOPS_RECONCILE_LOCK_MS = LOCK_TIMEOUT_MS
    previous = points.install(_dispatch)
    connection_created.connect(_on_connect)
    try:
        _bound_lock_waits()
        yield
    finally:
        connection_created.disconnect(_on_connect)
        points.install(previous)
        for name, value in saved.items():
            setattr(settings, name, value)
        clock.reset()
        if connection.vendor == "postgresql" and connection.connection is not None:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")


def _approved_run(variant: str) -> Run:
    """A fresh reservation run in the explorer's world, approved and ready to dispatch."""
    clock.reset()
    for slot_id, _, _, available in fixtures.INVENTORY_SLOTS:
        InventorySlot.objects.filter(namespace=NAMESPACE, slot_id=slot_id).update(
            available=available
        )
    users = get_user_model().objects
    run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref=f"user:{REQUESTER}",
        requested_by=users.get(username=REQUESTER),
        fault_plan=list(VARIANTS[variant]),
        namespace=NAMESPACE,
        start=False,
    )
    runner.advance(str(run.pk), worker="explorer-setup")
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    decided = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=users.get(username=APPROVER),
        approve=True,
        seen_hash=checkpoint.proposal_hash,
        reason="explorer: scripted approver",
    )
    assert decided.recorded, decided.refusal
    return run


def _take_over() -> None:
    """Let the current owner's lease run out, as a dead or paused worker's does."""
    clock.advance(LEASE_SECONDS + 1)


def _cancel(run: Run) -> None:
    services.run_cancel(run_id=str(run.pk), by_ref="explorer:operator", reason="explorer")


def _settle(run: Run, workers: list[Worker]) -> None:
    """Advance the run with fresh owners until it ends, then give the sweeper its turn."""
    for i in range(8):
        run.refresh_from_db()
        if is_terminal(run.state) or is_waiting(run.state):
            break
        _take_over()
        workers.append(Worker(f"settle-{i}", str(run.pk)).start().finish())
    sweeper.sweep()


def _play(schedule: Schedule, run: Run, workers: list[Worker]) -> bool:
    """Run the scripted part of ``schedule``; False when A never reached its point."""
    run_id = str(run.pk)
    kill = schedule.kind in ("crash", "crash-cancel")
    a = Worker("A", run_id, {schedule.point: "kill" if kill else "pause"})
    workers.append(a.start())
    if not (a.killed or a.parked_at):
        return False
    if schedule.kind in ("cancel", "crash-cancel"):
        _cancel(run)
        a.finish()
        return True
    _take_over()
    if schedule.kind == "takeover-pause":
        b = Worker("B", run_id, {schedule.second: "pause"})
        workers.append(b.start())
        if not b.parked_at:
            a.finish()
            return False
        first, then = (a, b) if schedule.order == "old-first" else (b, a)
        first.finish()
        then.finish()
        return True
    workers.append(Worker("B", run_id).start().finish())
    a.finish()
    return True


def run_schedule(schedule: Schedule) -> ScheduleOutcome:
    run = _approved_run(schedule.variant)
    outcome = ScheduleOutcome(schedule, run_id=str(run.pk))
    workers: list[Worker] = []
    try:
        outcome.reached = _play(schedule, run, workers)
        _settle(run, workers)
    except RuntimeError as exc:
        outcome.violations.append(f"schedule stuck: {exc}")
    for worker in workers:
        if worker.error is not None:
            outcome.violations.append(
                f"worker {worker.name} raised {type(worker.error).__name__}: {worker.error}"
            )
    outcome.new_owner_trace = next((w.trace for w in workers if w.name == "B"), [])
    run.refresh_from_db()
    outcome.state, outcome.reason = run.state, run.terminal_reason
    if not is_terminal(run.state):
        outcome.violations.append(f"the run did not end: {run.state}")
    outcome.violations += effect_audit.effect_violations(run)
    return outcome


# -- enumeration -----------------------------------------------------------------------------
RECORDING_POINTS = tuple(
    f"authority.in_transaction:{t}"
    for t in ("effect.recorded", "reconciliation.matched", "effect.rejected")
)


def effect_segment(reached: Iterable[str]) -> list[str]:
    """The points of a trace up to the commit of the event that settles the effect (what
    follows, verification, cannot touch the effect any more)."""
    out = []
    for point in reached:
        out.append(point)
        if point.split("#")[0] in RECORDING_POINTS:
            break
    return out


def trace(variant: str) -> list[str]:
    """The points worker A reaches on an undisturbed run of ``variant`` after approval."""
    run = _approved_run(variant)
    worker = Worker("A", str(run.pk)).start().finish()
    return effect_segment(worker.trace)


def schedules(traces: Mapping[str, list[str]]) -> Iterator[Schedule]:
    """The single-owner schedules: a crash, a pause with takeover, a cancellation, a crash
    with cancellation at every point of every variant's path."""
    for variant, reached in traces.items():
        for point in reached:
            for kind in ("crash", "takeover", "cancel", "crash-cancel"):
                yield Schedule(variant, kind, point)


def takeover_orders(outcome: ScheduleOutcome) -> Iterator[Schedule]:
    """From a takeover schedule, every two-owner schedule it opens: the new owner B pauses
    at each point of the path it really took, and the two resume in either order."""
    first = outcome.schedule
    for second in effect_segment(outcome.new_owner_trace):
        for order in ("old-first", "new-first"):
            yield Schedule(first.variant, "takeover-pause", first.point, second, order)


def explore(
    *,
    variants: Iterable[str] | None = None,
    kinds: Iterable[str] | None = None,
    progress: Callable[[ScheduleOutcome], None] | None = None,
) -> Report:
    """Explore every schedule of ``variants`` x ``kinds``; return what happened in each."""
    wanted = set(kinds or KINDS)
    report = Report()
    concurrent = connection.vendor == "postgresql"

    def play(schedule: Schedule) -> ScheduleOutcome | None:
        if schedule.needs_concurrent_transactions and not concurrent:
            report.skipped += 1
            return None
        outcome = run_schedule(schedule)
        close_old_connections()
        if schedule.kind in wanted:
            report.outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
        return outcome

    with _exploring():
        for variant in variants or VARIANTS:
            report.traces[variant] = trace(variant)
        for schedule in schedules(report.traces):
            if schedule.kind in wanted or (
                schedule.kind == "takeover" and "takeover-pause" in wanted
            ):
                outcome = play(schedule)
                opens_orders = schedule.kind == "takeover" and "takeover-pause" in wanted
                if opens_orders and outcome is not None and outcome.reached:
                    for second in takeover_orders(outcome):
                        play(second)
    return report
