"""Riding out compare-and-set races: one helper, with a named bound, that says when it gave up.

A writer that lost a race (someone appended first) re-reads and decides again; it must not
loop forever against a run that keeps changing, and it must not give up silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger("fieldops.retry")

T = TypeVar("T")

# How many lost races one write rides out before it reports the run as busy.
RACE_RETRIES = 20


@dataclass(frozen=True)
class Exhausted:
    """``until_settled`` gave up: every one of ``tries`` attempts lost its race (falsy)."""

    what: str
    tries: int

    def __bool__(self) -> bool:
        return False


def until_settled(
    attempt: Callable[[], T | None], *, what: str, bound: int = RACE_RETRIES
) -> T | Exhausted:
    """Call ``attempt`` until it returns a result; ``None`` means it lost a race and must
    re-read. After ``bound`` lost races return ``Exhausted`` (and log it)."""
    for _ in range(bound):
        result = attempt()
        if result is not None:
            return result
    log.warning("gave up after %d lost races: %s", bound, what)
    return Exhausted(what, bound)
