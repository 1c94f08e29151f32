"""The in-memory fold in chunks returns exactly what the event-by-event fold returns.

``fast_fold`` checks whole chunks of rows with C-level operations and folds any chunk with
something to report event by event; ``fast_fold_event_by_event`` is the reference. The
histories here are legal walks of the transition table with damage done at chosen places:
illegal edges, gaps, state mismatches, counters that go down, keys that appear or
disappear, unknown states; some exactly at chunk boundaries.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runs.domain.replay import (
    FOLD_CHUNK,
    FastFold,
    _edges,
    fast_fold,
    fast_fold_event_by_event,
)
from runs.domain.states import EventType, State

KEYS = ("turns", "proposals", "actions", "elapsed_ms")
DAMAGE = (
    "type",  # another event type, the same next state: usually an illegal edge
    "next",  # another next state: the following row's prev_state no longer matches
    "retarget",  # another next state, and the following row starts from it
    "prev",  # another prev state
    "unknown_state",  # a next state that is not a State, which the following row continues
    "sequence",  # a sequence off by -1 (a repeat), +1 or +2 (gaps)
    "lower",  # a counter goes down
    "drop",  # a counter disappears
    "add",  # a counter appears
    "renew",  # every counter replaced by another set
)


def legal_history(rnd: random.Random, length: int, keys: tuple[str, ...]) -> list[tuple]:
    """A walk of the declared edges from CREATED with counters that never go down."""
    edges = _edges()
    state = State.CREATED.value
    counters = dict.fromkeys(keys, 0)
    rows = []
    for sequence in range(1, length + 1):
        etype, target = rnd.choice(sorted(edges[state].items()))
        for key in keys:
            counters[key] += rnd.choice((0, 0, 1, 3))
        rows.append((sequence, etype, state, target, dict(counters)))
        state = target
    return rows


def damage(rows: list[tuple], at: int, kind: str, rnd: random.Random) -> None:
    """Damage ``rows[at]`` (and, for some kinds, the row after it) in place."""
    sequence, etype, prev_state, next_state, budget = rows[at]
    budget = dict(budget)
    states = [s.value for s in State]
    follow = None  # the next state the following row should start from
    if kind == "type":
        etype = rnd.choice([e.value for e in EventType])
    elif kind in ("next", "retarget"):
        next_state = rnd.choice(states)
        follow = next_state if kind == "retarget" else None
    elif kind == "prev":
        prev_state = rnd.choice(states)
    elif kind == "unknown_state":
        next_state = follow = "NOT_A_STATE"
    elif kind == "sequence":
        sequence += rnd.choice((-1, 1, 2))
    elif kind == "lower" and budget:
        key = rnd.choice(sorted(budget))
        budget[key] -= rnd.choice((1, 2, 5))
    elif kind == "drop" and budget:
        del budget[rnd.choice(sorted(budget))]
    elif kind == "add":
        budget["extra"] = rnd.choice((0, 1, 7))
    elif kind == "renew":
        budget = {"other": rnd.choice((0, 4)), "more": 1}
    rows[at] = (sequence, etype, prev_state, next_state, budget)
    if follow is not None and at + 1 < len(rows):
        s, t, _, n, b = rows[at + 1]
        rows[at + 1] = (s, t, follow, n, b)


def outcome(fold, rows, **options):
    """The fold's result, or the type of the exception it raised."""
    try:
        return fold(rows, **options)
    except Exception as error:  # both folds must fail the same way
        return type(error)


def damaged_history(seed, length, keys, damages):
    rnd = random.Random(seed)
    rows = legal_history(rnd, length, keys)
    for at, kind in damages:
        if rows:
            damage(rows, at % len(rows), kind, rnd)
    return rows


@settings(max_examples=300)
@given(
    seed=st.integers(0, 2**32),
    length=st.integers(0, 40),
    keys=st.sampled_from([KEYS, KEYS[:1], (), KEYS[::-1]]),
    damages=st.lists(st.tuples(st.integers(0, 39), st.sampled_from(DAMAGE)), max_size=4),
    chunk_size=st.integers(1, 9),
)
@example(seed=0, length=0, keys=KEYS, damages=[], chunk_size=1)  # empty
def test_the_chunked_fold_returns_what_the_event_by_event_fold_returns(
    seed, length, keys, damages, chunk_size
):
    rows = damaged_history(seed, length, keys, damages)
    expected = outcome(fast_fold_event_by_event, rows)
    assert outcome(fast_fold, rows, chunk_size=chunk_size) == expected
    assert outcome(fast_fold, iter(rows), chunk_size=chunk_size) == expected


def near_chunk_boundaries():
    """Positions a row or two either side of the default size's first boundaries."""
    return st.sampled_from(
        [b + d for b in (0, FOLD_CHUNK, 2 * FOLD_CHUNK) for d in (-2, -1, 0, 1) if b + d >= 0]
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    length=st.sampled_from([FOLD_CHUNK - 1, FOLD_CHUNK, FOLD_CHUNK + 1, 2 * FOLD_CHUNK + 1]),
    damages=st.lists(st.tuples(near_chunk_boundaries(), st.sampled_from(DAMAGE)), max_size=3),
)
def test_damage_at_the_default_chunk_boundaries_is_counted_as_event_by_event(seed, length, damages):
    rows = damaged_history(seed, length, KEYS, damages)
    assert outcome(fast_fold, rows) == outcome(fast_fold_event_by_event, rows)


def test_a_clean_long_history_folds_clean_through_many_chunks():
    rows = legal_history(random.Random(7), 5 * FOLD_CHUNK + 3, KEYS)
    folded = fast_fold(rows)
    assert folded == fast_fold_event_by_event(rows)
    assert folded.problems == 0 and folded.revision == len(rows)
    assert folded.counters == rows[-1][4] and folded.state.value == rows[-1][3]


def test_problems_are_counted_one_per_edge_and_one_per_counter():
    rows = legal_history(random.Random(3), 3 * FOLD_CHUNK, KEYS)
    seq, _, prev_state, next_state, budget = rows[FOLD_CHUNK + 5]
    rows[FOLD_CHUNK + 5] = (seq, "not.an.event", prev_state, next_state, budget)
    seq, etype, prev_state, next_state, budget = rows[2 * FOLD_CHUNK]
    lowered = {**budget, "turns": -1, "actions": -1}
    rows[2 * FOLD_CHUNK] = (seq, etype, prev_state, next_state, lowered)
    # The row after the lowered one is compared with it: no counter is lower there.
    assert fast_fold(rows).problems == 1 + 2
    assert fast_fold(rows) == fast_fold_event_by_event(rows)


def test_the_fold_stops_at_the_first_gap_without_reading_the_rest():
    rows = legal_history(random.Random(5), 10, KEYS)
    read = []

    def endless():
        for row in itertools.chain(rows[:4], rows[5:], itertools.repeat(rows[-1])):
            read.append(row)
            yield row

    folded = fast_fold(endless(), chunk_size=8)
    assert folded == FastFold(state=State(rows[3][3]), revision=4, counters=rows[3][4], problems=1)
    assert len(read) <= 2 * 8  # the chunk with the gap and the one before it, no more


def test_an_empty_history_is_the_initial_fold():
    assert fast_fold([]) == fast_fold_event_by_event([]) == FastFold()


def test_a_chunk_size_below_one_is_refused():
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        fast_fold([], chunk_size=0)
