"""One stalled transaction cannot stall the fleet (issue 14 item 4): a worker frozen while
it holds a run's row lock makes that run "busy" for everyone else, a recorded outcome with
a bounded wait, and every other run keeps moving."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from kernel import clock
from runs import services
from runs.engine import ownership, runner, sweeper
from runs.models import Run
from tests.helpers import make_run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stalled() -> Iterator[object]:
    """A second connection that locks a run's row and then does nothing (like SIGSTOP)."""
    settings = connection.settings_dict
    holder = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        dbname=settings["NAME"],
    )

    def lock(run: Run) -> None:
        holder.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [run.pk])

    try:
        yield lock
    finally:
        holder.rollback()
        holder.close()


@pytest.fixture
def short_lock_waits() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '300ms'")


def test_a_claim_skips_a_locked_run_at_once_and_says_busy(world, stalled, short_lock_waits):
    run = make_run(advance=False)
    stalled(run)
    started = time.monotonic()
    claim = ownership.claim(str(run.pk), "worker-b")
    assert not claim and claim.reason == "busy"
    assert time.monotonic() - started < 0.3  # skipped, not waited for
    assert runner.advance(str(run.pk), worker="worker-b") == "CREATED"  # no exception


def test_other_runs_keep_moving_while_one_is_held(world, stalled, short_lock_waits):
    held = make_run(advance=False)
    free = make_run(advance=False)
    stalled(held)
    assert runner.advance(str(free.pk), worker="worker-c") == "WAITING_HUMAN"


def test_the_sweeper_reports_a_held_run_as_busy_and_finishes_its_sweep(
    world, stalled, short_lock_waits
):
    held = make_run(advance=False)
    Run.objects.filter(pk=held.pk).update(deadline=clock.now())  # the sweeper must act on it
    stalled(held)
    clock.advance(5)
    report = sweeper.sweep()
    assert str(held.pk) in report.busy
    held.refresh_from_db()
    assert held.state == "CREATED"  # nothing half-written


def test_a_cancellation_of_a_held_run_answers_busy_without_writing(
    world, stalled, short_lock_waits
):
    held = make_run()
    revision = held.revision
    stalled(held)
    result = services.run_cancel(run_id=str(held.pk), by_ref="user:operator", reason="stop it")
    assert not result.applied and result.refusal == "busy"
    held.refresh_from_db()
    assert held.revision == revision and held.state == "WAITING_HUMAN"
