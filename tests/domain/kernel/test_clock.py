"""The clock: one process-wide offset for tests, and a scripted one for one thread only."""

from __future__ import annotations

import datetime as dt
import threading

from kernel import clock


def test_at_least_moves_the_clock_for_this_thread_only_and_only_inside_the_block() -> None:
    later = clock.now() + dt.timedelta(days=3)
    seen_elsewhere: list[dt.datetime] = []
    with clock.at_least(later):
        assert clock.now() >= later
        other = threading.Thread(target=lambda: seen_elsewhere.append(clock.now()))
        other.start()
        other.join()
    assert seen_elsewhere[0] < later - dt.timedelta(days=2)  # another thread: the real clock
    assert clock.now() < later - dt.timedelta(days=2)  # after the block: the real clock


def test_at_least_never_moves_the_clock_back() -> None:
    before = clock.now()
    with clock.at_least(before - dt.timedelta(hours=1)):
        assert clock.now() >= before
