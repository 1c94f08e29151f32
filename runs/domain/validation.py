"""The fixed nine-step validation order (SPEC §2).

Each step is a small function that returns a ``ValidationDecision`` to stop with, or None to go on.
Cheap checks run first; no model explanation can override a denial. The ninth step
decides what an admitted proposal becomes: execute, wait, verify or escalate.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from capabilities import evidence as ev
from capabilities.contracts import ErrorCode
from kernel.canonical import canonical_json

from .budgets import Budget, Budgets, exhausted_reason
from .proposals import (
    AbstainIntent,
    ActionIntent,
    ClarifyIntent,
    EscalateIntent,
    FinalCandidate,
    InvalidProposal,
    ObserveIntent,
    Proposal,
    WaitIntent,
)
from .states import EventType, State
from .transitions import edge


class ValidationOutcome(StrEnum):
    DENY = "deny"
    EXECUTE = "execute"
    APPROVAL = "approval"
    CLARIFY = "clarify"
    WAIT = "wait"
    VERIFY = "verify"
    ESCALATE = "escalate"
    FAIL = "fail"  # a contract or integrity failure: the run cannot continue


OUTCOME_EVENT: Mapping[ValidationOutcome, EventType] = {
    ValidationOutcome.DENY: EventType.PROPOSAL_DENIED,
    ValidationOutcome.EXECUTE: EventType.PROPOSAL_ALLOWED,
    ValidationOutcome.APPROVAL: EventType.APPROVAL_REQUIRED,
    ValidationOutcome.CLARIFY: EventType.CLARIFICATION_REQUIRED,
    ValidationOutcome.WAIT: EventType.WAIT_ADMITTED,
    ValidationOutcome.VERIFY: EventType.COMPLETION_REQUESTED,
    ValidationOutcome.ESCALATE: EventType.ESCALATION_ADMITTED,
    ValidationOutcome.FAIL: EventType.RUN_FAILED,
}

VALIDATION_STEPS: tuple[str, ...] = (
    "run non-terminal and not cancelled",
    "proposal syntactically valid (JSON Schema)",
    "action enumerated in the contract",
    "transition legal from current state",
    "task preconditions and evidence present and fresh",
    "budgets available",
    "principal, scope, audience, authority valid",
    "capability version admitted",
    "decide: deny, wait, escalate or execute",
)


@dataclass(frozen=True)
class ValidationDecision:
    outcome: ValidationOutcome
    step: int
    reason: str
    detail: str = ""
    # The budget this decision charges (None: nothing). Denials charge the budget of the
    # thing that was attempted: corrections for malformed proposals, actions for requests.
    charge: Budget | None = None

    def as_payload(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "step": self.step,
            "reason": self.reason,
            "detail": self.detail[:500],
            "charge": self.charge.value if self.charge else None,
        }


@dataclass(frozen=True)
class CapabilityRule:
    """What enforcement knows about one capability the run pinned."""

    id: str
    kind: str  # observe | action | control
    requires_approval: bool
    model_fields: frozenset[str]
    trusted_fields: frozenset[str]
    retry_budgets: Mapping[str, int]
    pinned: str  # "version#digest" the run pinned at creation
    current: str  # "version#digest" the catalog holds now for that version
    lifecycle: str  # DISCOVERED | ADMITTED | DEPRECATED | RETIRED | REJECTED | DEFERRED
    effect_gate_open: bool = True  # the deployment gate (catalog admins)
    location_bound: bool = False
    tenant_gate_open: bool = True  # the run's tenant's gate (that tenant's operators)


@dataclass(frozen=True)
class ApprovalView:
    """The approval bound to the run's current canonical proposal, as the store sees it."""

    proposal_hash: str
    status: str  # PENDING | APPROVED | DECLINED | EXPIRED | CANCELLED | USED
    expires_at: dt.datetime
    # True when the approval was consumed by a dispatch whose every attempt was proven
    # not to have produced an effect (pre-dispatch failure or ledger-proven absence).
    consumed_without_effect: bool = False
    # The service's definite answer (e.g. CONFLICT) to the latest attempt, when a fenced
    # reconciliation then proved that it left no effect: the request is not sent again
    # unchanged.
    definite_answer: str = ""


