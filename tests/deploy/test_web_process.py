"""The web process as deployed (gunicorn, Celery execution) hands web actions to the
workers' queue, and a lost kick is a note, not an error.

The web process is a subprocess that imports nothing by hand: whatever it publishes goes
through the app ``fieldops/__init__.py`` loads. This test process reads Redis to see what
it sent, and publishes nothing itself until the sweep that re-drives a lost kick.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from runs.engine import sweeper
from runs.middleware import UNDELIVERED_NOTE
from runs.models import Outbox, Run
from tests.deploy.conftest import broker_at
from tests.deploy.servers import (
    REDIS_URL,
    Browser,
    ClosedPort,
    WebProcess,
    gunicorn,
    queued_tasks,
    run_id_of,
    shared_database_url,
)

pytestmark = [pytest.mark.celery, pytest.mark.postgres]

START_FORM = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}


@pytest.fixture
def web(transactional_db: Any, operator: Any, tmp_path: Any) -> Any:
    """Start a gunicorn web process on the test database with extra environment."""
    started: list[WebProcess] = []

    def start(**env: str) -> WebProcess:
        process = gunicorn(
            {"FIELDOPS_EXECUTION": "celery", "DATABASE_URL": shared_database_url(), **env},
            tmp_path / f"web{len(started)}.log",
        )
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()


def test_a_run_started_over_http_is_sent_to_the_workers_queue(
    web: Any, redis_db: Any, queue_name: str
) -> None:
    before_default = queued_tasks(redis_db, "celery")
    server = web(CELERY_BROKER_URL=REDIS_URL, FIELDOPS_QUEUE=queue_name)
    browser = Browser(server.url)
    browser.login("operator", "pw-operator")

    response = browser.post("/runs/start/", START_FORM)

    assert response.status == 302, server.log()
    run_id = run_id_of(response)
    assert Run.objects.filter(pk=run_id).exists()
    sent = queued_tasks(redis_db, queue_name)
    assert ("runs.tasks.run_advance", [run_id]) in sent, (sent, server.log())
    # Nothing went to Celery's default queue, which no worker reads.
    new_default = [t for t in queued_tasks(redis_db, "celery") if t not in before_default]
    assert not [t for t in new_default if t[1] == [run_id]], new_default
    # The kick was published, so its outbox row counts as dispatched.
    assert Outbox.objects.get(run_id=run_id).dispatched_at is not None


def test_with_the_broker_down_a_start_succeeds_with_a_note_and_a_sweep_delivers_it_later(
    web: Any, redis_db: Any, queue_name: str, closed_port: ClosedPort, settings: Any
) -> None:
    server = web(
        CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_port.port}/0", FIELDOPS_QUEUE=queue_name
    )
    browser = Browser(server.url)
    browser.login("operator", "pw-operator")

    started = time.monotonic()
    response = browser.post("/runs/start/", START_FORM)
    elapsed = time.monotonic() - started

    assert response.status == 302, server.log()
    assert elapsed < 1.5, f"the start waited {elapsed:.2f}s for a broker that is down"
    page = browser.follow(response)
    assert page.status == 200
    assert UNDELIVERED_NOTE in page.body
    run_id = run_id_of(response)
    run = Run.objects.get(pk=run_id)
    assert run.state == "CREATED"
    row = Outbox.objects.get(run_id=run_id)
    assert row.dispatched_at is None and row.attempts == 1
    assert "Traceback" not in server.log()

    # The broker is back: the sweeper's re-drive publishes the undispatched row.
    settings.FIELDOPS_EXECUTION = "celery"
    settings.FIELDOPS_STUCK_AFTER_SECONDS = 0.2
    time.sleep(0.2)
    with broker_at(REDIS_URL, queue_name):
        report = sweeper.sweep()
    assert run_id in report.redriven
    assert ("runs.tasks.run_advance", [run_id]) in queued_tasks(redis_db, queue_name)
    row.refresh_from_db()
    assert row.dispatched_at is not None and row.attempts == 2
