"""Values a decision derives again at every turn, made once (issue 21, end-to-end CPU): the
model projection of a contract, the context's observations and its canonical text give
exactly what making them afresh gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capabilities import registry
from capabilities.contracts import _model_projection, model_projection
from kernel.canonical import canonical_json
from runs import readcache
from runs.domain.states import EventType
from runs.engine import context, inputs
from runs.models import Event, Evidence, Run
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_model_projection_is_a_fresh_equal_value_at_every_call() -> None:
    for contract in registry.ALL_CONTRACTS.values():
        made = _model_projection(contract)
        first, second = model_projection(contract), model_projection(contract)
        assert repr(first) == repr(made) == repr(second)  # key order and types too
        assert first is not second and first["input_schema"] is not second["input_schema"]


def test_a_context_built_twice_in_one_advance_is_the_same(world: None) -> None:
    run = make_run()  # waiting for its approval: four observations admitted
    with readcache.scope():
        first = context.build(run)
        second = context.build(run)
    outside = context.build(run)
    assert repr(first) == repr(second) == repr(outside)
    assert first["observations"] and first["observations"][0] is not second["observations"][0]
    text = context.projection_text(first)
    assert text == canonical_json(json.loads(json.dumps(first)))
    assert context.text_hash(text) == context.projection_hash(first)


def test_each_decision_records_the_hash_of_the_context_it_stored(
    world: None, approver: Any
) -> None:
    run = make_run()
    approve(run, approver)
    assert Run.objects.get(pk=run.pk).state == "COMPLETED"
    decisions = Event.objects.filter(run=run, type=EventType.PROPOSAL_EMITTED.value)
    assert decisions.count() >= 5
    for event in decisions:
        stored = Evidence.objects.get(pk=event.refs["observation"])
        assert stored.kind == "context"
        assert stored.content_hash == event.payload["context_hash"]
        assert canonical_json(stored.content) == context.projection_text(stored.content)


def test_validation_sees_the_decision_the_database_holds(
    world: None, approver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[Any, Any]] = []
    remembered = inputs.decision_visible

    def both(run: Run) -> Any:
        from_cache = remembered(run)
        outside = readcache._ACTIVE.set(None)  # no advance's reads: the database's answer
        try:
            seen.append((from_cache, remembered(run)))
        finally:
            readcache._ACTIVE.reset(outside)
        return from_cache

    monkeypatch.setattr(inputs, "decision_visible", both)
    run = make_run()
    approve(run, approver)
    assert Run.objects.get(pk=run.pk).state == "COMPLETED"
    assert len(seen) >= 5 and all(a == b and a for a, b in seen)
