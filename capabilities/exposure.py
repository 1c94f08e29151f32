"""Exposure policy and retrieval (SPEC §9): registry -> eligible -> retrieved -> visible.

The registry is everything the catalog holds. The exposure policy of the run's current
phase narrows it by lifecycle, family, maximum effect class and reach (open world). A
retrieval stage keeps the top ``k`` ordinary capabilities for the goal. Trusted control
outcomes come from local configuration: they are always visible and never consume ``k``.

Hiding a capability is not security: every proposal still crosses validation. This
module only decides what a policy is *invited* to choose, and records why.

Pure module: standard library only.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from capabilities.contracts import EffectClass, effect_at_most

CONTROL_FAMILY = "control"
POLICY_VERSION = "exposure-policy@1"

# Lifecycle states in which an admission still holds. A DEPRECATED version stays visible
# to runs already pinned to it (compatible work drains); it never enters new runs.
ADMITTED_STATES = frozenset({"ADMITTED", "DEPRECATED"})


class Phase(StrEnum):
    DIAGNOSE = "diagnose"  # nothing known yet: equipment and manuals
    SOURCE = "source"  # a compatible part is known: inventory and an exact proposal
    COMMIT = "commit"  # an exact proposal exists: the approval-gated effect


@dataclass(frozen=True)
class ExposurePolicy:
    allowed_families: frozenset[str]
    max_effect: EffectClass
    allow_open_world: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "allowed_families": sorted(self.allowed_families),
            "max_effect": self.max_effect.value,
            "allow_open_world": self.allow_open_world,
        }


_WORK = frozenset({"equipment", "manuals", "inventory", "reservation"})

PHASE_POLICIES: Mapping[Phase, ExposurePolicy] = {
    Phase.DIAGNOSE: ExposurePolicy(frozenset({"equipment", "manuals"}), EffectClass.READ),
    Phase.SOURCE: ExposurePolicy(_WORK, EffectClass.LOCAL_TRANSFORMATION),
    Phase.COMMIT: ExposurePolicy(_WORK, EffectClass.CONSEQUENTIAL),
}


def phase_for(observed: Iterable[str]) -> Phase:
    """Return the phase implied by the capabilities that produced admitted (ok) evidence.

    The phase is a function of trusted run state only, never of model output.
    """
    seen = frozenset(observed)
    if "propose_reservation" in seen:
        return Phase.COMMIT
    if "search_manual" in seen:
        return Phase.SOURCE
    return Phase.DIAGNOSE


@dataclass(frozen=True)
class Candidate:
    """One registry entry as exposure sees it.

    ``pinned``: the run pinned this exact version (a run only ever sees what it pinned).
    ``drift``: the catalog's digest disagrees with the run's pin. ``contract``: a local
    reviewed contract exists (discovered definitions have none and are never exposed).
    """

    id: str
    version: str
    family: str
    effect: EffectClass
    lifecycle: str
    purpose: str
    use_when: tuple[str, ...] = ()
    avoid_when: tuple[str, ...] = ()
    open_world: bool = False
    pinned: bool = True
    drift: bool = False
    contract: bool = True

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"


@dataclass(frozen=True)
class Funnel:
    """What existed, what was eligible, retrieved and visible, and why each was not."""

    phase: str
    policy: ExposurePolicy
    k: int | None
    existed: tuple[str, ...]
    eligible: tuple[str, ...]
    retrieved: tuple[str, ...]
    controls: tuple[str, ...]
    reasons: Mapping[str, str]
    scores: Mapping[str, float] = field(default_factory=dict)

    @property
    def visible(self) -> tuple[str, ...]:
        """Trusted controls plus retrieved ordinary capabilities, sorted by id."""
        return tuple(sorted({*self.controls, *self.retrieved}))

    def as_record(self, *, max_existed: int = 100) -> dict[str, Any]:
        """The JSON record stored on a decision event (bounded in size)."""
        return {
            "policy_version": POLICY_VERSION,
            "phase": self.phase,
            "policy": self.policy.as_dict(),
            "k": self.k,
            "existed": list(self.existed[:max_existed]),
            "existed_count": len(self.existed),
            "eligible": list(self.eligible),
            "retrieved": list(self.retrieved),
            "controls": list(self.controls),
            "visible": list(self.visible),
            "excluded": {ref: self.reasons[ref] for ref in list(self.reasons)[:max_existed]},
            # Retrieval scores in ten-thousandths: events carry integers, never floats
            # (an integral float would be normalized before hashing; integers never are).
            "scores_e4": {cid: round(s * 10_000) for cid, s in self.scores.items()},
        }


def exclusion(c: Candidate, policy: ExposurePolicy, phase: str) -> str | None:
    """Return why ``c`` is not eligible under ``policy`` (None when it is eligible)."""
    if not c.contract:
        return "discovered definition without a local reviewed contract: never exposed"
    if c.lifecycle not in ADMITTED_STATES:
        return f"{c.lifecycle}: only admitted versions reach a model context"
    if not c.pinned:
        return "not pinned by this run"
    if c.drift:
        return "catalog digest disagrees with the run's pin (drift)"
    if c.family not in policy.allowed_families:
        return f"family {c.family!r} is not exposed in phase {phase}"
    if not effect_at_most(c.effect, policy.max_effect):
        return f"effect {c.effect.value} is above the {phase} ceiling {policy.max_effect.value}"
    if c.open_world and not policy.allow_open_world:
        return f"open-world reach is not allowed in phase {phase}"
    return None


def expose(
    candidates: Sequence[Candidate],
    policy: ExposurePolicy,
    *,
    phase: str,
    query: str,
    k: int | None,
    trusted_controls: frozenset[str],
) -> Funnel:
    """Run the funnel. Raise ValueError if a trusted control is not a safe control.

    A candidate is a trusted control only when its id is in ``trusted_controls`` (local
    configuration): a remote tool cannot make itself permanently visible by calling its
    family "control". Controls are visible in every phase and are not retrieved.
    """
    if k is not None and k < 0:
        raise ValueError("k must be >= 0")
    reasons: dict[str, str] = {}
    controls: list[str] = []
    eligible: list[Candidate] = []
    for c in candidates:
        if c.id in trusted_controls and c.contract:
            if c.family != CONTROL_FAMILY or c.effect is not EffectClass.NONE or c.open_world:
                raise ValueError(f"invalid trusted control capability: {c.ref}")
            if c.lifecycle in ADMITTED_STATES and c.pinned and not c.drift:
                controls.append(c.id)
                continue
        why = exclusion(c, policy, phase)
        if why is None and c.family == CONTROL_FAMILY:
            why = "claims the control family but is not a trusted local control"
        if why is None:
            eligible.append(c)
        else:
            reasons[c.ref] = why
    scores = lexical_scores(query, eligible)
    ranked = sorted(eligible, key=lambda c: (-scores[c.id], c.id))
    kept = ranked if k is None else ranked[:k]
    for rank, c in enumerate(ranked):
        if k is not None and rank >= k:
            reasons[c.ref] = f"outside the top {k} for this goal (score {scores[c.id]:.3f})"
    return Funnel(
        phase=phase,
        policy=policy,
        k=k,
        existed=tuple(sorted(c.ref for c in candidates)),
        eligible=tuple(sorted(c.id for c in eligible)),
        retrieved=tuple(sorted(c.id for c in kept)),
        controls=tuple(sorted(set(controls))),
        reasons=dict(sorted(reasons.items())),
        scores={c.id: scores[c.id] for c in ranked},
    )


# -- lexical scoring (retrieval, and the simple selector of the routing evaluation) -----
_TOKEN = re.compile(r"[a-z0-9]+")
_STOP_TEXT = """a an and are as at be by for from has have if in into is it its no not of on one
or only the this to use used when with yet which what who"""
STOPWORDS = frozenset(_STOP_TEXT.split())


def tokens(text: str) -> list[str]:
    """Lower-case word tokens without stopwords; a light plural fold ("parts" -> "part")."""
    return list(_tokens(text))


@functools.lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[str, ...]:
    # Remembered: every decision scores the same catalog descriptions and goal again.
    out = []
    for word in _TOKEN.findall(text.lower().replace("_", " ")):
        if word in STOPWORDS or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return tuple(out)


def positive_text(c: Candidate) -> str:
    return " ".join((c.id, c.purpose, *c.use_when))


def lexical_scores(query: str, candidates: Sequence[Candidate]) -> dict[str, float]:
    """Return an idf-weighted overlap of ``query`` with each candidate's description.

    Words of the name, purpose and use-when count for a candidate; words of its
    avoid-when count against it at half weight (a discriminative description says when
    a neighbour should win). Scores are comparable only within one call.
    """
    wanted = set(_tokens(query))
    docs = {c.id: set(_tokens(positive_text(c))) for c in candidates}
    n = len(candidates)
    df: dict[str, int] = {}
    for words in docs.values():
        for w in words:
            df[w] = df.get(w, 0) + 1

    def idf(word: str) -> float:
        return math.log(1 + (n + 1) / (df.get(word, 0) + 1))

    scores = {}
    for c in candidates:
        against = set(_tokens(" ".join(c.avoid_when))) - docs[c.id]
        gain = sum(idf(w) for w in wanted & docs[c.id])
        loss = 0.5 * sum(idf(w) for w in wanted & against)
        scores[c.id] = gain - loss
    return scores
