"""Audit replay streams a long history through a server-side cursor, verifying as it reads."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from runs.domain import replay as domain_replay
from runs.replay import audit
from tests.runs.histories import long_run

pytestmark = pytest.mark.postgres


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


def test_it_builds_stored_records_equal_to_the_constructors() -> None:
    """The fast record construction of audit replay gives exactly ``EventRecord(*fields)``."""
    import dataclasses

    from runs.domain.events import EventRecord
    from runs.replay.audit import _event_record

    fields = [f"value-{i}" for i in range(len(dataclasses.fields(EventRecord)))]
    built = _event_record(list(fields))
    assert built == EventRecord(*fields)
    assert dataclasses.astuple(built) == tuple(fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.sequence = 2  # type: ignore[misc]


def _read_ahead_threads() -> list[Any]:
    import threading

    return [t for t in threading.enumerate() if t.name == "audit-read-ahead"]


def test_a_fold_that_stops_early_ends_the_read_ahead(world):
    """A gap stops the fold in the first chunk: the thread fetching the next chunk is
    stopped and joined before the cursor closes, and the connection is usable."""
    run = long_run(1200, alter={150: {"sequence": 5000}})
    result, findings = audit.audit_replay(run, chunk=100)
    assert findings[0].kind == "gap" and result.stopped_at is not None
    assert _read_ahead_threads() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors WHERE NOT is_holdable")
        assert cursor.fetchone()[0] == 0


def test_a_failed_fetch_ahead_is_raised_to_the_caller(world, monkeypatch):
    """The read-ahead thread's failure is the replay's failure, never a short history."""
    run = long_run(600)
    fetches = {"n": 0}
    real = audit._ReadAhead._fetch

    def failing_fetch(self: Any, cursor: Any, chunk: int) -> None:
        class Flaky:
            def fetchmany(self, size: int) -> Any:
                fetches["n"] += 1
                if fetches["n"] == 3:
                    raise RuntimeError("connection lost mid-history")
                return cursor.fetchmany(size)

        real(self, Flaky(), chunk)

    monkeypatch.setattr(audit._ReadAhead, "_fetch", failing_fetch)
    with pytest.raises(RuntimeError, match="connection lost"):
        audit.audit_replay(run, chunk=100)
    assert _read_ahead_threads() == []
