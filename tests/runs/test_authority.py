"""The transition authority: compare-and-set, control events for every refusal."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection

from runs import authority
from runs.domain.states import Actor, EventType
from runs.engine import ownership
from runs.models import Event, TerminalRecord
from runs.replay.audit import audit_replay
from tests.helpers import make_run, types


def _append(run, event_type, actor=Actor.HARNESS, **kw):
    run.refresh_from_db()
    kw.setdefault("expected_revision", run.revision)
    kw.setdefault("expected_epoch", None)
    return authority.append(run_id=str(run.pk), type=event_type, actor=actor, **kw)


def test_an_illegal_edge_is_recorded_and_changes_nothing(world):
    run = make_run(advance=False)
    result = _append(run, EventType.COMPLETION_VERIFIED, refs={"completion": "x"})
    run.refresh_from_db()
    assert not result.applied and result.refusal == "illegal_transition"
    assert run.state == "CREATED" and run.revision == 1
    assert types(run) == ["transition.rejected"]
    assert result.control.payload["attempted"] == "completion.verified"


def test_a_stale_revision_records_nothing_and_asks_the_caller_to_reread(world):
    run = make_run(advance=False)
    result = _append(run, EventType.RUN_STARTED, expected_revision=5, refs={"observation": "rq"})
    assert result.conflict and result.control is None
    assert not Event.objects.filter(run=run).exists()


def test_a_stale_owner_is_fenced_and_recorded(world):
    run = make_run(advance=False)
    first = ownership.claim(str(run.pk), "a")
    ownership.release(first)
    second = ownership.claim(str(run.pk), "b")
    assert second.epoch == first.epoch + 1
    result = _append(
        run, EventType.RUN_STARTED, expected_epoch=first.epoch, refs={"observation": "rq"}
    )
    run.refresh_from_db()
    assert result.stale_owner and run.state == "CREATED"
    assert types(run) == ["stale_owner.rejected"]
    assert result.control.payload["attempted_epoch"] == first.epoch


def test_after_terminal_every_event_is_recorded_as_rejected(world):
    run = make_run(advance=False)
    assert _append(
        run, EventType.RUN_CANCELLED, actor=Actor.OPERATOR, reason_code="cancelled_no_dispatch"
    ).applied
    assert not _append(run, EventType.PROPOSAL_EMITTED, actor=Actor.MODEL).applied
    assert not _append(
        run, EventType.APPROVAL_GRANTED, actor=Actor.HUMAN_PRINCIPAL, refs={"approval": "cp"}
    ).applied
    assert not _append(run, EventType.EXTERNAL_OBSERVED, actor=Actor.RESOURCE_SERVICE).applied
    assert not _append(run, EventType.RUN_FAILED).applied
    # Control events that would change a live run (a budget change, a recovery) are refused too.
    assert not _append(run, EventType.BUDGET_CHANGED, reason_code="raise_limit").applied
    assert not _append(run, EventType.RUN_RECOVERED, reason_code="lease_expired").applied
    run.refresh_from_db()
    assert run.state == "CANCELLED"
    assert types(run)[1:] == [
        "proposal.rejected_after_cancel",
        "late_approval.rejected",
        "transition.rejected",
        "transition.rejected",
        "transition.rejected",
        "transition.rejected",
    ]
    assert TerminalRecord.objects.filter(run=run).count() == 1
    assert audit_replay(run)[1] == []


def test_counters_cannot_exceed_their_limits(world):
    run = make_run(advance=False)
    assert _append(run, EventType.RUN_STARTED, refs={"observation": "rq"}).applied
    result = _append(run, EventType.OBSERVATION_RECORDED, counters_delta={"effects": 2})
    assert not result.applied and result.refusal == "effects_budget_exceeded"


def test_oversized_payloads_are_refused_before_anything_is_written(world):
    run = make_run(advance=False)
    with pytest.raises(ValueError, match="256 KB"):
        _append(run, EventType.RUN_STARTED, payload={"blob": "x" * 300_000})
    assert not Event.objects.filter(run=run).exists()


def test_history_limit_fails_the_run_with_a_precise_reason(world, settings):
    settings.FIELDOPS_HISTORY_MAX_EVENTS = 4
    run = make_run()
    assert run.state == "FAILED" and run.terminal_reason == "history_event_limit_exceeded"
    assert run.revision == 4


def test_a_large_history_is_reported_once_per_warning_line(world, settings, caplog):
    """The warning is for the event that crosses the line (events or bytes), not for every
    event after it: a long run must not flood the log."""
    settings.FIELDOPS_HISTORY_WARN_EVENTS = 3
    settings.FIELDOPS_HISTORY_WARN_BYTES = 5_000
    run = make_run(advance=False)
    for i in range(12):
        result = _append(
            run, EventType.BUDGET_CHANGED, actor=Actor.OPERATOR, payload={"limits": {}, "n": i}
        )
        assert result.applied
    warned = [r for r in caplog.records if r.getMessage() == "run history is large"]
    # Event 3 reaches the event line; the bytes line (600 bytes a row) is crossed at event 9.
    assert [r.sequence for r in warned] == [3, 9]


def test_a_reused_event_id(world):
    run = make_run(advance=False)
    event_id = str(uuid.uuid4())
    payload = {"limits": {"turns": 30}, "reason": "x"}
    first = _append(
        run, EventType.BUDGET_CHANGED, actor=Actor.OPERATOR, event_id=event_id, payload=payload
    )
    same = _append(
        run,
        EventType.BUDGET_CHANGED,
        actor=Actor.OPERATOR,
        event_id=event_id,
        payload=payload,
        expected_revision=0,
    )
    assert same.applied and same.event.sequence == first.event.sequence == 1
    with pytest.raises(authority.IntegrityConflict):
        _append(
            run,
            EventType.BUDGET_CHANGED,
            actor=Actor.OPERATOR,
            event_id=event_id,
            payload={**payload, "reason": "y"},
        )
    run.refresh_from_db()
    assert run.state == "FAILED" and run.terminal_reason == "event_integrity_conflict"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_exactly_one_of_two_concurrent_writers_wins(world, monkeypatch):
    """Two real PostgreSQL connections race on the same revision."""
    run = make_run(advance=False)
    barrier = threading.Barrier(2, timeout=10)
    real_store = authority._store

    def racing_store(*args, **kwargs):
        barrier.wait()  # both writers have read revision 0 inside their transactions
        return real_store(*args, **kwargs)

    monkeypatch.setattr(authority, "_store", racing_store)
    results = {}

    def writer(name, event_type, actor, reason):
        try:
            results[name] = authority.append(
                run_id=str(run.pk),
                expected_revision=0,
                expected_epoch=None,
                type=event_type,
                actor=actor,
                reason_code=reason,
                refs={"observation": "rq"} if event_type is EventType.RUN_STARTED else None,
            )
        finally:
            connection.close()

    threads = [
        threading.Thread(
            target=writer, args=("start", EventType.RUN_STARTED, Actor.HARNESS, "contract_valid")
        ),
        threading.Thread(
            target=writer,
            args=("cancel", EventType.RUN_CANCELLED, Actor.OPERATOR, "cancelled_no_dispatch"),
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    applied = [name for name, r in results.items() if r.applied]
    assert len(applied) == 1
    loser = next(r for name, r in results.items() if name not in applied)
    assert loser.conflict
    run.refresh_from_db()
    assert run.revision == 1 and Event.objects.filter(run=run).count() == 1


@pytest.mark.parametrize("prepared", [True, False])
def test_appends_with_and_without_prepared_statements(world, settings, prepared):
    """FIELDOPS_PREPARED_STATEMENTS=false (for poolers without prepared statements) takes
    the same path with a plain statement; a stale revision still stores nothing."""
    settings.FIELDOPS_PREPARED_STATEMENTS = prepared
    held_before = _prepared_cas_statements()  # (an earlier test may have prepared it)
    run = make_run(advance=False)
    assert _append(run, EventType.RUN_STARTED, refs={"observation": "rq"}).applied
    run.refresh_from_db()
    cycle = [  # the runner's read loop, as the authority benchmark drives it
        (EventType.OBSERVATION_RECORDED, Actor.HARNESS, None),
        (EventType.PROPOSAL_EMITTED, Actor.MODEL, {"turns": 1, "proposals": 1}),
        (EventType.PROPOSAL_ALLOWED, Actor.HARNESS, {"actions": 1}),
        (EventType.OBSERVATION_RECEIVED, Actor.CAPABILITY_ADAPTER, None),
    ]
    for n, (event, actor, delta) in enumerate(cycle * 2):  # past psycopg's prepare point
        result = authority.append(
            run_id=str(run.pk),
            expected_revision=run.revision,
            expected_epoch=None,
            type=event,
            actor=actor,
            refs={"observation": f"ev-{n}"},
            counters_delta=delta,
            run=run,  # the caller's row: the one-statement path, updated in place
        )
        assert result.applied, result.refusal
    assert run.state == "OBSERVING" and run.revision == 9
    stale = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision - 1,
        expected_epoch=None,
        type=EventType.RUN_FAILED,
        actor=Actor.HARNESS,
    )
    assert stale.conflict
    run.refresh_from_db()
    assert run.revision == 9
    # (the refs name evidence this test never stored; everything else must replay clean)
    assert [f for f in audit_replay(run)[1] if f.kind != "missing_evidence"] == []
    if connection.vendor == "postgresql":  # the server holds the statement, or no new one
        held = _prepared_cas_statements()
        assert held > 0 if prepared else held == held_before


def _prepared_cas_statements() -> int:
    """How many prepared copies of the authority's statement this session's server holds."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%WITH cas AS%"],
        )
        return int(cursor.fetchone()[0])


