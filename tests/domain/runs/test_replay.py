"""Audit replay reproduces the run and reports the first thing that does not hold."""

from __future__ import annotations

import dataclasses

from runs.domain.replay import compare_with_stored, fast_fold, replay
from runs.domain.states import EventType, State

from .factory import CONFIG, HAPPY, chain


def test_replay_reproduces_state_counters_and_disposition():
    final, events = chain(HAPPY)
    result = replay(CONFIG, events)
    assert result.ok
    assert result.snapshot.state is State.COMPLETED
    assert result.snapshot.counters == final.counters
    assert result.snapshot.disposition == "COMPLETED"
    assert result.events_applied == len(HAPPY)


def test_replay_reproduces_waits():
    _, events = chain(HAPPY[:8])
    result = replay(CONFIG, events)
    assert result.snapshot.state is State.WAITING_HUMAN
    assert result.snapshot.waiting_checkpoint == "cp-1"


def test_a_removed_event_is_a_gap_and_is_not_invented():
    _, events = chain(HAPPY)
    result = replay(CONFIG, events[:4] + events[5:])
    assert [f.kind for f in result.findings][:1] == ["gap"]
    assert result.findings[0].sequence == 6
    assert result.events_applied == 4
    assert result.snapshot.revision == 4


def test_an_identical_duplicate_is_reported_and_skipped():
    _, events = chain(HAPPY)
    result = replay(CONFIG, [*events[:3], events[2], *events[3:]])
    assert [f.kind for f in result.findings] == ["duplicate_sequence"]
    assert result.snapshot.state is State.COMPLETED


def test_a_conflicting_sequence_stops_replay():
    _, events = chain(HAPPY)
    other = dataclasses.replace(
        events[3], type=EventType.PROPOSAL_DENIED, next_state=State.DECIDING, content_hash="x"
    )
    result = replay(CONFIG, [*events[:4], other, *events[4:]])
    assert result.findings[0].kind == "conflicting_sequence"
    assert result.stopped_at == 4


def test_an_illegal_edge_is_reported():
    _, events = chain(HAPPY[:3])
    bad = dataclasses.replace(
        events[2], type=EventType.COMPLETION_VERIFIED, next_state=State.COMPLETED
    )
    result = replay(CONFIG, [*events[:2], bad])
    assert "illegal_edge" in [f.kind for f in result.findings]
    assert result.snapshot.state is State.DECIDING


def test_a_decreased_counter_is_reported():
    _, events = chain(HAPPY)
    lowered = dataclasses.replace(events[5], budget={**events[5].budget, "turns": 0})
    kinds = [f.kind for f in replay(CONFIG, [*events[:5], lowered, *events[6:]]).findings]
    assert "decreasing_counter" in kinds


def test_a_one_byte_change_breaks_the_hash_chain():
    _, events = chain(HAPPY)
    altered = dataclasses.replace(events[6], reason_code=events[6].reason_code + "x")
    findings = replay(CONFIG, [*events[:6], altered, *events[7:]]).findings
    assert findings[0].kind == "broken_hash_link" and findings[0].sequence == 7


def test_a_changed_timestamp_breaks_the_link_too():
    _, events = chain(HAPPY)
    altered = dataclasses.replace(events[2], occurred_at="2026-11-30T10:00:02+00:01")
    assert replay(CONFIG, [*events[:2], altered, *events[3:]]).findings[0].kind == (
        "broken_hash_link"
    )


def test_a_changed_config_breaks_the_first_link():
    _, events = chain(HAPPY)
    tampered = dataclasses.replace(CONFIG, tenant="south")
    assert replay(tampered, events).findings[0].kind == "broken_hash_link"


def test_missing_evidence_is_reported_but_state_still_reconstructed():
    _, events = chain(HAPPY)
    result = replay(CONFIG, events, evidence_ids=frozenset())
    assert "missing_evidence" in {f.kind for f in result.findings}
    assert not result.evidence_complete
    assert result.snapshot.state is State.COMPLETED


def test_an_unknown_schema_version_is_quarantined_not_guessed():
    _, events = chain(HAPPY)
    future = dataclasses.replace(events[3], schema_version=99)
    result = replay(CONFIG, [*events[:3], future, *events[4:]])
    assert result.findings[0].kind == "quarantined_version"
    assert result.events_applied == 3


def test_compare_with_stored_reports_disagreements():
    _, events = chain(HAPPY)
    result = replay(CONFIG, events)
    assert compare_with_stored(result, {"state": "COMPLETED"}) == []
    found = compare_with_stored(result, {"state": "FAILED"})
    assert found and found[0].kind == "snapshot_mismatch"


def test_fast_fold_agrees_on_state_and_flags_problems():
    _, events = chain(HAPPY)
    rows = [
        (e.sequence, e.type.value, e.prev_state.value, e.next_state.value, e.budget) for e in events
    ]
    folded = fast_fold(rows)
    assert folded.state is State.COMPLETED and folded.problems == 0
    rows[5] = (6, "completion.verified", rows[5][2], "COMPLETED", rows[5][4])
    assert fast_fold(rows).problems > 0
