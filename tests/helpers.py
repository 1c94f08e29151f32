"""Small helpers for building and driving runs in tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connection

from approvals import services as approvals
from approvals.models import Checkpoint
from fieldops import points
from kernel import clock
from operations.models import Kind, Operation
from runs import services
from runs.engine import runner
from runs.models import Event, Run


def make_run(
    scenario: str = "reservation",
    *,
    principal: str = "user:operator",
    advance: bool = True,
    **kw: Any,
) -> Run:
    """Create a run in the fault-lab namespace and (by default) advance it in-process."""
    kw.setdefault("namespace", "faultlab")
    run = services.run_create(
        scenario=scenario,
        tenant=kw.pop("tenant", "north"),
        principal_ref=principal,
        start=False,
        **kw,
    )
    if advance:
        runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    return run


def events(run: Run) -> list[Event]:
    return list(Event.objects.filter(run=run).order_by("sequence"))


def types(run: Run) -> list[str]:
    return [e.type for e in events(run)]


def approve(
    run: Run,
    user: Any,
    *,
    seen_hash: str | None = None,
    reason: str = "looks right",
    advance: bool = True,
) -> approvals.DecisionResult:
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    result = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=user,
        approve=True,
        seen_hash=checkpoint.proposal_hash if seen_hash is None else seen_hash,
        reason=reason,
    )
    if advance:
        runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    return result


def decline(
    run: Run,
    user: Any,
    *,
    reason: str = "wrong slot",
    requested_change: dict[str, Any] | None = None,
) -> approvals.DecisionResult:
    run.refresh_from_db()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    result = approvals.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=user,
        approve=False,
        seen_hash=checkpoint.proposal_hash,
        reason=reason,
        requested_change=requested_change,
    )
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    return result


def bulk_cancel_in_progress(*, reason: str, total: int) -> Operation:
    """A bulk cancel of tenant north, started by the operator and not yet drained (no
    items unless the caller adds them): what the operations pages show while one runs."""
    return Operation.objects.create(
        tenant="north",
        kind=Kind.CANCEL,
        created_by="user:operator",
        created_at=clock.now(),
        reason=reason,
        total=total,
    )


def manage_refused(*argv: str, **env: str) -> str:
    """Run ``python manage.py ARGV`` as a person does, expect a refusal, return its message.

    The process gets a database with no tables (a SQLite file nobody migrated): a refusal
    reads and writes nothing, so anything that touches the database fails with a
    traceback, as does any refusal that is not a message. The message is the one line a
    person sees on stderr ("CommandError: ..." or argparse's "manage.py X: error: ...").
    """
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FIELDOPS_"))}
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(
            [sys.executable, "manage.py", *argv],
            cwd=Path(__file__).resolve().parents[1],
            env={**clean, "DATABASE_URL": f"sqlite:///{empty}/unmigrated.sqlite3", **env},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 or "usage:" in done.stderr, done.stderr  # usage + one error line
    return lines[-1]


def at_once(point: str, posts: list[Callable[[], Any]]) -> list[Any]:
    """Run ``posts`` at once, each in a thread on its own database connection, and return
    their answers in order. Each waits at the drill point ``point`` (its first pass) until
    all of them have reached it: every one has read what it decides on before any writes
    (several people acting at the same moment; PostgreSQL tests only)."""
    barrier = threading.Barrier(len(posts), timeout=10)
    passed: set[int] = set()
    lock = threading.Lock()

    def hold(reached: str, _key: str) -> None:
        if reached != point:
            return
        with lock:
            first = threading.get_ident() not in passed
            passed.add(threading.get_ident())
        if first:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()

    answers: list[Any] = [None] * len(posts)

    def go(i: int) -> None:
        try:
            answers[i] = posts[i]()
        finally:
            connection.close()

    previous = points.install(hold)
    try:
        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(posts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        points.install(previous)
    return answers


def together(*actions: Callable[[], Any]) -> list[Any]:
    """Run the actions in threads released by one barrier; return their results."""
    barrier = threading.Barrier(len(actions))
    results: list[Any] = [None] * len(actions)
    errors: list[BaseException] = []

    def run(index: int, action: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[index] = action()
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results
