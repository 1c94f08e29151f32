"""Capability version lifecycle (SPEC §3): the legal steps and the admission rules.

DISCOVERED -> ADMITTED -> DEPRECATED -> RETIRED, or REJECTED / DEFERRED. Every absent
step is refused; REJECTED and RETIRED are final: a remembered or rediscovered name cannot
resurrect authority.

Pure module: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from capabilities.contracts import EffectClass
from kernel.text import bidi_control_refusal, shows_nothing


class State(StrEnum):
    DISCOVERED = "DISCOVERED"
    ADMITTED = "ADMITTED"
    DEPRECATED = "DEPRECATED"
    RETIRED = "RETIRED"
    REJECTED = "REJECTED"
    DEFERRED = "DEFERRED"


class Action(StrEnum):
    ADMIT = "admit"
    REJECT = "reject"
    DEFER = "defer"
    DEPRECATE = "deprecate"
    RETIRE = "retire"


LIFECYCLE_STEPS: Mapping[tuple[State, Action], State] = {
    (State.DISCOVERED, Action.ADMIT): State.ADMITTED,
    (State.DISCOVERED, Action.REJECT): State.REJECTED,
    (State.DISCOVERED, Action.DEFER): State.DEFERRED,
    (State.DEFERRED, Action.ADMIT): State.ADMITTED,
    (State.DEFERRED, Action.REJECT): State.REJECTED,
    (State.ADMITTED, Action.DEPRECATE): State.DEPRECATED,
    (State.ADMITTED, Action.RETIRE): State.RETIRED,
    (State.DEPRECATED, Action.RETIRE): State.RETIRED,
}

FINAL = frozenset({State.REJECTED, State.RETIRED})


class Refusal(ValueError):
    """A lifecycle step was refused. ``code`` is a stable snake_case reason.

    ``field`` names the answer at fault when the code alone does not say which
    (``admission_incomplete`` covers four answers); "" otherwise.
    """

    def __init__(self, code: str, message: str, *, field: str = "") -> None:
        self.code = code
        self.message = message
        self.field = field
        super().__init__(f"{code}: {message}")


def next_state(current: str, action: str) -> State:
    """Return the state ``action`` leads to from ``current``; raise Refusal if illegal."""
    try:
        state, act = State(current), Action(action)
    except ValueError:
        raise Refusal(
            "unknown_action", f"{action!r} from {current!r} is not a lifecycle step"
        ) from None
    target = LIFECYCLE_STEPS.get((state, act))
    if target is None:
        if state in FINAL:
            raise Refusal(
                "lifecycle_final",
                f"{state.value} is final: a {state.value.lower()} version never returns; "
                "a new intent needs a new contract version",
            )
        raise Refusal(
            "illegal_lifecycle_step", f"cannot {act.value} a version that is {state.value}"
        )
    return target


def actions_from(current: str) -> list[str]:
    """The actions a reviewer may take from ``current`` (for the console's buttons)."""
    return [a.value for (s, a) in LIFECYCLE_STEPS if s.value == current]


# -- admission ---------------------------------------------------------------------------
DECISIONS = ("ADMIT", "ADMIT_BOUNDED")
_TRANSITION = re.compile(r"^[A-Z][A-Z0-9_]{1,40}\s*->\s*[A-Z][A-Z0-9_]{1,40}$")
# The most a reviewer may write in the admission record's free-text answers (the form's
# maxlength where it has one). Longer answers are refused, never cut.
MAX_ALTERNATIVES = 10
MAX_ALTERNATIVE_CHARS = 200
MAX_EXPIRY_CHARS = 300


@dataclass(frozen=True)
class AdmissionRecord:
    """SPEC §3: what an admission decided and on what grounds."""

    task_transition: str
    intent: str
    non_intents: tuple[str, ...]
    effect_class: str
    operational_effects: tuple[str, ...]
    alternatives: tuple[str, ...]
    decision: str
    expiry: str
    reviewer: str
    local_contract: str
    discovered_from: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_transition": self.task_transition,
            "intent": self.intent,
            "non_intents": list(self.non_intents),
            "effect_class": self.effect_class,
            "operational_effects": list(self.operational_effects),
            "alternatives": list(self.alternatives),
            "decision": self.decision,
            "expiry": self.expiry,
            "reviewer": self.reviewer,
            "local_contract": self.local_contract,
            "discovered_from": self.discovered_from,
        }


