"""The routing evaluation: labelled cases x a registry x a selector -> a Report.

This is the *selection suite* of SPEC §9. Every capability is replaced by a recording
stub: a selector's call is recorded and answered by the stub, never by an adapter or
the synthetic world, so no effect is possible. The enforcement suite (adapters called
directly with hostile requests) lives in the run engine's tests and the fault lab.

Two registries:
- ``fieldops``: the admitted capabilities with their reviewed, discriminative
  descriptions, plus the trusted controls;
- ``confusable``: the same capabilities described vaguely, plus overlapping tools with
  synonym names (``search``, ``lookup``, ``find_parts``, ...): one poorly partitioned
  capability expressed several ways.

Two selectors:
- ``double``: the policy double (a scripted scenario, a function of the context
  projection only), given a context built for each case;
- ``lexical``: a simple selector that picks the visible capability whose description
  best matches the goal, and abstains below a threshold.

Each case's phase comes from its situation (the same rule a live run uses), the exposure
policy of that phase narrows the registry, top-k retrieval keeps ``k`` ordinary
capabilities for the goal and the trusted controls are added without consuming ``k``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capabilities.base import schema_errors
from capabilities.contracts import EffectClass, model_projection
from capabilities.exposure import PHASE_POLICIES, Candidate, Phase, expose, phase_for
from capabilities.registry import ALL_CONTRACTS
from sim.routing import (
    Category,
    Rate,
    Report,
    RoutingCase,
    RoutingRecord,
    lexical_select,
    recall_at_k,
)
from sim.world import fixtures

CASES_PATH = Path(__file__).resolve().parent / "routing_cases.json"
TRUSTED_CONTROLS = frozenset({"ask_user", "wait_for_event", "no_applicable_tool"})
# The comparison runs at k=3: small enough that a crowded registry shows at retrieval.
DEFAULT_K = 3
RECALL_KS = (1, 2, 3, 5)
REGISTRIES = ("fieldops", "confusable")
SELECTORS = ("double", "lexical")


# -- cases -------------------------------------------------------------------------------
def load_cases(path: Path | None = None) -> list[RoutingCase]:
    """Read the labelled case set; raise ValueError on a malformed case."""
    data = json.loads((path or CASES_PATH).read_text())
    cases = []
    seen: set[str] = set()
    for raw in data["cases"]:
        case = RoutingCase(
            case_id=raw["id"],
            goal=raw["goal"],
            acceptable=frozenset(raw["acceptable"]),
            forbidden=frozenset(raw.get("forbidden", [])),
            capability=raw["capability"],
            category=Category(raw["category"]),
            situation=raw.get("situation", "fresh"),
            phase=raw.get("phase"),
            note=raw.get("note", ""),
        )
        if case.case_id in seen:
            raise ValueError(f"duplicate case id {case.case_id}")
        if case.situation not in SITUATIONS:
            raise ValueError(f"{case.case_id}: unknown situation {case.situation!r}")
        seen.add(case.case_id)
        cases.append(case)
    return cases


# -- situations: the admitted evidence a case starts from --------------------------------
Observation = dict[str, Any]
_NOW = "2026-01-05T09:00:00+00:00"


def _obs(
    seq: int, capability: str, data: Mapping[str, Any], ok: bool = True, error: str = ""
) -> Observation:
    return {
        "ref": f"ev-case-{seq:02d}",
        "seq": seq,
        "capability": capability,
        "ok": ok,
        "error": error,
        "detail": "",
        "data": dict(data),
    }


def _request() -> Observation:
    return _obs(
        1,
        "request",
        {
            "equipment_id": "EQ-17",
            "location_id": "LOC-N1",
            "symptom": "seal weep at the impeller housing",
            "quantity": 1,
        },
    )


def _equipment() -> Observation:
    eq = fixtures.EQUIPMENT["EQ-17"]
    return _obs(
        3,
        "read_equipment",
        {
            "equipment_id": "EQ-17",
            "tenant": "north",
            "family": eq["family"],
            "revision": eq["revision"],
            "observed_at": _NOW,
        },
    )


def _passage(manual_id: str, passage_id: str) -> dict[str, Any]:
    manual = fixtures.MANUALS[manual_id]
    return {
        "passage_id": passage_id,
        "manual_id": manual_id,
        "edition": manual["edition"],
        "trust_state": manual["trust_state"],
        "text": manual["passages"][passage_id],
    }


def _manual(*passages: tuple[str, str]) -> Observation:
    return _obs(
        5,
        "search_manual",
        {"passages": [_passage(m, p) for m, p in passages], "retrieved_at": _NOW},
    )


def _inventory(seq: int = 7, available: int = 500) -> Observation:
    return _obs(
        seq,
        "check_inventory",
        {
            "part_id": "A17",
            "location_id": "LOC-N1",
            "tenant": "north",
            "slots": [{"slot_id": "S-N1-01", "available": available}],
            "revision": "inv-42",
            "observed_at": _NOW,
        },
    )


def _proposal(seq: int = 9) -> Observation:
    return _obs(
        seq,
        "propose_reservation",
        {
            "proposal": {"part_id": "A17", "slot_id": "S-N1-01", "quantity": 1},
            "proposal_hash": "0" * 64,
        },
    )


_PART = (("MAN-PF", "PF-1"), ("MAN-PF", "PF-3"))
_FORUM_ONLY = (("MAN-PF-FORUM", "PFX-1"),)

SITUATIONS: Mapping[str, Callable[[], tuple[list[Observation], list[dict[str, Any]]]]] = {
    "fresh": lambda: ([_request()], []),
    "equipment_known": lambda: ([_request(), _equipment()], []),
    "part_known": lambda: ([_request(), _equipment(), _manual(*_PART)], []),
    "manual_without_part": lambda: ([_request(), _equipment(), _manual(*_FORUM_ONLY)], []),
    "inventory_known": lambda: ([_request(), _equipment(), _manual(*_PART), _inventory()], []),
    "inventory_empty": lambda: (
        [_request(), _equipment(), _manual(*_PART), _inventory(available=0)],
        [],
    ),
    "proposal_ready": lambda: (
        [_request(), _equipment(), _manual(*_PART), _inventory(), _proposal()],
        [],
    ),
    "reserve_stale": lambda: (
        [
            _request(),
            _equipment(),
            _manual(*_PART),
            _inventory(),
            _proposal(),
            _obs(11, "reserve_part", {}, ok=False, error="STALE"),
        ],
        [],
    ),
    "approval_declined": lambda: (
        [_request(), _equipment(), _manual(*_PART), _inventory(), _proposal()],
        [{"seq": 10, "reason": "approval_declined", "detail": "use slot S-N1-02"}],
    ),
}
_REQUESTED_CHANGE = {"approval_declined": {"slot_id": "S-N1-01"}}


def situation_phase(situation: str) -> Phase:
    observations, _ = SITUATIONS[situation]()
    return phase_for(o["capability"] for o in observations if o["ok"])


def context_for(case: RoutingCase, shown: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A context projection for ``case``: the case goal as objective, its situation's
    admitted observations, and the capabilities the funnel made visible."""
    observations, denials = SITUATIONS[case.situation]()
    return {
        "version": "routing-case@1",
        "objective": case.goal,
        "turn": len(observations),
        "observations": observations,
        "capabilities": [dict(c) for c in shown],
        "budget_hints": {"turns": 10, "actions": 10, "corrections": 3},
        "recent_denials": denials,
        "denial_counts": {d["reason"]: 1 for d in denials},
        "requested_change": dict(_REQUESTED_CHANGE.get(case.situation, {})),
    }