# Payloads that the faster paths must store, hash and replay exactly as before: floats that
# orjson writes differently from ``repr``, integral floats (normalized for the hash only),
# decomposed text (NFC for the hash only), control characters, ints beyond 64 bits.
AWKWARD_PAYLOAD = {
    "tiny": 1e-06,
    "whole": 2.0,
    "big": 2**70,
    "text": "cafe\u0301 \u00c5 \U0001f600",
    "ctl": 'a\x01b\n"\\',
    "nested": {"z": [1.5, None, True], "a": {"b": -0.0}},
}


def test_awkward_payloads_are_stored_as_given_and_replay_clean(world):
    run = make_run(advance=False)
    assert _append(run, EventType.RUN_STARTED, refs={"observation": "rq"}).applied
    run.refresh_from_db()
    held = authority.append(  # the one-statement path, from the caller's row
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.OBSERVATION_RECORDED,
        actor=Actor.HARNESS,
        payload=AWKWARD_PAYLOAD,
        run=run,
    )
    assert held.applied
    read = _append(  # the authority reads the row itself
        run,
        EventType.PROPOSAL_EMITTED,
        Actor.MODEL,
        payload=AWKWARD_PAYLOAD,
        counters_delta={"turns": 1, "proposals": 1},
    )
    assert read.applied
    stored = Event.objects.filter(run=run, sequence__gte=2).order_by("sequence")
    assert [e.payload for e in stored] == [AWKWARD_PAYLOAD, AWKWARD_PAYLOAD]
    assert [type(e.payload["whole"]) for e in stored] == [float, float]
    assert [e.content_hash for e in stored] == [held.event.content_hash, read.event.content_hash]
    run.refresh_from_db()
    assert [f for f in audit_replay(run)[1] if f.kind != "missing_evidence"] == []


