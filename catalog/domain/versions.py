"""What a capability version's lifecycle state means for runs (SPEC §3): the dispatch rule.

One table says, for every state, whether a new run may pin the version, whether runs
already pinned to it are served, and what every console page shows as its dispatch
status. The pinning rule (newest ADMITTED version with an adapter) and the retirement
rule (when a second catalog admin must confirm) live here too; ``docs/versions.md`` is
rendered from this module.

Pure module: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from capabilities.contracts import version_key
from catalog.domain.lifecycle import State


@dataclass(frozen=True)
class VersionRule:
    """The consequence of one lifecycle state for runs."""

    state: State
    new_runs: bool  # a new run may pin it (when it is the newest such version)
    pinned_runs: bool  # runs already pinned to it keep dispatching it
    meaning: str


VERSION_RULES: Mapping[State, VersionRule] = {
    State.DISCOVERED: VersionRule(
        State.DISCOVERED, False, False, "a candidate: no run pins it, nothing dispatches it"
    ),
    State.DEFERRED: VersionRule(
        State.DEFERRED, False, False, "a postponed candidate: no run pins it"
    ),
    State.ADMITTED: VersionRule(
        State.ADMITTED,
        True,
        True,
        "new runs pin the newest admitted version; runs pinned to it dispatch it",
    ),
    State.DEPRECATED: VersionRule(
        State.DEPRECATED,
        False,
        True,
        "serves runs already pinned to it until they end; offered to no new run",
    ),
    State.RETIRED: VersionRule(
        State.RETIRED,
        False,
        False,
        "dispatches nothing: a run pinned to it is refused (capability_retired) and cannot "
        "regain it; its unknown effects stay owned and reconcilable",
    ),
    State.REJECTED: VersionRule(
        State.REJECTED, False, False, "refused for good: never pinned, never dispatched"
    ),
}

# The second-person rule for retirement: retiring needs a second catalog admin and an
# explicit acknowledgement when any of these holds (see ``retirement_risks``).
RETIREMENT_RISKS: Mapping[str, str] = {
    "consequential": "the capability has a consequential external effect",
    "no_successor": "no other admitted version with an adapter would serve new runs",
    "pinned_runs": "runs that have not ended are pinned to this version",
    "unknown_effects": "effects of runs pinned to this version are still unknown",
}


def rule_for(lifecycle: str) -> VersionRule:
    """The rule of ``lifecycle``; an unknown state serves nothing (raise nothing)."""
    try:
        return VERSION_RULES[State(lifecycle)]
    except ValueError:
        return VersionRule(State.DISCOVERED, False, False, f"unknown state {lifecycle!r}")


@dataclass(frozen=True)
class Offer:
    """A stored version a new run might pin."""

    capability_id: str
    version: str
    digest: str
    lifecycle: str


def newest_admitted(offers: Iterable[Offer]) -> dict[str, Offer]:
    """Per capability id, the newest version a new run may pin (semantic-version order)."""
    best: dict[str, Offer] = {}
    for offer in offers:
        if not rule_for(offer.lifecycle).new_runs:
            continue
        held = best.get(offer.capability_id)
        if held is None or version_key(offer.version) > version_key(held.version):
            best[offer.capability_id] = offer
    return best


@dataclass(frozen=True)
class DispatchStatus:
    """What a page says about whether (and for whom) a version runs."""

    code: str  # new_and_pinned_runs | pinned_runs_only | nothing
    answer: str  # "yes", "no", "pinned runs only"
    why: str  # "deprecated, no new run"

    @property
    def dispatches(self) -> bool:
        return self.code != "nothing"

    @property
    def label(self) -> str:
        return f"{self.answer}: {self.why}"


def dispatch_status(*, lifecycle: str, has_adapter: bool, newest: bool) -> DispatchStatus:
    """The true dispatch status of one version.

    ``has_adapter``: the code implements exactly this version. ``newest``: it is the
    version new runs pin now (the newest admitted one with an adapter).
    """
    rule = rule_for(lifecycle)
    if not has_adapter:
        return DispatchStatus("nothing", "no", "no adapter in code implements this version")
    if rule.new_runs and newest:
        return DispatchStatus("new_and_pinned_runs", "yes", "new runs pin it; pinned runs run it")
    if rule.new_runs:
        return DispatchStatus(
            "pinned_runs_only", "pinned runs only", "a newer admitted version is what new runs pin"
        )
    if rule.pinned_runs:
        return DispatchStatus("pinned_runs_only", "pinned runs only", "deprecated, no new run")
    return DispatchStatus("nothing", "no", f"{lifecycle.lower()} ({rule.meaning})")


def retirement_risks(
    *, consequential: bool, successor: str, pinned_runs: int, unknown_effects: int
) -> list[str]:
    """The reasons (keys of ``RETIREMENT_RISKS``) why this retirement needs two people."""
    risks = []
    if consequential:
        risks.append("consequential")
    if not successor:
        risks.append("no_successor")
    if pinned_runs:
        risks.append("pinned_runs")
    if unknown_effects:
        risks.append("unknown_effects")
    return risks