@dataclass(frozen=True)
class PriorOutcome:
    """A capability request this run already made and how it ended."""

    capability: str
    args_digest: str
    error: str  # "" for success
    denied_reason: str = ""


@dataclass(frozen=True)
class ValidationContext:
    state: State
    terminal: bool
    cancelled: bool
    budgets: Budgets
    contract_actions: frozenset[str]
    rejected: Mapping[str, str]
    rules: Mapping[str, CapabilityRule]
    schema_errors: Callable[[str, Mapping[str, Any]], list[str]]
    tenant: str
    scope: frozenset[str]
    observations: Mapping[str, Mapping[str, Any]]
    now: dt.datetime
    parts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    canonical_proposal: Mapping[str, Any] | None = None
    canonical_hash: str = ""
    approval: ApprovalView | None = None
    history: Sequence[PriorOutcome] = ()
    max_artifact_bytes: int = 16_384
    # The capabilities the decision's context made visible (recorded on proposal.emitted);
    # None when no record exists (then exposure is not checked).
    visible: frozenset[str] | None = None


Step = Callable[[ValidationContext, Proposal], ValidationDecision | None]

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_.]{2,63}$")

CONTROL_TOOL = {"clarify": "ask_user", "wait": "wait_for_event", "abstain": "no_applicable_tool"}


def args_digest(capability: str, args: Mapping[str, Any], proposal_hash: str = "") -> str:
    """The identity of a request for retry and repeated-denial accounting.

    An effect request is also identified by the canonical proposal it would carry out: a
    fresh proposal (new evidence, new hash) is a new request, not a retry.
    """
    key: dict[str, Any] = {"capability": capability, "args": dict(args)}
    if proposal_hash:
        key["proposal_hash"] = proposal_hash
    return canonical_json(key)


def request_digest(ctx: ValidationContext, p: ObserveIntent | ActionIntent) -> str:
    rule = ctx.rules.get(p.capability)
    effect = rule is not None and rule.requires_approval
    return args_digest(p.capability, p.args, ctx.canonical_hash if effect else "")


def _deny(
    step: int, reason: str, detail: str = "", charge: Budget | None = None
) -> ValidationDecision:
    return ValidationDecision(ValidationOutcome.DENY, step, reason, detail, charge)


def _is_request(p: Proposal) -> bool:
    return isinstance(p, (ObserveIntent, ActionIntent))


def _request_charge(p: Proposal) -> Budget:
    return Budget.ACTIONS if _is_request(p) else Budget.CORRECTIONS


