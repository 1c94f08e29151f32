"""Beat (the only sweeper) down for a long time while a worker dies holding a run.

Nothing hands the run over again: its message sits unacknowledged in Redis for the
broker's visibility timeout (600 s) and the lease expired long ago. The run must then be
clearly reported on the console's recovery page (not moving, and the sweeper silent),
and the runbook step the page names (one sweep by hand: ``manage.py sweep``) must move it.
The worker died with its machine: a worker killed on this host is proven dead by the next
one to start here, which takes its runs at once (tests/deploy/test_dead_owner.py).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from kernel import clock
from runs import services
from runs.models import Run, WorkerHeartbeat
from tests.durable.helpers import wait_for
from tests.runs.console.conftest import client_for

pytestmark = [pytest.mark.celery, pytest.mark.postgres]


def test_a_run_whose_worker_died_without_a_sweeper_is_reported_then_moved_by_a_sweep(
    cluster, operator, settings
):
    settings.FIELDOPS_SWEEP_INTERVAL_SECONDS = 1
    # The sweeper last reported long ago: beat was stopped (or crashed) and never came back.
    WorkerHeartbeat.objects.create(
        worker="sweeper", role="sweeper", seen_at=clock.now() - dt.timedelta(minutes=15)
    )
    worker = cluster.start_worker(FIELDOPS_PAUSE_AT="after_model_response:60")
    run = services.run_create(scenario="reservation", tenant="north", principal_ref="user:op")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.lease_owner and run.state == "DECIDING":
            break
        time.sleep(0.2)
    time.sleep(1.0)  # inside the pause: the model answered, nothing recorded yet
    os.killpg(worker.pid, signal.SIGKILL)  # the whole worker, parent and pool: an OOM, a host
    worker.wait(timeout=10)
    # As if that worker ran on a machine that was lost with it: a worker starting on this
    # host can prove dead only its own host's processes (``liveness.gone``), so it must not
    # take the run at its start; only the lease's expiry and a sweep can.
    run.refresh_from_db()
    host = socket.gethostname()
    assert f"{host}:" in run.lease_owner
    Run.objects.filter(pk=run.pk, lease_owner=run.lease_owner).update(
        lease_owner=run.lease_owner.replace(f"{host}:", "lost-host:", 1)
    )
    cluster.start_worker()  # a healthy worker is back, but nothing hands it the run
    # The lease (3 s) expires and then stays expired for longer than "stuck after" (2 s).
    time.sleep(cluster.lease_seconds + settings.FIELDOPS_STUCK_AFTER_SECONDS + 2)
    run.refresh_from_db()
    assert run.state == "DECIDING", "the run moved without a sweeper: nothing to report"

    page = client_for(operator).get(reverse("recovery")).content.decode()
    assert "Runs that should be moving and are not" in page
    assert str(run.pk)[:8] in page
    assert "lease expired" in page
    assert "The sweeper has not reported for" in page
    assert "manage.py sweep" in page

    call_command("sweep")  # the step the page names
    run = wait_for(run, ["WAITING_HUMAN"], sweep=False)
    assert run.attempt == 2
    page = client_for(operator).get(reverse("recovery")).content.decode()
    assert str(run.pk)[:8] not in page.split("Runs that should be moving")[-1]
    assert "The sweeper has not reported for" not in page
    assert Run.objects.get(pk=run.pk).state == "WAITING_HUMAN"


def test_a_bulk_operation_whose_hand_over_was_lost_is_reported_then_handed_over_by_a_sweep(
    cluster, operator, settings
):
    """Beat runs two sweeps: the runs' and the bulk operations'. With beat down, the one
    sweep by hand the recovery page and README name must re-hand operations as well."""
    from operations.models import Operation, OperationItem, Status

    cluster.start_worker()
    run = services.run_create(scenario="reservation", tenant="north", principal_ref="user:op")
    run = wait_for(run, ["WAITING_HUMAN"], sweep=False)
    # A bulk cancel of that run whose hand-over was lost (Redis restarted under it) 2 min ago.
    long_ago = clock.now() - dt.timedelta(minutes=2)
    operation = Operation.objects.create(
        tenant="north",
        kind="cancel",
        created_by="user:op",
        created_at=long_ago,
        kicked_at=long_ago,
        reason="end of shift",
        total=1,
    )
    OperationItem.objects.create(operation=operation, position=0, run=run)
    page = client_for(operator).get(reverse("recovery")).content.decode()
    stalled = page.split("Runs that should be moving and are not")[-1]
    assert f"/operations/{operation.pk}/" in stalled
    assert "no batch for" in stalled

    call_command("sweep")

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        operation.refresh_from_db()
        if operation.status != Status.RUNNING:
            break
        time.sleep(0.3)
    assert operation.status == Status.FINISHED, "nothing handed the operation over"
    assert (operation.total, operation.done) == (1, 1)
    assert Run.objects.get(pk=run.pk).state == "CANCELLED"
