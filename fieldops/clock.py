"""The seeded clock. Production reads the wall clock; tests move it forward in-process.

Every module that needs "now" for a governed decision (freshness, expiry, deadlines)
reads it here, so a test can make an approval wait "long" without sleeping.
"""

from __future__ import annotations

import datetime as dt
import threading

_lock = threading.Lock()
_offset = dt.timedelta(0)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) + _offset


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
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")


def parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