def test_a_payload_that_is_not_a_dict_is_stored_as_its_dict(world):
    """The payload text measured for the size check is reused for the row only for a plain
    dict; any other mapping is stored as ``dict(payload)``, as before."""
    from types import MappingProxyType

    run = make_run(advance=False)
    result = _append(
        run,
        EventType.RUN_STARTED,
        refs={"observation": "rq"},
        payload=MappingProxyType({"k": "v"}),
    )
    assert result.applied
    assert Event.objects.get(run=run, sequence=1).payload == {"k": "v"}


def test_the_snapshot_of_a_row_equals_the_constructors(world):
    """``snapshot_of`` builds the snapshot without the dataclass constructor and keeps the
    run's configuration on the row: both must give what the constructor gives."""
    from runs.domain.events import RunSnapshot

    run = make_run(advance=False)
    assert _append(run, EventType.RUN_STARTED, refs={"observation": "rq"}).applied
    run.refresh_from_db()
    expected = RunSnapshot(
        config=authority.config_of(run),
        state=run.state,
        revision=run.revision,
        attempt=run.attempt,
        owner_epoch=run.owner_epoch,
        counters=dict(run.counters),
        limits=dict(run.budget_limits),
        cancel_revision=run.cancel_revision,
        last_hash=run.last_hash,
        waiting_checkpoint=run.waiting_checkpoint,
        waiting_correlation=run.waiting_correlation,
        current_proposal=run.current_proposal,
        pending_observation=run.pending_observation,
    )
    assert authority.snapshot_of(run) == expected
    assert authority.snapshot_of(run) == expected  # from the configuration kept on the row
    run.contract_version = "fieldops-reservation@9.9.9"  # a row that shows other versions
    assert authority.snapshot_of(run).config == authority.config_of(run)


