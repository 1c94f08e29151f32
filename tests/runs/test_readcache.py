"""Reads cached for one advance (runs/readcache.py): a history is answered from the cache
only at the exact revision it was read or rolled to; anything else reads the database."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.db import transaction

from runs import authority, evidence, readcache
from runs.domain.states import Actor, EventType
from runs.models import Run
from tests.helpers import make_run

pytestmark = pytest.mark.django_db(transaction=True)


def _note(run: Run) -> Any:
    """A control event appended by someone else (an operator's budget change)."""
    event = authority.append_control(
        run_id=str(run.pk),
        type=EventType.BUDGET_CHANGED,
        actor=Actor.OPERATOR,
        reason_code="test",
        payload={"limits": {}},
    )
    assert event is not None
    return event


def test_a_history_is_read_once_per_revision_and_again_after_a_foreign_event(
    world: Any, django_assert_num_queries: Any
) -> None:
    run = make_run()  # waiting for approval: observations admitted, a proposal validated
    fresh = readcache.recorded_events(str(run.pk), run.revision)
    assert readcache.admitted_observation_ids(fresh)
    with readcache.scope():
        with django_assert_num_queries(1):
            first = readcache.recorded_events(str(run.pk), run.revision)
            again = readcache.recorded_events(str(run.pk), run.revision)
        assert first == again == fresh
        with django_assert_num_queries(0):
            cached_ids = evidence.admitted_observation_ids(str(run.pk), revision=run.revision)
        assert cached_ids == evidence.admitted_observation_ids(str(run.pk))
        _note(run)  # not rolled: the cache stays at the old revision
        run.refresh_from_db()
        with django_assert_num_queries(1):
            assert readcache.recorded_events(str(run.pk), run.revision) == fresh


def test_an_own_committed_event_rolls_the_cache_and_an_uncommitted_one_drops_it(
    world: Any, django_assert_num_queries: Any
) -> None:
    run = make_run()
    with readcache.scope():
        readcache.recorded_events(str(run.pk), run.revision)
        readcache.roll(_note(run))
        run.refresh_from_db()
        with django_assert_num_queries(0):
            rolled = readcache.recorded_events(str(run.pk), run.revision)
        rolled_at = run.revision
        with transaction.atomic():
            readcache.roll(_note(run))  # may still roll back: forgotten
        run.refresh_from_db()
        with django_assert_num_queries(1):
            readcache.recorded_events(str(run.pk), run.revision)
    assert rolled == readcache.recorded_events(str(run.pk), rolled_at)  # as the database has it


def test_outside_a_scope_nothing_is_cached(world: Any, django_assert_num_queries: Any) -> None:
    run = make_run()
    with django_assert_num_queries(2):
        readcache.recorded_events(str(run.pk), run.revision)
        readcache.recorded_events(str(run.pk), run.revision)


def test_what_a_decision_showed_is_known_from_own_committed_events_only(
    world: Any,
) -> None:
    run = make_run()
    reads: list[int] = []

    def read() -> str:
        reads.append(1)
        return "from the database"

    key = str(run.pk)
    with readcache.scope():
        assert readcache.latest_visible(key, run.revision, read) == "from the database"
        decision = SimpleNamespace(
            run_id=run.pk,
            sequence=run.revision + 1,
            type=EventType.PROPOSAL_EMITTED,
            payload={"visible": ("a", "b"), "n": 1},
            refs={},
        )
        readcache.roll(decision)  # type: ignore[arg-type]
        # As the JSON column reads back.
        assert readcache.latest_visible(key, run.revision + 1, read) == ["a", "b"]
        assert len(reads) == 1
        later = SimpleNamespace(**{**vars(decision), "sequence": run.revision + 2})
        later.type = EventType.BUDGET_CHANGED
        readcache.roll(later)  # type: ignore[arg-type]
        assert readcache.latest_visible(key, run.revision + 2, read) == ["a", "b"]
        assert readcache.latest_visible(key, run.revision + 3, read) == "from the database"
        gap = SimpleNamespace(**{**vars(later), "sequence": run.revision + 4})
        readcache.roll(gap)  # type: ignore[arg-type]
        assert readcache.latest_visible(key, run.revision + 2, read) == "from the database"
        with transaction.atomic():
            readcache.roll(decision)  # type: ignore[arg-type]
        assert readcache.latest_visible(key, run.revision + 1, read) == "from the database"
    assert readcache.latest_visible(key, run.revision + 1, read) == "from the database"
