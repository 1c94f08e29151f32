"""Audit replay streams a long history through a server-side cursor, verifying as it reads."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import connection

from kernel import clock
from runs import event_rows, services
from runs.authority import snapshot_of
from runs.domain import replay as domain_replay
from runs.domain.events import apply, build_event
from runs.domain.states import Actor, EventType, State
from runs.models import Event, Evidence, Run
from runs.replay import audit

pytestmark = pytest.mark.postgres

CYCLE = (
    (EventType.OBSERVATION_RECORDED, Actor.HARNESS, State.DECIDING, None),
    (EventType.PROPOSAL_EMITTED, Actor.MODEL, State.VALIDATING, {"turns": 1, "proposals": 1}),
    (EventType.PROPOSAL_ALLOWED, Actor.HARNESS, State.EXECUTING, {"actions": 1}),
    (EventType.OBSERVATION_RECEIVED, Actor.CAPABILITY_ADAPTER, State.OBSERVING, None),
)


def long_run(count: int, alter: dict[int, dict[str, Any]] | None = None) -> Run:
    """A run with a valid, hash-linked history of ``count`` events, every reference to
    evidence stored for it (one evidence row per 50 events: each chunk looks its own up).
    ``alter``: stored columns to change, by sequence, after the event was built (the
    table is append-only, so a corrupt row is stored corrupt)."""
    run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref="user:operator",
        limits={"turns": 10**6, "proposals": 10**6, "actions": 10**6},
        start=False,
    )
    now = clock.now()
    evidence_ids = [f"ev-{uuid.uuid4().hex[:20]}" for _ in range(count // 50 + 1)]
    Evidence.objects.bulk_create(
        Evidence(
            id=i,
            run=run,
            kind="observation",
            content={"n": n},
            content_hash="0" * 64,
            size=8,
            created_at=now,
        )
        for n, i in enumerate(evidence_ids)
    )
    snapshot = snapshot_of(run)
    rows = []
    for i in range(count):
        if i == 0:
            etype, actor, target, delta = (
                EventType.RUN_STARTED,
                Actor.HARNESS,
                State.OBSERVING,
                None,
            )
            refs = {"observation": f"rq-{run.pk.hex[:20]}"}  # stored by run_create
        else:
            etype, actor, target, delta = CYCLE[(i - 1) % 4]
            refs = {"observation": evidence_ids[i // 50]}
        event = build_event(
            snapshot,
            event_id=str(uuid.uuid4()),
            type=etype,
            actor=actor,
            next_state=target,
            occurred_at=clock.iso(run.created_at + dt.timedelta(milliseconds=i + 1)),
            counters_delta=delta,
            elapsed_ms=i + 1,
            reason_code="ok",
            refs=refs,
            payload={"i": i},
        )
        snapshot = apply(snapshot, event)
        rows.append(Event(**{**event_rows.model_fields(event), **(alter or {}).get(i + 1, {})}))
    Event.objects.bulk_create(rows, batch_size=1000)
    Run.objects.filter(pk=run.pk).update(**event_rows.run_state(snapshot), updated_at=clock.now())
    run.refresh_from_db()
    return run


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Counts rows decoded and events folded; samples the open server-side cursors."""
    seen: dict[str, Any] = {"decoded": 0, "folded": 0, "ahead": 0, "cursors": None}
    record, fold = audit._record, domain_replay.apply

    def counted_record(run_id: str, row: tuple[Any, ...]) -> Any:
        seen["decoded"] += 1
        return record(run_id, row)

    def counted_apply(snapshot: Any, event: Any) -> Any:
        seen["folded"] += 1
        seen["ahead"] = max(seen["ahead"], seen["decoded"] - seen["folded"])
        if seen["folded"] == 500:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_cursors WHERE NOT is_holdable")
                seen["cursors"] = cursor.fetchone()[0]
        return fold(snapshot, event)

    monkeypatch.setattr(audit, "_record", counted_record)
    monkeypatch.setattr(domain_replay, "apply", counted_apply)
    return seen


def test_a_long_history_replays_clean_one_chunk_at_a_time(world, watched):
    run = long_run(3000)
    result, findings = audit.audit_replay(run, chunk=100)
    assert findings == [] and result.events_applied == 3000
    assert result.snapshot.revision == 3000 and result.evidence_complete
    # Streamed: never more than one chunk decoded ahead of the fold, through a named
    # (server-side) cursor open while the fold runs.
    assert watched["decoded"] == 3000
    assert watched["ahead"] <= 100
    assert watched["cursors"] == 1


def test_a_tampered_event_deep_in_the_history_is_found_where_it_is(world):
    run = long_run(1200, alter={1001: {"payload": {"i": "tampered"}}})
    _, findings = audit.audit_replay(run, chunk=100)
    assert findings and findings[0].sequence == 1001
    assert findings[0].kind == "broken_hash_link"


def test_missing_evidence_is_found_in_a_later_chunk(world):
    run = long_run(1200, alter={1101: {"refs": {"observation": "ev-gone"}}})
    _, findings = audit.audit_replay(run, chunk=100)
    kinds = {f.kind for f in findings}
    assert "missing_evidence" in kinds
    assert [f.sequence for f in findings if f.kind == "missing_evidence"] == [1101]


def test_an_undecodable_row_stops_the_stream_with_a_finding(world):
    run = long_run(600, alter={450: {"type": "no.such.type"}})
    result, findings = audit.audit_replay(run, chunk=100)
    assert result.events_applied == 449
    assert [f.kind for f in findings if f.kind == "undecodable_event"] == ["undecodable_event"]