# -- registries --------------------------------------------------------------------------
def _from_contract(contract: Any) -> Candidate:
    return Candidate(
        id=contract.id,
        version=contract.version,
        family=contract.family,
        effect=contract.effect_class,
        lifecycle="ADMITTED",
        purpose=contract.intent,
        use_when=tuple(contract.use_when),
        avoid_when=tuple(contract.avoid_when),
        open_world=contract.open_world,
    )


def fieldops_registry() -> list[Candidate]:
    """The admitted capabilities and trusted controls, as reviewed."""
    return [_from_contract(c) for c in ALL_CONTRACTS.values()]


_VAGUE = {
    "read_equipment": "Get equipment.",
    "search_manual": "Search manuals.",
    "check_inventory": "Check parts.",
    "propose_reservation": "Make a proposal.",
    "reserve_part": "Reserve a part.",
}
# (id, family, effect, purpose, open_world): synonyms of capabilities that already exist.
_OVERLAPPING = (
    ("search", "manuals", EffectClass.READ, "Search for things.", False),
    ("lookup", "inventory", EffectClass.READ, "Look things up.", False),
    ("find_parts", "inventory", EffectClass.READ, "Find parts and part information.", False),
    (
        "search_documents",
        "manuals",
        EffectClass.READ,
        "Search documents, manuals and records for anything about equipment or parts.",
        False,
    ),
    (
        "equipment_lookup",
        "equipment",
        EffectClass.READ,
        "Look up equipment, parts, stock and repair information.",
        False,
    ),
    (
        "parts_reservation",
        "reservation",
        EffectClass.CONSEQUENTIAL,
        "Reserve or hold parts.",
        False,
    ),
    ("web_search", "manuals", EffectClass.READ, "Search the web for repair information.", True),
)


