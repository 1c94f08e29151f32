"""Exposure differences for decision replay: what a recorded decision was shown against
what today's exposure policy and catalog would show the same context.

A decision event records the capabilities its context made visible; a run records, once,
the version it pinned per capability. Replay re-derives the visible set from the current
catalog (lifecycle, digests) and the current phase policies, and compares. A run never
switches version, so a pin that differs from what a new run would pin today is reported,
never applied.

Pure module: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class VisibleDifference:
    """One decision: the recorded visible set against the one re-derived today."""

    recorded: tuple[str, ...]
    current: tuple[str, ...]
    recorded_phase: str = ""
    current_phase: str = ""
    # Why each removed capability is no longer shown (the current funnel's reason).
    why_removed: Mapping[str, str] = field(default_factory=dict)
    known: bool = True  # False when the decision recorded no visible set

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.current) - set(self.recorded)))

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.recorded) - set(self.current)))

    @property
    def same(self) -> bool:
        return not self.known or (not self.added and not self.removed)

    def summary(self) -> str:
        if not self.known:
            return "no visible set recorded"
        if self.same:
            return "same visible set"
        parts = [f"+{c}" for c in self.added] + [f"-{c}" for c in self.removed]
        return " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "known": self.known,
            "recorded": list(self.recorded),
            "current": list(self.current),
            "added": list(self.added),
            "removed": list(self.removed),
            "why_removed": dict(self.why_removed),
            "recorded_phase": self.recorded_phase,
            "current_phase": self.current_phase,
        }


def visible_difference(
    recorded: Iterable[str] | None,
    current: Iterable[str],
    *,
    reasons: Mapping[str, str],
    recorded_phase: str = "",
    current_phase: str = "",
) -> VisibleDifference:
    """Compare a decision's recorded visible set (None: not recorded) with ``current``.

    ``reasons`` are the current funnel's exclusions by ref (``id@version``); a removed
    capability is explained by the reason of its ref (the first, when several versions).
    """
    now = tuple(sorted(set(current)))
    if recorded is None:
        return VisibleDifference((), now, recorded_phase, current_phase, {}, known=False)
    before = tuple(sorted(set(recorded)))
    gone = sorted(set(before) - set(now))
    why = {
        cid: next((r for ref, r in sorted(reasons.items()) if ref.split("@")[0] == cid), "")
        or "not in the current catalog"
        for cid in gone
    }
    return VisibleDifference(before, now, recorded_phase, current_phase, why)


@dataclass(frozen=True)
class PinDifference:
    """A capability whose version the run pinned is not what a new run would pin today."""

    capability: str
    pinned: str  # the run's pin, ``version#digest`` ("" when the run pinned none)
    now: str  # what a new run would pin today ("" when no version would be pinned)
    pinned_lifecycle: str = ""  # the catalog's lifecycle of the pinned version today

    def summary(self) -> str:
        pinned = self.pinned.split("#")[0] or "none"
        now = self.now.split("#")[0] or "none"
        state = f" ({self.pinned_lifecycle})" if self.pinned_lifecycle else ""
        return f"{self.capability}: pinned {pinned}{state}, a new run would pin {now}"

    def as_dict(self) -> dict[str, str]:
        return {
            "capability": self.capability,
            "pinned": self.pinned,
            "now": self.now,
            "pinned_lifecycle": self.pinned_lifecycle,
            "summary": self.summary(),
        }


def pin_differences(
    pinned: Mapping[str, str],
    now: Mapping[str, str],
    *,
    lifecycles: Mapping[str, str],
) -> tuple[PinDifference, ...]:
    """Capabilities whose run pin (``version#digest``) differs from today's pin.

    ``lifecycles`` maps ``id@version`` to the catalog lifecycle of that version today.
    """
    out = []
    for cid in sorted(set(pinned) | set(now)):
        a, b = pinned.get(cid, ""), now.get(cid, "")
        if a == b:
            continue
        state = lifecycles.get(f"{cid}@{a.split('#')[0]}", "") if a else ""
        out.append(PinDifference(cid, a, b, state))
    return tuple(out)
