"""Round trips the engine no longer makes, and why what it skips was redundant (issue 21;
docs/runner.md).

- A step's first safe point takes its predecessor's own compare-and-set as its read; a
  cancellation committed in that moment is refused by the next compare-and-set.
- The model's answer is recorded by a compare-and-set on the copy read before the call:
  a cancellation during the call refuses the proposal, as the re-read used to.
- The usual claim is one statement (PostgreSQL); every other case keeps its transaction.
- The catalog the model is shown is read without its contracts once they are known.
- The indexes only the writes paid for are gone (PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.models import CapabilityVersion, Source
from kernel import clock
from runs import services
from runs.domain.states import EventType
from runs.engine import ownership, steps, visibility
from runs.engine.owner import Owner, safe_point
from runs.models import Event, Run
from tests.helpers import approve, make_run, types


def owner_of(run: Run) -> tuple[Owner, Run]:
    claim = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(claim, ownership.Claim) and claim.row is not None
    return Owner(claim=claim, plan=(), fired=set()), claim.row


def test_a_steps_first_safe_point_reads_nothing_and_the_next_one_reads(world: None) -> None:
    owner, row = owner_of(make_run(advance=False))
    steps.step_created(owner, row)
    current = owner.take_row()
    assert current is not None and current.state == "OBSERVING"
    with CaptureQueriesContext(connection) as first:
        assert safe_point(owner, "before_model_dispatch", current) is current
    assert first.captured_queries == []
    with CaptureQueriesContext(connection) as second:
        assert safe_point(owner, "after_model_response", current) is current
    assert len(second.captured_queries) == 1


def test_a_process_paused_since_its_compare_and_set_reads_again(world: None) -> None:
    from runs.engine import owner as owner_module

    owner, row = owner_of(make_run(advance=False))
    steps.step_created(owner, row)
    current = owner.take_row()
    assert current is not None
    owner.confirmed_at -= owner_module.CONFIRMED_FOR + 1  # as if stopped for that long
    with CaptureQueriesContext(connection) as paused:
        assert safe_point(owner, "before_model_dispatch", current) is current
    assert len(paused.captured_queries) == 1


def test_a_cancellation_in_that_moment_is_refused_by_the_next_compare_and_set(
    world: None,
) -> None:
    run = make_run(advance=False)
    owner, row = owner_of(run)
    steps.step_created(owner, row)
    current = owner.take_row()
    assert current is not None
    services.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="test: race")
    # The safe point does not see it (it stands for a read a moment earlier) ...
    assert safe_point(owner, "before_model_dispatch", current) is current
    # ... and the step's own event cannot land: the cancellation moved the revision.
    steps.step_observing(owner, current)
    run.refresh_from_db()
    assert run.state == "CANCELLED"
    assert EventType.OBSERVATION_RECORDED.value not in types(run)


def test_a_scheduled_cancellation_at_a_first_safe_point_is_still_seen(world: None) -> None:
    run = make_run(
        advance=False,
        fault_plan=[{"point": "before_model_dispatch", "capability": "*", "on_call": 1}],
    )
    owner, row = owner_of(run)
    owner = Owner(claim=owner.claim, plan=tuple(run.fault_plan), fired=set())
    steps.step_created(owner, row)
    current = owner.take_row()
    assert current is not None
    assert safe_point(owner, "before_model_dispatch", current) is None
    run.refresh_from_db()
    assert run.state == "CANCELLED"


def test_a_cancellation_during_the_model_call_refuses_the_proposal(
    world: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runs.policies import boundary

    run = make_run(advance=False)
    real = boundary.call_policy

    def cancelled_meanwhile(policy: Any, projection: Any) -> Any:
        output = real(policy, projection)
        services.run_cancel(run_id=str(run.pk), by_ref="user:operator", reason="test: call")
        return output

    monkeypatch.setattr(boundary, "call_policy", cancelled_meanwhile)
    owner, row = owner_of(run)
    steps.step_created(owner, row)
    current = owner.take_row()
    assert current is not None
    steps.step_observing(owner, current)
    current = owner.take_row()
    assert current is not None and current.state == "DECIDING"
    steps.step_deciding(owner, current)
    run.refresh_from_db()
    assert run.state == "CANCELLED"
    recorded = types(run)
    assert EventType.PROPOSAL_EMITTED.value not in recorded
    assert recorded[-1] == EventType.PROPOSAL_REJECTED_AFTER_CANCEL.value


@pytest.mark.postgres
def test_the_usual_claim_is_one_statement_and_leaves_the_row_it_wrote(world: None) -> None:
    run = make_run(advance=False)
    with CaptureQueriesContext(connection) as claimed:
        claim = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(claim, ownership.Claim) and not claim.recovered
    assert len(claimed.captured_queries) == 1
    stored = Run.objects.get(pk=run.pk)
    assert claim.row is not None and claim.epoch == stored.owner_epoch == run.owner_epoch + 1
    for field in Run._meta.concrete_fields:
        assert getattr(claim.row, field.attname) == getattr(stored, field.attname), field.name


def test_held_waiting_ended_and_expired_runs_take_the_long_way(world: None) -> None:
    run = make_run(advance=False)
    first = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(first, ownership.Claim)
    held = ownership.claim(str(run.pk), "worker-b")
    assert not held and held.reason == "held"
    Run.objects.filter(pk=run.pk).update(lease_expires_at=clock.now() - dt.timedelta(seconds=1))
    taken = ownership.claim(str(run.pk), "worker-b")
    assert isinstance(taken, ownership.Claim) and taken.recovered
    assert taken.attempt == first.attempt + 1
    assert EventType.RUN_RECOVERED.value in types(run)
    ownership.release(taken)
    Run.objects.filter(pk=run.pk).update(state="WAITING_HUMAN")
    waiting = ownership.claim(str(run.pk), "worker-c")
    assert not waiting and waiting.reason == "waiting"
    Run.objects.filter(pk=run.pk).update(state="COMPLETED")
    ended = ownership.claim(str(run.pk), "worker-c")
    assert not ended and ended.reason == "ended"


def test_the_catalog_shown_to_a_model_is_the_stored_one_and_read_once(world: None) -> None:
    visibility._REVIEWED.clear()
    versions = visibility.catalog_versions()
    stored = {v.pk: v for v in CapabilityVersion.objects.all()}
    assert [v.pk for v in versions] == [
        v.pk for v in CapabilityVersion.objects.order_by("capability_id", "version")
    ]
    for version in versions:
        expected = stored[version.pk].contract if version.source == Source.REVIEWED else {}
        assert version.contract == expected
        assert (version.digest, version.lifecycle) == (
            stored[version.pk].digest,
            stored[version.pk].lifecycle,
        )
    with CaptureQueriesContext(connection) as again:
        visibility.catalog_versions()
    assert len(again.captured_queries) == 1
    assert '"contract"' not in again.captured_queries[0]["sql"]


def test_a_whole_run_still_completes_with_every_event_in_place(world: None, approver: Any) -> None:
    run = make_run()
    approve(run, approver)
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    sequences = sorted(Event.objects.filter(run=run).values_list("sequence", flat=True))
    assert sequences == list(range(1, len(sequences) + 1))


@pytest.mark.postgres
def test_indexes_only_the_writes_paid_for_are_gone(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexdef FROM pg_indexes WHERE tablename IN "
            "('runs_evidence', 'runs_effectattempt', 'runs_correlation', "
            "'world_servicerequest', 'approvals_checkpoint', 'approvals_approvalvote', "
            "'approvals_decision')"
        )
        found = cursor.fetchall()
    assert not [d for _, d in found if "varchar_pattern_ops" in d]
    evidence = [d for t, d in found if t == "runs_evidence"]
    assert not [d for d in evidence if d.endswith("(run_id)")]
    assert [d for d in evidence if d.endswith("(run_id, kind)")]