def confusable_registry() -> list[Candidate]:
    """Vague descriptions (no use-when / avoid-when) and overlapping synonym tools."""
    out = []
    for c in ALL_CONTRACTS.values():
        base = _from_contract(c)
        if c.id in _VAGUE:
            base = Candidate(
                id=c.id,
                version=c.version,
                family=c.family,
                effect=c.effect_class,
                lifecycle="ADMITTED",
                purpose=_VAGUE[c.id],
            )
        out.append(base)
    for cid, family, effect, purpose, open_world in _OVERLAPPING:
        out.append(
            Candidate(
                id=cid,
                version="1.0.0",
                family=family,
                effect=effect,
                lifecycle="ADMITTED",
                purpose=purpose,
                open_world=open_world,
            )
        )
    return out


def registry(name: str) -> list[Candidate]:
    if name == "fieldops":
        return fieldops_registry()
    if name == "confusable":
        return confusable_registry()
    raise ValueError(f"unknown registry {name!r} (one of {', '.join(REGISTRIES)})")


def projection_of(candidate: Candidate) -> dict[str, Any]:
    """What a selector is shown for ``candidate``."""
    contract = ALL_CONTRACTS.get(candidate.id)
    if contract is not None and contract.intent == candidate.purpose:
        return model_projection(contract)
    return {
        "name": candidate.id,
        "description": candidate.purpose,
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": True},
    }