# -- step 1 ----------------------------------------------------------------------------
def step_run_live(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    if ctx.cancelled:
        return _deny(1, "run_cancelled")
    if ctx.terminal:
        return _deny(1, "run_terminal")
    return None


# -- step 2 ----------------------------------------------------------------------------
def _text_ok(value: Any, limit: int = 500) -> bool:
    return isinstance(value, str) and 0 < len(value.strip()) <= limit


def step_syntax(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    fix = Budget.CORRECTIONS
    if isinstance(p, InvalidProposal):
        return _deny(2, f"invalid_proposal:{p.reason_code}", p.detail, fix)
    if isinstance(p, (ObserveIntent, ActionIntent)):
        if not isinstance(p.capability, str) or not _NAME.match(p.capability):
            return _deny(2, "invalid_capability_name", repr(p.capability)[:80], fix)
        if not isinstance(p.args, Mapping):
            return _deny(2, "arguments_not_an_object", "", fix)
        rule = ctx.rules.get(p.capability)
        if rule is None:
            return None  # not enumerated: step 3 decides
        forged = sorted(k for k in p.args if k in rule.trusted_fields)
        if forged:
            return _deny(2, "trusted_field_supplied", ", ".join(forged), fix)
        expected_kind = rule.kind
        if expected_kind != p.kind:
            return _deny(
                2, "proposal_kind_mismatch", f"{p.capability} is a {expected_kind} capability", fix
            )
        errors = ctx.schema_errors(p.capability, p.args)
        if errors:
            return _deny(2, "schema_invalid", "; ".join(errors), fix)
        return None
    if isinstance(p, ClarifyIntent) and not _text_ok(p.question):
        return _deny(2, "schema_invalid", "question must be 1..500 characters", fix)
    if isinstance(p, WaitIntent) and not (
        _text_ok(p.reason)
        and isinstance(p.expected_event, str)
        and _EVENT_NAME.match(p.expected_event)
    ):
        return _deny(2, "schema_invalid", "wait needs a reason and an event name", fix)
    if isinstance(p, (EscalateIntent, AbstainIntent)) and not _text_ok(p.reason):
        return _deny(2, "schema_invalid", "a reason is required", fix)
    if isinstance(p, FinalCandidate):
        if not isinstance(p.artifact, Mapping) or not p.artifact:
            return _deny(2, "schema_invalid", "final artifact must be a non-empty object", fix)
        if len(canonical_json(dict(p.artifact))) > ctx.max_artifact_bytes:
            return _deny(2, "artifact_too_large", "", fix)
    return None


# -- step 3 ----------------------------------------------------------------------------
def step_enumerated(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    if _is_request(p):
        assert isinstance(p, (ObserveIntent, ActionIntent))
        name = p.capability
        if name in ctx.rejected:
            return _deny(3, "capability_rejected", f"{name}: {ctx.rejected[name]}", Budget.ACTIONS)
        if name not in ctx.contract_actions or name not in ctx.rules:
            return _deny(
                3, "unknown_capability", f"{name} is not in the task contract", Budget.ACTIONS
            )
        return _exposed(ctx, name)
    tool = CONTROL_TOOL.get(p.kind)
    if tool is not None and tool not in ctx.contract_actions:
        return _deny(3, "control_not_enumerated", tool, Budget.CORRECTIONS)
    return None


def _exposed(ctx: ValidationContext, name: str) -> ValidationDecision | None:
    """Exposure enforced: a capability the decision's context did not show is denied.

    A retired or drifted pin is left to step 8, whose reason is the precise one.
    """
    if ctx.visible is None or name in ctx.visible:
        return None
    rule = ctx.rules[name]
    if rule.lifecycle == "RETIRED" or rule.pinned != rule.current:
        return None
    return _deny(
        3,
        "not_exposed",
        f"{name} was not visible to this decision (the phase's exposure policy); choose "
        "among the capabilities shown",
        Budget.CORRECTIONS,
    )


# -- step 4 ----------------------------------------------------------------------------
_INTENDED: Mapping[str, EventType] = {
    "observe": EventType.PROPOSAL_ALLOWED,
    "action": EventType.PROPOSAL_ALLOWED,
    "clarify": EventType.CLARIFICATION_REQUIRED,
    "wait": EventType.WAIT_ADMITTED,
    "final": EventType.COMPLETION_REQUESTED,
    "escalate": EventType.ESCALATION_ADMITTED,
    "abstain": EventType.ESCALATION_ADMITTED,
}


def step_transition_legal(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    intended = _INTENDED.get(p.kind)
    if ctx.state is not State.VALIDATING or intended is None or edge(ctx.state, intended) is None:
        return _deny(4, "illegal_transition", f"{p.kind} from {ctx.state}", _request_charge(p))
    return None


# -- step 5 ----------------------------------------------------------------------------
def step_preconditions(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    if not isinstance(p, ActionIntent):
        return None
    if p.capability == "propose_reservation":
        return _check_reservation_evidence(ctx, p)
    if p.capability == "reserve_part":
        return _check_reserve_preconditions(ctx, p)
    return None


def _quantity(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _check_reservation_evidence(
    ctx: ValidationContext, p: ActionIntent
) -> ValidationDecision | None:
    refs = p.args.get("evidence_refs") or []
    part = str(p.args.get("part_id", "")).upper()
    found = ev.reservation_evidence(
        refs=[str(r) for r in refs],
        observations=ctx.observations,
        part_id=part,
        slot_id=str(p.args.get("slot_id", "")).upper(),
        quantity=_quantity(p.args.get("quantity")) or 0,
        part_info=ctx.parts.get(part),
        now=ctx.now,
    )
    if found.missing:
        return _deny(5, "evidence_missing", "; ".join(found.missing), Budget.ACTIONS)
    if found.stale:
        return _deny(5, "evidence_stale", "; ".join(found.stale), Budget.ACTIONS)
    return None


def _check_reserve_preconditions(
    ctx: ValidationContext, p: ActionIntent
) -> ValidationDecision | None:
    proposal = ctx.canonical_proposal
    if proposal is None:
        return _deny(5, "no_canonical_proposal", "propose_reservation first", Budget.ACTIONS)
    asked = (
        str(p.args.get("part_id", "")).upper(),
        str(p.args.get("slot_id", "")).upper(),
        _quantity(p.args.get("quantity")),
    )
    if asked != (proposal["part_id"], proposal["slot_id"], proposal["quantity"]):
        return _deny(
            5,
            "proposal_mismatch",
            "reserve_part must match the canonical proposal exactly; an edited "
            "proposal is a new proposal",
            Budget.ACTIONS,
        )
    if dt.datetime.fromisoformat(proposal["expires_at"]) <= ctx.now:
        return _deny(5, "proposal_expired", proposal["expires_at"], Budget.ACTIONS)
    inventory = [
        ctx.observations[r]
        for r in proposal["evidence_refs"]
        if ctx.observations.get(r, {}).get("capability") == "check_inventory"
    ]
    if not inventory:
        return _deny(5, "evidence_missing", "no inventory evidence in the proposal", Budget.ACTIONS)
    if not all(ev.is_fresh(o, ctx.now, ev.INVENTORY_MAX_AGE_S) for o in inventory):
        return _deny(
            5,
            "evidence_stale",
            "inventory evidence is older than "
            f"{ev.INVENTORY_MAX_AGE_S} s; read again and propose anew",
            Budget.ACTIONS,
        )
    return None


# -- step 6 ----------------------------------------------------------------------------
def step_budgets(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    if not _is_request(p):
        return None
    assert isinstance(p, (ObserveIntent, ActionIntent))
    if not ctx.budgets.available(Budget.ACTIONS):
        return ValidationDecision(ValidationOutcome.FAIL, 6, exhausted_reason(Budget.ACTIONS))
    rule = ctx.rules[p.capability]
    if rule.requires_approval and not ctx.budgets.available(Budget.EFFECTS):
        return _deny(
            6,
            exhausted_reason(Budget.EFFECTS),
            "the run's effect budget is used; a second effect is never dispatched",
            Budget.ACTIONS,
        )
    digest = request_digest(ctx, p)
    for code, budget in rule.retry_budgets.items():
        failures = sum(
            1
            for h in ctx.history
            if h.capability == p.capability and h.args_digest == digest and h.error == code
        )
        if failures > budget:
            # Policy: an unchanged request whose typed error has no retries left escalates
            # (persistent staleness, repeated malformed results) instead of looping.
            return ValidationDecision(
                ValidationOutcome.ESCALATE,
                6,
                "retry_budget_exhausted",
                f"{p.capability} already failed {failures}x with {code} "
                f"(retry budget {budget}); an owner must look at the capability",
            )
    return None


# -- step 7 ----------------------------------------------------------------------------
def delegated_locations(scope: Sequence[str]) -> tuple[str, ...]:
    """The locations a run's scope delegates, in its order: every entry but the
    ``effect:<capability>`` grants."""
    return tuple(s for s in scope if not s.startswith("effect:"))


def step_authority(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    if not _is_request(p):
        return None
    assert isinstance(p, (ObserveIntent, ActionIntent))
    rule = ctx.rules[p.capability]
    location = p.args.get("location_id")
    if rule.location_bound and location is not None and location not in ctx.scope:
        digest = args_digest(p.capability, p.args)
        repeated = any(
            h.capability == p.capability
            and h.args_digest == digest
            and (h.denied_reason == "scope_denied" or h.error == ErrorCode.DENIED)
            for h in ctx.history
        )
        if repeated:
            return ValidationDecision(
                ValidationOutcome.ESCALATE,
                7,
                "repeated_denial",
                f"{p.capability} at {location} was already denied; unchanged "
                "scope denial escalates instead of retrying",
            )
        return _deny(7, "scope_denied", f"{location} is not delegated to this run", Budget.ACTIONS)
    if rule.requires_approval:
        if f"effect:{p.capability}" not in ctx.scope:
            return _deny(
                7,
                "authority_missing",
                "the principal has no delegation for this effect",
                Budget.ACTIONS,
            )
        proposal = ctx.canonical_proposal or {}
        if proposal.get("tenant") != ctx.tenant or proposal.get("location_id") not in ctx.scope:
            return _deny(
                7,
                "scope_denied",
                "the proposal is outside the run's tenant or delegated locations",
                Budget.ACTIONS,
            )
    return None


# -- step 8 ----------------------------------------------------------------------------
def step_version_admitted(ctx: ValidationContext, p: Proposal) -> ValidationDecision | None:
    name = (
        p.capability if isinstance(p, (ObserveIntent, ActionIntent)) else CONTROL_TOOL.get(p.kind)
    )
    if name is None:
        return None
    rule = ctx.rules.get(name)
    if rule is None:
        return _deny(8, "capability_not_admitted", name, _request_charge(p))
    if rule.pinned != rule.current:
        return ValidationDecision(
            ValidationOutcome.FAIL,
            8,
            "component_version_drift",
            f"{name}: pinned {rule.pinned}, catalog now holds {rule.current}",
        )
    if rule.lifecycle == "RETIRED":
        return _deny(
            8,
            "capability_retired",
            f"{name}@{rule.pinned} is retired; a run pinned to it cannot regain it",
            _request_charge(p),
        )
    if rule.lifecycle not in ("ADMITTED", "DEPRECATED"):
        return _deny(
            8, "capability_not_admitted", f"{name} is {rule.lifecycle}", _request_charge(p)
        )
    if rule.requires_approval and not rule.effect_gate_open:
        return _deny(
            8,
            "effect_gate_closed",
            f"new dispatch of {name} is stopped for the whole deployment; reads continue",
            _request_charge(p),
        )
    if rule.requires_approval and not rule.tenant_gate_open:
        return _deny(
            8,
            "tenant_effect_gate_closed",
            f"new dispatch of {name} is stopped for tenant {ctx.tenant} by its operators; "
            "reads continue",
            _request_charge(p),
        )
    return None


# -- step 9 ----------------------------------------------------------------------------
def step_decide(ctx: ValidationContext, p: Proposal) -> ValidationDecision:
    if isinstance(p, ObserveIntent):
        return ValidationDecision(
            ValidationOutcome.EXECUTE, 9, "read_admitted", charge=Budget.ACTIONS
        )
    if isinstance(p, ActionIntent):
        rule = ctx.rules[p.capability]
        if not rule.requires_approval:
            return ValidationDecision(
                ValidationOutcome.EXECUTE, 9, "action_admitted", charge=Budget.ACTIONS
            )
        return _decide_effect(ctx)
    if isinstance(p, ClarifyIntent):
        return ValidationDecision(ValidationOutcome.CLARIFY, 9, "clarification_admitted")
    if isinstance(p, WaitIntent):
        return ValidationDecision(ValidationOutcome.WAIT, 9, "wait_admitted")
    if isinstance(p, FinalCandidate):
        return ValidationDecision(ValidationOutcome.VERIFY, 9, "final_candidate_admitted")
    if isinstance(p, EscalateIntent):
        return ValidationDecision(
            ValidationOutcome.ESCALATE, 9, "model_requested_escalation", p.reason[:200]
        )
    if isinstance(p, AbstainIntent):
        return ValidationDecision(
            ValidationOutcome.ESCALATE, 9, "no_applicable_tool", p.reason[:200]
        )
    return _deny(9, "unhandled_proposal", p.kind, Budget.CORRECTIONS)


def _decide_effect(ctx: ValidationContext) -> ValidationDecision:
    approval = ctx.approval
    if approval is None or approval.proposal_hash != ctx.canonical_hash:
        return ValidationDecision(ValidationOutcome.APPROVAL, 9, "approval_required")
    if approval.status == "PENDING":
        return _deny(9, "approval_pending", "", Budget.ACTIONS)
    if approval.status == "DECLINED":
        return _deny(
            9,
            "proposal_declined",
            "the approver declined this exact proposal; propose a changed one",
            Budget.ACTIONS,
        )
    if approval.expires_at <= ctx.now or approval.status in ("EXPIRED", "CANCELLED"):
        return _deny(9, "approval_expired", "", Budget.ACTIONS)
    if approval.status == "APPROVED":
        return ValidationDecision(
            ValidationOutcome.EXECUTE,
            9,
            "effect_admitted_with_live_approval",
            charge=Budget.ACTIONS,
        )
    if approval.status == "USED" and approval.consumed_without_effect:
        if approval.definite_answer:
            return _deny(
                9,
                "effect_rejected",
                f"the service answered {approval.definite_answer} and the ledger proved no "
                "effect: refresh the evidence and propose anew",
                Budget.ACTIONS,
            )
        return ValidationDecision(
            ValidationOutcome.EXECUTE,
            9,
            "same_key_redispatch_after_proven_absence",
            charge=Budget.ACTIONS,
        )
    return _deny(9, "approval_used", "an approval is single use", Budget.ACTIONS)


PIPELINE: tuple[Step, ...] = (
    step_run_live,
    step_syntax,
    step_enumerated,
    step_transition_legal,
    step_preconditions,
    step_budgets,
    step_authority,
    step_version_admitted,
)


# The repeated-denial rule (one rule for code, the "repeated-denial" runbook and the fault
# lab): an unchanged request (same capability, same arguments, same canonical proposal for
# an effect) denied REPEATED_DENIAL_LIMIT times for the same reason, a reason only an owner
# can change, escalates with ``repeated_denial`` instead of being denied again. Denials a
# model can correct (schema, unknown names, exposure) are not owner refusals: they end by
# their budgets.
REPEATED_DENIAL_LIMIT = 2
OWNER_DENIALS: frozenset[str] = frozenset(
    {
        "scope_denied",
        "authority_missing",
        "capability_retired",
        "capability_not_admitted",
        "effect_gate_closed",
        "tenant_effect_gate_closed",
    }
)


def repeated_denial(
    ctx: ValidationContext, p: Proposal, decision: ValidationDecision
) -> ValidationDecision:
    """Apply the repeated-denial rule to ``decision`` (return it unchanged when it does not)."""
    if decision.outcome is not ValidationOutcome.DENY or decision.reason not in OWNER_DENIALS:
        return decision
    if not isinstance(p, (ObserveIntent, ActionIntent)):
        return decision
    digest = request_digest(ctx, p)
    prior = sum(
        1
        for h in ctx.history
        if h.capability == p.capability
        and h.args_digest == digest
        and h.denied_reason == decision.reason
    )
    if prior + 1 < REPEATED_DENIAL_LIMIT:
        return decision
    return ValidationDecision(
        ValidationOutcome.ESCALATE,
        decision.step,
        "repeated_denial",
        f"{p.capability} denied {prior + 1}x unchanged ({decision.reason}): an owner must "
        "change the gate, scope or version; retrying cannot",
    )


def validate(ctx: ValidationContext, proposal: Proposal) -> ValidationDecision:
    """Run the nine steps in order; return the first stopping decision or step 9's, with
    the repeated-denial rule applied."""
    for step in PIPELINE:
        decision = step(ctx, proposal)
        if decision is not None:
            return repeated_denial(ctx, proposal, decision)
    return step_decide(ctx, proposal)
