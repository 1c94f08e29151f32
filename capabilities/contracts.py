"""Capability contracts (SPEC §3): the reviewed source and its two generated projections.

A capability is a versioned contract, not a function. Each capability module defines one
``Contract``; the model projection (what a policy sees) and the enforcement projection
(what the harness checks) are generated from it, never written by hand.

Pure module: standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from kernel.canonical import digest


class EffectClass(StrEnum):
    NONE = "none"
    READ = "read_only_observation"
    LOCAL_TRANSFORMATION = "local_transformation"
    LOCAL_REVERSIBLE = "local_reversible_mutation"
    EXTERNAL_REVERSIBLE = "external_reversible_mutation"
    CONSEQUENTIAL = "consequential_external_mutation"


EFFECT_ORDER: tuple[EffectClass, ...] = tuple(EffectClass)


def version_key(version: str) -> tuple[int, ...]:
    """Semantic-version order ("1.10.0" after "1.9.0"); unparsable parts sort first."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def effect_at_most(effect: EffectClass | str, ceiling: EffectClass | str) -> bool:
    return EFFECT_ORDER.index(EffectClass(effect)) <= EFFECT_ORDER.index(EffectClass(ceiling))


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    DENIED = "DENIED"
    NOT_FOUND = "NOT_FOUND"
    STALE = "STALE"
    CONFLICT = "CONFLICT"
    TIMEOUT = "TIMEOUT"
    TIMEOUT_AMBIGUOUS = "TIMEOUT_AMBIGUOUS"
    MALFORMED_RESULT = "MALFORMED_RESULT"
    SAME_KEY_DIFFERENT_INTENT = "SAME_KEY_DIFFERENT_INTENT"
    UNAVAILABLE = "UNAVAILABLE"
    RATE_LIMITED = "RATE_LIMITED"
    PRECONDITION_EVIDENCE_INCOMPLETE = "PRECONDITION_EVIDENCE_INCOMPLETE"
    # The ledger refused a commit whose fencing token is older than one it has seen for
    # the key: nothing was committed (see runs/domain/effects.py, "Fencing rule").
    FENCED = "FENCED"


class Provenance(StrEnum):
    MODEL = "model-proposed"
    HARNESS = "harness-derived"
    ADAPTER = "adapter-derived"


class ProposalKind(StrEnum):
    OBSERVE = "observe"
    ACTION = "action"
    CONTROL = "control"


@dataclass(frozen=True)
class ErrorRule:
    code: ErrorCode
    meaning: str
    # How many times the same request may be retried after this error (0 = never).
    retry_budget: int
    # The event the harness appends when the adapter returns this error.
    transition: str
    retry_owner: str = "harness"


@dataclass(frozen=True)
class Precondition:
    id: str
    description: str
    recheck_at_dispatch: bool = True


@dataclass(frozen=True)
class TimeoutStage:
    stage: str
    limit_ms: int
    inference: str


@dataclass(frozen=True)
class Contract:
    id: str
    version: str
    family: str
    kind: ProposalKind
    intent: str
    non_intents: tuple[str, ...]
    effect_class: EffectClass
    operational_effects: tuple[str, ...]
    use_when: tuple[str, ...]
    avoid_when: tuple[str, ...]
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    provenance: Mapping[str, Provenance]
    preconditions: tuple[Precondition, ...]
    scope: Mapping[str, Any]
    freshness: Mapping[str, Any]
    timeout_stages: tuple[TimeoutStage, ...]
    errors: tuple[ErrorRule, ...]
    idempotency: Mapping[str, Any]
    reconciliation: Mapping[str, Any]
    compensation: Mapping[str, Any]
    audit: Mapping[str, Any]
    redaction: Mapping[str, Any]
    double: Mapping[str, Any]
    deprecation: Mapping[str, Any]
    owner: str
    requires_approval: bool = False
    open_world: bool = False
    non_claims: Mapping[str, bool] = field(
        default_factory=lambda: {
            "exactlyOnceClaim": False,
            "realWorldEffect": False,
            "compensationErasesOriginal": False,
        }
    )

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    def as_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(asdict(self))
        return plain

    @cached_property
    def model_projection_json(self) -> str:
        """``model_projection(self)`` as JSON (made once: the contract is frozen)."""
        return json.dumps(_model_projection(self))

    @cached_property
    def digest(self) -> str:
        """The digest of the canonical contract (computed once: the contract is frozen)."""
        return digest(self.as_dict())

    def error(self, code: ErrorCode | str) -> ErrorRule | None:
        for rule in self.errors:
            if rule.code == code:
                return rule
        return None

    def fields_by(self, provenance: Provenance) -> tuple[str, ...]:
        return tuple(sorted(k for k, v in self.provenance.items() if v is provenance))


