"""Metrics: a scrape of /metrics after a run counts what the run did; only ops may scrape;
counters of several processes sum in one scrape."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from kernel import clock
from runs import authority
from runs.domain.states import Actor, EventType
from runs.engine import ownership, sweeper
from runs.models import Outbox, WorkerHeartbeat
from tests.conftest import make_user
from tests.helpers import approve, make_run

ROOT = Path(__file__).resolve().parents[2]


def _scrape(client: Client, **headers: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def staff(world: None) -> Client:
    user = make_user("ops-staff", "north")
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def test_a_scrape_after_a_reservation_run_counts_its_transitions_calls_effect_and_approval(
    world, approver, staff
):
    before = _scrape(staff)
    run = make_run()
    approve(run, approver)
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    after = _scrape(staff)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    transition = "fieldops_transitions_total"
    assert delta(transition, event_type="run.started", state="OBSERVING") == 1
    assert delta(transition, event_type="proposal.emitted", state="VALIDATING") == 5
    assert delta(transition, event_type="approval.required", state="WAITING_HUMAN") == 1
    assert delta(transition, event_type="approval.granted", state="VALIDATING") == 1
    assert delta(transition, event_type="completion.verified", state="COMPLETED") == 1
    assert delta("fieldops_effect_outcomes_total", outcome="effect.recorded") == 1
    assert delta("fieldops_tool_calls_total", tool="reserve_part", outcome="ok") == 1
    assert delta("fieldops_model_calls_total", provider="openai", outcome="ok") == 5
    decided = {"kind": "approval", "decision": "approve"}
    assert delta("fieldops_approval_decisions_total", outcome="recorded", **decided) == 1
    assert delta("fieldops_approval_wait_seconds_count", **decided) == 1
    assert delta("fieldops_approval_wait_seconds_bucket", le="+Inf", **decided) == 1
    # Read from the database at scrape time: the one run of this test, by state.
    assert _value(after, "fieldops_runs", state="COMPLETED") == 1
    assert _value(after, "fieldops_runs", state="WAITING_HUMAN") == 0
    assert _value(after, "fieldops_checkpoints_pending") == 0


def test_counting_a_decision_costs_no_query_when_tracing_is_off(world, approver):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from approvals import services as approvals
    from approvals.models import Checkpoint

    def decide(decide_fn: Any) -> int:
        run = make_run()
        checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
        with CaptureQueriesContext(connection) as queries:
            result = decide_fn(
                checkpoint_id=checkpoint.pk,
                user=approver,
                approve=True,
                seen_hash=checkpoint.proposal_hash,
                reason="same work",
            )
        assert result.recorded
        return len(queries)

    decide(approvals.approval_decide.__wrapped__)  # what is cached once (the approver's roles)
    assert decide(approvals.approval_decide) == decide(approvals.approval_decide.__wrapped__)


def test_refusals_are_counted_by_reason_and_the_event_type_asked_for(world, staff):
    run = make_run()
    before = _scrape(staff)
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="again",
    )
    assert not result.applied and result.refusal
    stale = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision - 1,
        expected_epoch=None,
        type=EventType.RUN_CANCELLED,
        actor=Actor.OPERATOR,
        reason_code="cancelled",
    )
    assert stale.conflict
    after = _scrape(staff)
    refused = {"reason": result.refusal, "attempted": "run.started"}
    assert (
        _value(after, "fieldops_refusals_total", **refused)
        - _value(before, "fieldops_refusals_total", **refused)
        == 1
    )
    conflict = {"reason": "revision_conflict", "attempted": "run.cancelled"}
    assert (
        _value(after, "fieldops_refusals_total", **conflict)
        - _value(before, "fieldops_refusals_total", **conflict)
        == 1
    )


def test_a_lease_takeover_is_counted(world, staff):
    run = make_run(advance=False)
    before = _scrape(staff)
    assert isinstance(ownership.claim(str(run.pk), "worker-a"), ownership.Claim)
    clock.advance(ownership.lease_length().total_seconds() + 1)
    taken = ownership.claim(str(run.pk), "worker-b")
    assert isinstance(taken, ownership.Claim) and taken.recovered
    after = _scrape(staff)
    takeovers = "fieldops_lease_takeovers_total"
    assert _value(after, takeovers) - _value(before, takeovers) == 1


def test_a_sweep_that_expires_a_checkpoint_counts_the_sweep_and_the_wait(world, staff):
    run = make_run()
    assert run.state == "WAITING_HUMAN"
    before = _scrape(staff)
    clock.advance(settings.FIELDOPS_APPROVAL_TTL_SECONDS + 1)
    report = sweeper.sweep()
    assert report.expired_checkpoints == [run.waiting_checkpoint]
    after = _scrape(staff)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("fieldops_sweep_duration_seconds_count") == 1
    assert delta("fieldops_sweep_actions_total", action="expired_checkpoints") == 1
    expired = {"kind": "approval", "decision": "expire"}
    assert delta("fieldops_approval_wait_seconds_count", **expired) == 1
    # The wait was the checkpoint's whole lease.
    ttl = settings.FIELDOPS_APPROVAL_TTL_SECONDS
    assert ttl < delta("fieldops_approval_wait_seconds_sum", **expired) < ttl + 60
    expiry = {"event_type": "approval.expired", "state": "ESCALATED"}
    assert delta("fieldops_transitions_total", **expiry) == 1


def test_outbox_depth_and_age_and_sweeper_lag_are_read_from_the_database(world, staff):
    run = make_run(advance=False)
    Outbox.objects.all().delete()
    Outbox.objects.create(run=run, created_at=clock.now())
    WorkerHeartbeat.objects.create(worker="beat", role="sweeper", seen_at=clock.now())
    clock.advance(30)
    WorkerHeartbeat.objects.create(worker="celery@a", seen_at=clock.now())
    clock.advance(12)
    samples = _scrape(staff)
    assert _value(samples, "fieldops_outbox_depth") == 1
    assert 42 <= _value(samples, "fieldops_outbox_oldest_age_seconds") < 60
    assert 42 <= _value(samples, "fieldops_sweeper_lag_seconds") < 60
    assert 12 <= _value(samples, "fieldops_worker_heartbeat_age_seconds") < 30
    assert _value(samples, "fieldops_runs", state="CREATED") == 1


@pytest.mark.django_db
def test_anonymous_and_wrong_token_scrapes_are_refused(settings):
    settings.FIELDOPS_OPS_TOKEN = "ops-token-for-tests"
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    assert b"fieldops_" not in anonymous.content
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 403
    assert b"fieldops_" not in wrong.content
    right = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ops-token-for-tests")
    assert right.status_code == 200
    assert b"fieldops_runs" in right.content


def test_a_signed_in_user_who_is_not_staff_is_refused(operator):
    client = Client()
    client.force_login(operator)
    response = client.get("/metrics")
    assert response.status_code == 403
    assert b"fieldops_" not in response.content


@pytest.mark.django_db
def test_no_ops_token_configured_means_no_token_is_accepted(settings):
    settings.FIELDOPS_OPS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


_INCREMENT = """
import sys
from fieldops import metrics
for _ in range(int(sys.argv[1])):
    metrics.transition_recorded(event_type="proposal.emitted", state="VALIDATING")
metrics.decision_offered(kind="approval", decision="approve", outcome="recorded", waited_s=7.0)
"""


def test_multiprocess_mode_sums_the_counters_of_every_process_in_one_scrape(
    world, staff, tmp_path, monkeypatch
):
    """Two processes (gunicorn or Celery workers) count into PROMETHEUS_MULTIPROC_DIR; a
    scrape of /metrics in a third sums them."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for times in (3, 4):
        subprocess.run(
            [sys.executable, "-c", _INCREMENT, str(times)],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=60,
        )
    assert len(list(tmp_path.glob("counter_*.db"))) == 2
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    samples = _scrape(staff)
    assert (
        _value(
            samples, "fieldops_transitions_total", event_type="proposal.emitted", state="VALIDATING"
        )
        == 7
    )
    decided = {"kind": "approval", "decision": "approve"}
    assert _value(samples, "fieldops_approval_wait_seconds_count", **decided) == 2
    assert _value(samples, "fieldops_approval_wait_seconds_sum", **decided) == 14.0
    # The database gauges are in the same scrape.
    assert ("fieldops_outbox_depth", ()) in samples
