"""Round trips the engine no longer makes, and why what it skips was redundant (issue 21;
docs/runner.md).

- A step's first safe point takes its predecessor's own compare-and-set as its read; a
  cancellation committed in that moment is refused by the next compare-and-set.
- The model's answer is recorded by a compare-and-set on the copy read before the call:
  a cancellation during the call refuses the proposal, as the re-read used to.
- The usual claim is one statement (PostgreSQL); every other case keeps its transaction.
- The catalog the model is shown is read without its contracts once they are known.
- The indexes only the writes paid for are gone (PostgreSQL).
- An advance's first safe point takes the claim's row as its read, unless a drill acted
  after the claim; an advance gives a waiting run back and learns its state in one
  statement, and gives nothing back for a run that ended (its end released it).
- An approval of quorum 1 reads no votes, and the run's other proposals are read only for
  a hash that differs.
- The world double numbers a call in its request log's own statement unless the fault plan
  counts that capability's calls.
- A model call's context is stored on the condition that every earlier call is charged,
  checked by its own statement (tests/runs/engine/test_turns.py: a dead worker's call
  fails the condition and is charged); the effect's outcome is recorded by a
  compare-and-set on the send gate's copy.
- A Celery hand-over marks the outbox row its transaction wrote without looking the run's
  pending rows up.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.models import CapabilityVersion, Source
from fieldops import points
from kernel import clock
from runs import evidence, services
from runs import rows as rows_module
from runs.domain.states import EventType
from runs.engine import ownership, runner, steps, visibility
from runs.engine.owner import Owner, safe_point
from runs.models import Event, Evidence, Run
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


_POSITION_READ = "SELECT revision, owner_epoch FROM runs_run"


def deciding_run() -> Run:
    """A run stopped in DECIDING, its lease given back (the next advance claims it there)."""
    run = make_run(advance=False)
    runner.advance(str(run.pk), worker="worker-0", max_steps=2)
    run.refresh_from_db()
    assert run.state == "DECIDING" and not run.lease_owner
    return run


def test_an_advances_first_safe_point_takes_the_claims_row(world: None) -> None:
    run = deciding_run()
    with CaptureQueriesContext(connection) as advanced:
        runner.advance(str(run.pk), worker="worker-a", max_steps=1)
    run.refresh_from_db()
    assert EventType.PROPOSAL_EMITTED.value in types(run)
    assert not [q for q in advanced.captured_queries if _POSITION_READ in q["sql"]]


def test_a_takeover_where_a_drill_acted_after_the_claim_is_seen_before_the_model_call(
    world: None,
) -> None:
    run = deciding_run()
    contexts = Evidence.objects.filter(run=run, kind="context").count()

    def take_over(point: str, run_id: str) -> None:
        if point == "after_claim" and run_id == str(run.pk):
            Run.objects.filter(pk=run.pk).update(
                lease_expires_at=clock.now() - dt.timedelta(seconds=1)
            )
            assert isinstance(ownership.claim(run_id, "worker-b"), ownership.Claim)

    previous = points.install(take_over)
    try:
        runner.advance(str(run.pk), worker="worker-a", max_steps=1)
    finally:
        points.install(previous)
    run.refresh_from_db()
    # The first safe point read the row, saw worker-b's epoch and stopped: no model call,
    # no proposal refused for a stale owner.
    assert Evidence.objects.filter(run=run, kind="context").count() == contexts
    assert run.lease_owner == "worker-b" and run.state == "DECIDING"
    assert EventType.STALE_OWNER_REJECTED.value not in types(run)


def test_a_waiting_run_is_given_back_and_its_state_known_in_one_statement(
    world: None,
) -> None:
    run = make_run(advance=False)
    with CaptureQueriesContext(connection) as advanced:
        state = runner.advance(str(run.pk), worker="worker-a")
    run.refresh_from_db()
    assert state == run.state == "WAITING_HUMAN" and not run.lease_owner
    assert not [q for q in advanced.captured_queries if "SELECT state FROM" in q["sql"]]
    assert [q for q in advanced.captured_queries if "RETURNING state" in q["sql"]]


def test_an_ended_run_is_not_given_back_again(world: None, approver: Any) -> None:
    run = make_run()
    approve(run, approver, advance=False)
    with CaptureQueriesContext(connection) as advanced:
        state = runner.advance(str(run.pk), worker="worker-a")
    run.refresh_from_db()
    assert state == run.state == "COMPLETED"
    assert not run.lease_owner and run.lease_expires_at is None
    releases = [q for q in advanced.captured_queries if "SET lease_owner = ''" in q["sql"]]
    assert len(releases) == 1  # the terminal close's own, in the terminal event's transaction


def test_released_is_none_for_a_run_that_is_no_longer_ours(world: None) -> None:
    run = make_run(advance=False)
    first = ownership.claim(str(run.pk), "worker-a")
    assert isinstance(first, ownership.Claim)
    assert ownership.release(first) == "CREATED"
    assert ownership.release(first) is None  # given back already


def test_an_approval_of_quorum_one_reads_no_votes_nor_other_proposals(
    world: None, approver: Any
) -> None:
    run = make_run()
    assert run.state == "WAITING_HUMAN"
    with CaptureQueriesContext(connection) as decided:
        assert approve(run, approver, advance=False).recorded
    sent = [q["sql"] for q in decided.captured_queries]
    assert not [q for q in sent if "FROM approvals_approvalvote WHERE" in q]
    assert not [q for q in sent if "SELECT proposal_hash FROM approvals_checkpoint" in q]


def test_the_world_numbers_an_uncounted_call_in_its_log_and_a_counted_one_before(
    world: None,
) -> None:
    from sim.world.models import ServiceRequest
    from sim.world.service import NUMBERED_AT_LOG, WorldService

    plain = WorldService(namespace="faultlab", run_id="run-plain")
    counted = WorldService(
        namespace="faultlab",
        run_id="run-counted",
        fault_plan=[{"point": "timeout", "capability": "search_manual", "on_call": 2}],
    )
    for world_view in (plain, counted):
        for _ in range(3):
            index = world_view.next_call_index("search_manual")
            world_view.log(capability="search_manual", call_index=index, args={}, outcome="ok")
        # Another capability's calls are numbered on their own (no fault counts them).
        index = world_view.next_call_index("read_equipment")
        assert index == NUMBERED_AT_LOG
        world_view.log(capability="read_equipment", call_index=index, args={}, outcome="ok")
        logged = ServiceRequest.objects.filter(run_id=world_view.run_id).order_by("pk")
        assert [(r.capability, r.call_index) for r in logged] == [
            ("search_manual", 1),
            ("search_manual", 2),
            ("search_manual", 3),
            ("read_equipment", 1),
        ]
    assert plain.next_call_index("search_manual") == NUMBERED_AT_LOG
    assert counted.next_call_index("search_manual") == 4
    assert counted.fires("timeout", "search_manual", 2)


def test_a_model_calls_context_is_stored_without_counting_the_calls_first(world: None) -> None:
    run = deciding_run()
    with CaptureQueriesContext(connection) as decided:
        runner.advance(str(run.pk), worker="worker-a", max_steps=1)
    run.refresh_from_db()
    assert run.counters["turns"] == 1
    assert Evidence.objects.filter(run=run, kind="context").count() == 1
    sent = [q["sql"] for q in decided.captured_queries]
    assert not [q for q in sent if q.startswith("SELECT COUNT(*) FROM runs_evidence")]


def test_evidence_stored_on_a_count_is_not_stored_on_another(world: None) -> None:
    run = make_run(advance=False)
    kept = evidence.store_if_count(run_id=str(run.pk), kind="note", content={"n": 1}, count=0)
    assert kept is not None
    assert (
        evidence.store_if_count(run_id=str(run.pk), kind="note", content={"n": 2}, count=0) is None
    )
    assert list(Evidence.objects.filter(run=run, kind="note").values_list("pk", flat=True)) == [
        kept
    ]
    assert evidence.store_if_count(run_id=str(run.pk), kind="note", content={"n": 3}, count=1)


def test_the_effects_outcome_is_recorded_on_the_send_gates_copy(world: None, approver: Any) -> None:
    run = make_run()
    approve(run, approver, advance=False)
    reads: list[int] = []
    real = rows_module.run_row

    def counted(run_id: Any) -> Any:
        reads.append(1)
        return real(run_id)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows_module, "run_row", counted)
        runner.advance(str(run.pk), worker="worker-a")
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    assert len(reads) == 1  # the send gate's, under the dispatch record's lock


def test_a_kick_marks_the_row_its_transaction_wrote_without_looking_it_up(
    world: None,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from runs import outbox
    from runs.engine import executor
    from runs.models import Outbox

    settings.FIELDOPS_EXECUTION = "celery"
    published: list[str] = []
    monkeypatch.setattr(
        executor, "_publish", lambda run_id, priority: published.append(run_id) or True
    )
    run = make_run(advance=False)
    earlier = Outbox.objects.create(run=run, kind="advance", created_at=clock.now())
    with (
        CaptureQueriesContext(connection) as kicked,
        django_capture_on_commit_callbacks(execute=True),
    ):
        outbox.put(run_id=str(run.pk))
    assert published == [str(run.pk)]
    assert not [q for q in kicked.captured_queries if q["sql"].startswith("SELECT")]
    ours = Outbox.objects.exclude(pk=earlier.pk).get(run=run)
    assert ours.dispatched_at is not None and ours.attempts == 1
    # An earlier row no hand-over delivered stays pending: the sweeper re-arms it.
    earlier.refresh_from_db()
    assert earlier.dispatched_at is None
    assert str(run.pk) in outbox.pending_run_ids(created_before=clock.now(), limit=10)