def _plain(value: Any) -> Any:
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def model_projection(contract: Contract) -> dict[str, Any]:
    """Return what a policy sees: name, a discriminative description, model-owned inputs.

    A new value at every call, decoded from the projection made once per contract (every
    decision shows the same contracts again): equal, key order included, to a fresh one."""
    projection: dict[str, Any] = json.loads(contract.model_projection_json)
    return projection


def _model_projection(contract: Contract) -> dict[str, Any]:
    model_fields = contract.fields_by(Provenance.MODEL)
    props = contract.input_schema.get("properties", {})
    required = [f for f in contract.input_schema.get("required", []) if f in model_fields]
    description = contract.intent
    if contract.use_when:
        description += " Use when: " + "; ".join(contract.use_when) + "."
    if contract.avoid_when:
        description += " Avoid when: " + "; ".join(contract.avoid_when) + "."
    if contract.requires_approval:
        description += " Requires an exact human approval of the proposal hash."
    return {
        "name": contract.id,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {f: _plain(props[f]) for f in model_fields},
            "required": required,
            "additionalProperties": False,
        },
    }


def enforcement_projection(contract: Contract) -> dict[str, Any]:
    """Return what the harness enforces: trusted bindings, rules and reason mappings."""
    return {
        "id": contract.id,
        "version": contract.version,
        "digest": contract.digest,
        "kind": contract.kind.value,
        "effect_class": contract.effect_class.value,
        "requires_approval": contract.requires_approval,
        "input_fields": sorted(contract.input_schema.get("properties", {})),
        "model_fields": list(contract.fields_by(Provenance.MODEL)),
        "harness_fields": list(contract.fields_by(Provenance.HARNESS)),
        "adapter_fields": list(contract.fields_by(Provenance.ADAPTER)),
        "preconditions": [p.id for p in contract.preconditions],
        "freshness": _plain(contract.freshness),
        "scope": _plain(contract.scope),
        "retry_budgets": {r.code.value: r.retry_budget for r in contract.errors},
        "error_transitions": {r.code.value: r.transition for r in contract.errors},
        "idempotency_key_fields": list(contract.idempotency.get("key_fields", [])),
        "effect_budget": 1 if contract.effect_class is EffectClass.CONSEQUENTIAL else 0,
    }


def projection_parity(contract: Contract) -> list[str]:
    """Return every disagreement between the two projections (empty when they agree).

    Every enforcement input field must have exactly one provenance; the model projection
    must offer exactly the model-proposed fields; no trusted field may leak to the model.
    """
    problems: list[str] = []
    enforcement = enforcement_projection(contract)
    model = model_projection(contract)
    declared = set(contract.provenance)
    inputs = set(enforcement["input_fields"])
    if inputs - declared:
        problems.append(f"fields without provenance: {sorted(inputs - declared)}")
    if declared - inputs:
        problems.append(f"provenance for unknown fields: {sorted(declared - inputs)}")
    offered = set(model["input_schema"]["properties"])
    if offered != set(enforcement["model_fields"]):
        problems.append("model projection does not offer exactly the model-proposed fields")
    trusted = set(enforcement["harness_fields"]) | set(enforcement["adapter_fields"])
    if offered & trusted:
        problems.append(f"trusted fields offered to the model: {sorted(offered & trusted)}")
    if contract.input_schema.get("additionalProperties", True) is not False:
        problems.append("input schema accepts unknown fields")
    if contract.output_schema.get("additionalProperties", True) is not False:
        problems.append("output schema accepts unknown fields")
    if contract.non_claims.get("exactlyOnceClaim") is not False:
        problems.append("exactlyOnceClaim must be false")
    return problems