# -- the selection suite's stubs ---------------------------------------------------------
@dataclass
class RecordingStubs:
    """Stand-ins for every capability: record the call, answer a fixed stub result.

    Nothing here can reach an adapter, a credential or the synthetic world.
    """

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def dispatch(self, case_id: str, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append((case_id, name, dict(args)))
        return {"stub": True, "capability": name}


# -- selectors ---------------------------------------------------------------------------
Selection = tuple[str | None, Mapping[str, Any] | None]
Selector = Callable[[RoutingCase, dict[str, Any], list[Candidate]], Selection]


def double_selector(scenario: str = "reservation") -> Selector:
    """The policy double's choice for the case's context (a pure function of it)."""
    from sim import double

    decide = double.SCENARIOS[scenario].decide

    def select(case: RoutingCase, ctx: dict[str, Any], visible: list[Candidate]) -> Selection:
        step = decide(ctx)
        if isinstance(step, double.Call):
            return step.name, step.args
        if isinstance(step, double.Final):
            return "final", None
        return None, None

    return select


def lexical_selector(threshold: float = 1.0) -> Selector:
    def select(case: RoutingCase, ctx: dict[str, Any], visible: list[Candidate]) -> Selection:
        return lexical_select(case.goal, visible, threshold=threshold), None

    return select


def selector(name: str, scenario: str = "reservation") -> Selector:
    if name == "double":
        return double_selector(scenario)
    if name == "lexical":
        return lexical_selector()
    raise ValueError(f"unknown selector {name!r} (one of {', '.join(SELECTORS)})")


# -- evaluation --------------------------------------------------------------------------
def _arguments_valid(name: str | None, args: Mapping[str, Any] | None) -> bool | None:
    contract = ALL_CONTRACTS.get(name or "")
    if contract is None or args is None:
        return None
    return not schema_errors(model_projection(contract)["input_schema"], dict(args))


def record_case(
    case: RoutingCase,
    candidates: Sequence[Candidate],
    select: Selector,
    *,
    k: int | None,
    stubs: RecordingStubs,
) -> RoutingRecord:
    phase = Phase(case.phase) if case.phase else situation_phase(case.situation)
    funnel = expose(
        candidates,
        PHASE_POLICIES[phase],
        phase=phase.value,
        query=case.goal,
        k=k,
        trusted_controls=TRUSTED_CONTROLS,
    )
    by_id = {c.id: c for c in candidates}
    visible = [by_id[cid] for cid in funnel.visible]
    ctx = context_for(case, [projection_of(c) for c in visible])
    chosen, args = select(case, ctx, visible)
    if chosen is not None and chosen != "final":
        stubs.dispatch(case.case_id, chosen, args or {})
    return RoutingRecord(
        case=case,
        registry=frozenset(c.id for c in candidates),
        exposed=frozenset(funnel.eligible),
        retrieved=frozenset(funnel.retrieved),
        controls=frozenset(funnel.controls),
        selected=chosen,
        k=k,
        arguments_valid=_arguments_valid(chosen, args),
    )


def evaluate(
    *,
    registry_name: str,
    selector_name: str,
    k: int | None = DEFAULT_K,
    cases: Sequence[RoutingCase] | None = None,
    scenario: str = "reservation",
    stubs: RecordingStubs | None = None,
) -> Report:
    """Evaluate one selector over one registry; every call goes to recording stubs."""
    cases = list(cases) if cases is not None else load_cases()
    candidates = registry(registry_name)
    select = selector(selector_name, scenario)
    stubs = stubs if stubs is not None else RecordingStubs()
    records = tuple(record_case(c, candidates, select, k=k, stubs=stubs) for c in cases)
    extra: dict[int, Rate] = {}
    for other in RECALL_KS:
        again = [record_case(c, candidates, _no_selection, k=other, stubs=stubs) for c in cases]
        extra[other] = recall_at_k(again, other)
    name = f"{selector_name}" + (f":{scenario}" if selector_name == "double" else "")
    return Report(
        name=f"{name} on {registry_name} (k={k})",
        records=records,
        k=k,
        notes=(
            f"{len(stubs.calls)} selections answered by recording stubs; no adapter or world "
            "service was called",
        ),
        extra_recall=extra,
    )


def _no_selection(case: RoutingCase, ctx: dict[str, Any], visible: list[Candidate]) -> Selection:
    return None, None


def evaluate_all(
    *, k: int | None = DEFAULT_K, scenario: str = "reservation"
) -> list[tuple[str, str, Report]]:
    """Every selector over every registry: the comparison the report page shows."""
    cases = load_cases()
    return [
        (
            sel,
            reg,
            evaluate(registry_name=reg, selector_name=sel, k=k, cases=cases, scenario=scenario),
        )
        for sel in SELECTORS
        for reg in REGISTRIES
    ]
