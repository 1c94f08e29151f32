"""The run export is streamed (events and evidence references read through server-side
cursors and written as they are read) and is byte for byte the document the whole-list
``JsonResponse`` wrote before."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.http import JsonResponse
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from kernel import clock
from runs.console import jsonstream
from runs.models import Event, Evidence, Run
from tests.runs.console.conftest import client_for
from tests.runs.histories import long_run

pytestmark = pytest.mark.django_db


def whole_document(run: Run) -> bytes:
    """The export as it was built before streaming: every event and evidence reference in
    lists in memory, encoded at once by JsonResponse (the oracle)."""
    events = list(Event.objects.filter(run=run).order_by("sequence"))
    evidence = list(
        Evidence.objects.filter(run=run)
        .order_by("created_at", "id")
        .values("id", "kind", "content_hash", "redaction_class", "size", "created_at")
    )
    document = {
        "format": "fieldops-run-export@1",
        "exported_at": clock.iso(clock.now()),
        "run": {
            "run_id": str(run.pk),
            "task_id": run.task_id,
            "tenant": run.tenant,
            "principal_ref": run.principal_ref,
            "scenario": run.scenario,
            "state": run.state,
            "revision": run.revision,
            "attempt": run.attempt,
            "owner_epoch": run.owner_epoch,
            "contract_version": run.contract_version,
            "policy_version": run.policy_version,
            "model_adapter_version": run.model_adapter_version,
            "component_set": run.component_set,
            "components": run.components,
            "limits": run.limits,
            "budget_limits": run.budget_limits,
            "counters": run.counters,
            "cancel_revision": run.cancel_revision,
            "disposition": run.disposition,
            "terminal_reason": run.terminal_reason,
            "created_at": clock.iso(run.created_at),
        },
        "events": [
            {
                "event_id": str(e.event_id),
                "sequence": e.sequence,
                "attempt": e.attempt,
                "owner_epoch": e.owner_epoch,
                "type": e.type,
                "actor": e.actor,
                "prev_state": e.prev_state,
                "next_state": e.next_state,
                "reason_code": e.reason_code,
                "refs": e.refs,
                "payload": e.payload,
                "budget": e.budget,
                "cancel_revision": e.cancel_revision,
                "occurred_at": e.occurred_at,
                "schema_version": e.schema_version,
                "prev_hash": e.prev_hash,
                "content_hash": e.content_hash,
                "hash": e.hash,
            }
            for e in events
        ],
        "evidence_refs": [{**row, "created_at": clock.iso(row["created_at"])} for row in evidence],
    }
    return JsonResponse(document, json_dumps_params={"indent": 2}).content


@pytest.fixture
def frozen(monkeypatch: Any) -> dt.datetime:
    now = dt.datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=dt.UTC)
    monkeypatch.setattr(clock, "now", lambda: now)
    return now


def streamed(client: Any, run: Run) -> bytes:
    response = client.get(reverse("runs-export", args=[run.pk]))
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content)


def test_the_streamed_export_is_the_whole_document_byte_for_byte(
    operator: Any, waiting_run: Run, frozen: dt.datetime, monkeypatch: Any
) -> None:
    """A real run (payloads, refs, budgets as the engine wrote them) and a long history
    with control events, with pieces smaller than the lists (several per list)."""
    monkeypatch.setattr(jsonstream, "BATCH", 7)
    client = client_for(operator)
    long = long_run(130, control_at=frozenset({5, 64}))
    for run in (waiting_run, long):
        assert streamed(client, run) == whole_document(run)


def test_a_run_without_events_or_evidence_exports_empty_lists(
    operator: Any, frozen: dt.datetime
) -> None:
    run = long_run(0)
    Evidence.objects.filter(run=run).delete()
    assert streamed(client_for(operator), run) == whole_document(run)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    head=st.dictionaries(st.text(max_size=6), JSON, max_size=4),
    lists=st.lists(st.lists(JSON, max_size=4), min_size=1, max_size=3),
)
def test_a_document_in_pieces_is_json_dumps_of_the_whole(head: dict, lists: list) -> None:
    keys = [f"list-{n}" for n in range(len(lists))]
    head = {k: v for k, v in head.items() if k not in keys}
    whole = {**head, **dict(zip(keys, lists, strict=True))}
    pieces = jsonstream.document(
        {**head, **{k: [] for k in keys}}, {k: iter(v) for k, v in zip(keys, lists, strict=True)}
    )
    assert "".join(pieces) == jsonstream.dumps(whole)


def test_the_pieces_are_written_as_the_lists_are_read(world: None) -> None:
    """Nothing of a list is read before the document's head is out."""
    read: list[int] = []

    def items() -> Any:
        for n in range(3):
            read.append(n)
            yield {"n": n}

    pieces = jsonstream.document({"a": 1, "events": []}, {"events": items()})
    assert next(pieces).startswith("{") and read == []