def test_event_ids_are_version_4_uuids_in_their_text_form():
    ids = {authority._new_event_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def _claimed(run):
    claim = ownership.claim(str(run.pk), "test")
    assert isinstance(claim, ownership.Claim)
    run.refresh_from_db()
    return claim


def test_evidence_offered_with_an_event_is_written_with_it_once(world):
    """The event and the evidence it references are one write; offering the same rows
    again (a retried append) writes nothing twice; the history replays clean."""
    from runs import evidence
    from runs.models import Evidence

    run = make_run(advance=False)
    claim = _claimed(run)
    made = [
        evidence.make(run_id=str(run.pk), kind="observation", content={"n": 1}),
        evidence.make(run_id=str(run.pk), kind="quarantine", content={"x": "y"}),
    ]
    refs = {"observation": made[0].id, "validation": made[1].id}
    assert not Evidence.objects.filter(pk__in=[m.id for m in made]).exists()
    started = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=claim.epoch,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="contract_valid",
        refs=refs,
        run=run,
        evidence=made,
    )
    assert started.applied
    stored = {e.pk: e for e in Evidence.objects.filter(pk__in=[m.id for m in made])}
    assert {k: (e.kind, e.content, e.content_hash) for k, e in stored.items()} == {
        m.id: (m.row.kind, m.row.content, m.row.content_hash) for m in made
    }
    again = _append(
        run,
        EventType.BUDGET_CHANGED,
        actor=Actor.OPERATOR,
        refs=refs,
        payload={"limits": {}},
        evidence=made,
    )
    assert again.applied
    assert Evidence.objects.filter(pk__in=[m.id for m in made]).count() == 2
    run.refresh_from_db()
    _, findings = audit_replay(run)
    assert findings == []


def test_evidence_offered_with_a_refused_append_is_written_with_its_control_event(world):
    """A refusal recorded as a control event carries the refs it was asked with: the
    evidence they name is written by the same statement."""
    from runs import evidence
    from runs.models import Evidence

    run = make_run(advance=False)
    made = [evidence.make(run_id=str(run.pk), kind="observation", content={"n": 2})]
    result = _append(
        run,
        EventType.COMPLETION_VERIFIED,
        refs={"completion": made[0].id},
        evidence=made,
    )
    assert not result.applied and result.refusal == "illegal_transition"
    assert result.control.payload["refs"] == {"completion": made[0].id}
    assert Evidence.objects.filter(pk=made[0].id).exists()