def admission_record(
    *,
    contract: Mapping[str, Any],
    local_ref: str,
    reviewer: str,
    task_transition: str,
    alternatives: list[str],
    decision: str,
    expiry: str,
    discovered_from: str = "",
) -> AdmissionRecord:
    """Build the record from the reviewer's answers and the *local* contract.

    Intent, non-intents, effect class and operational effects come from the reviewed
    local contract only, never from a discovered definition. Raise Refusal on an
    incomplete answer.
    """
    task_transition = " ".join((task_transition or "").split())
    if not _TRANSITION.match(task_transition):
        raise Refusal(
            "admission_incomplete",
            "name the task transition served, e.g. NEED_INVENTORY -> HAVE_INVENTORY_EVIDENCE",
            field="task_transition",
        )
    # A line that shows nothing (blank, or only U+200B and its kind) is no alternative.
    alternatives = [a.strip() for a in alternatives if a and not shows_nothing(a)]
    if not alternatives:
        raise Refusal(
            "admission_incomplete",
            "list the alternatives considered (narrower or non-tool)",
            field="alternatives",
        )
    longest = max(len(a) for a in alternatives)
    if len(alternatives) > MAX_ALTERNATIVES or longest > MAX_ALTERNATIVE_CHARS:
        raise Refusal(
            "answer_too_long",
            f"list at most {MAX_ALTERNATIVES} alternatives of at most {MAX_ALTERNATIVE_CHARS} "
            f"characters each (these are {len(alternatives)}, the longest {longest})",
            field="alternatives",
        )
    for alternative in alternatives:
        refused = bidi_control_refusal(alternative, what="an alternative")
        if refused:
            raise Refusal("answer_bidi_control", refused, field="alternatives")
    if decision not in DECISIONS:
        raise Refusal(
            "admission_incomplete",
            f"decision must be one of {', '.join(DECISIONS)}",
            field="decision",
        )
    expiry = " ".join((expiry or "").split())
    if len(expiry) < 8 or shows_nothing(expiry):
        raise Refusal(
            "admission_incomplete",
            "state the expiry or invalidation rule of this admission",
            field="expiry",
        )
    if len(expiry) > MAX_EXPIRY_CHARS:
        raise Refusal(
            "answer_too_long",
            f"the expiry rule may be at most {MAX_EXPIRY_CHARS} characters and this one has "
            f"{len(expiry)}",
            field="expiry",
        )
    refused = bidi_control_refusal(expiry, what="the expiry rule")
    if refused:
        raise Refusal("answer_bidi_control", refused, field="expiry")
    return AdmissionRecord(
        task_transition=task_transition,
        intent=str(contract.get("intent", "")),
        non_intents=tuple(str(x) for x in contract.get("non_intents", [])),
        effect_class=str(contract.get("effect_class", "")),
        operational_effects=tuple(str(x) for x in contract.get("operational_effects", [])),
        alternatives=tuple(alternatives),
        decision=decision,
        expiry=expiry,
        reviewer=reviewer,
        local_contract=local_ref,
        discovered_from=discovered_from,
    )


def hint_conflicts(hints: Mapping[str, bool], effect_class: str) -> list[str]:
    """Untrusted hints that contradict the local classification (refuse admission).

    A server that says ``readOnlyHint: true`` for a capability the local contract
    classifies as anything beyond a read is either wrong or hiding behaviour; local
    classification wins and the mismatch must be resolved before admission.
    """
    effect = EffectClass(effect_class)
    problems = []
    if hints.get("readOnlyHint") is True and effect not in (EffectClass.NONE, EffectClass.READ):
        problems.append(
            f"the server claims readOnlyHint=true but the local contract classifies the "
            f"capability as {effect.value}"
        )
    return problems


_CHANGES_NOTHING_OUTSIDE = (EffectClass.NONE, EffectClass.READ, EffectClass.LOCAL_TRANSFORMATION)


def hint_warnings(hints: Mapping[str, bool], effect_class: str, open_world: bool) -> list[str]:
    """Other disagreements worth showing (they never change the classification)."""
    effect = EffectClass(effect_class)
    out = []
    if hints.get("readOnlyHint") is False and effect in (EffectClass.NONE, EffectClass.READ):
        out.append("the server says the tool is not read-only; the local contract says read")
    # Declared alone, destructiveHint: true still claims an effect (readOnlyHint defaults to
    # false, and destructiveHint only means something then): servers such as
    # mcp-server-kubernetes and Notion's mark every mutating tool this way.
    if hints.get("destructiveHint") is True and effect in _CHANGES_NOTHING_OUTSIDE:
        out.append(
            "the server says the tool may be destructive; the local contract classifies it "
            f"as {effect.value}"
        )
    if hints.get("destructiveHint") is False and effect is EffectClass.CONSEQUENTIAL:
        out.append("the server says non-destructive; the local contract says consequential")
    if "openWorldHint" in hints and hints["openWorldHint"] != open_world:
        out.append(
            f"the server says openWorldHint={str(hints['openWorldHint']).lower()}; the local "
            f"contract says open_world={str(open_world).lower()}"
        )
    return out
