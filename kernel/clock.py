"""The seeded clock. Production reads the wall clock; tests move it forward in-process.

Every module that needs "now" for a governed decision (freshness, expiry, deadlines)
reads it here, so a test can make an approval wait "long" without sleeping.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_offset = dt.timedelta(0)
# A further offset for one thread or task only: the execution simulation's scripted clock.
_local_offset: contextvars.ContextVar[dt.timedelta] = contextvars.ContextVar(
    "fieldops_clock_local_offset", default=dt.timedelta(0)
)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) + _offset + _local_offset.get()


@contextlib.contextmanager
def at_least(moment: dt.datetime) -> Iterator[None]:
    """Inside the block, and for this thread or task only, ``now()`` is ``moment`` or later.

    The execution simulation replays a recorded expiry with it; requests served at the
    same time by other threads keep the real clock.
    """
    ahead = max(moment - now(), dt.timedelta(0))
    token = _local_offset.set(_local_offset.get() + ahead)
    try:
        yield
    finally:
        _local_offset.reset(token)


def advance(seconds: float) -> None:
    """Move this process's clock forward (tests and the fault lab only)."""
    global _offset
    with _lock:
        _offset += dt.timedelta(seconds=seconds)


def reset() -> None:
    global _offset
    with _lock:
        _offset = dt.timedelta(0)


def iso(moment: dt.datetime) -> str:
    if moment.tzinfo is dt.UTC:  # what ``now()`` returns: no conversion to make
        return moment.isoformat(timespec="microseconds")
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
