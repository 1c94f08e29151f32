"""Builders that turn stored records into the pure inputs of validation and completion.

Everything here reads (no writes): the run's pinned capability versions against the
catalog, the current canonical proposal and its approval, the run's request history,
and the authoritative ledger facts the verifier needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from approvals.models import Checkpoint
from capabilities import ports, registry, reserve_part
from capabilities.contracts import Contract, Provenance
from capabilities.rejected import REJECTED
from fieldops.sql import Loader, Statement, converted, with_lists
from kernel import clock
from runs import evidence, readcache, rows
from runs.domain import effects, validation
from runs.domain.budgets import Budgets
from runs.domain.completion import CompletionInputs, LedgerFact
from runs.domain.effects import AttemptStatus
from runs.domain.proposals import Proposal
from runs.domain.states import EventType, State
from runs.models import Event, Run


def pinned_ref(version: str, digest: str) -> str:
    return f"{version}#{digest[:16]}"


def pinned_version(run: Run, capability_id: str) -> str:
    """The version ``run`` pinned for ``capability_id`` ("" when it pinned none)."""
    return str(run.components.get(capability_id, "")).split("#")[0]


def pinned_contract(run: Run, capability_id: str) -> Contract | None:
    """The code contract of exactly the version ``run`` pinned (None: no such code)."""
    version = pinned_version(run, capability_id)
    return registry.contract_for(capability_id, version) if version else None


# What enforcement needs of the catalog, read at every decision (never cached: a gate may
# close mid-run): each pinned version's digest, lifecycle and deployment gate, and whether
# the run's tenant closed its own gate. One prepared statement per number of pins instead
# of two ORM queries that also decoded every version's contract JSON.
_DIGEST, _LIFECYCLE, _GATE_OPEN, _TENANT_CLOSED = 3, 4, 5, 6
_RULES_SQL = (
    "SELECT v.id, v.capability_id, v.version, v.digest, v.lifecycle, v.effect_gate_open, "
    "EXISTS (SELECT 1 FROM catalog_tenanteffectgate g "
    "WHERE g.version_id = v.id AND g.tenant = %s AND g.open = %s) "
    "FROM catalog_capabilityversion v "
    "WHERE v.capability_id IN ({ids}) AND v.version IN ({versions})"
)


def _catalog_rows(run: Run) -> list[tuple[Any, ...]]:
    ids = list(run.components)
    versions = sorted({pinned.split("#")[0] for pinned in run.components.values()})
    if not ids:
        return []
    statement = with_lists(_RULES_SQL, ids=len(ids), versions=len(versions))
    return statement.rows([run.tenant, False, *ids, *versions])


def capability_rules(run: Run) -> dict[str, validation.CapabilityRule]:
    """Enforcement rules for every capability the run pinned, against the catalog now."""
    rows = {(row[1], row[2]): row for row in _catalog_rows(run)}
    rules = {}
    for cid, pinned in run.components.items():
        version = pinned.split("#")[0]
        contract = registry.contract_for(cid, version)
        row = rows.get((cid, version))
        if contract is None:
            current = f"{version}#absent-from-code"
        elif row is None:
            current = f"{version}#absent-from-catalog"
        elif row[_DIGEST] != contract.digest:
            current = f"{version}#catalog-disagrees"
        else:
            current = pinned_ref(version, contract.digest)
        if contract is None:
            # No adapter for the pinned version: step 8 fails the run with the drift.
            contract = registry.ALL_CONTRACTS.get(cid)
            if contract is None:
                continue
        rules[cid] = validation.CapabilityRule(
            **_contract_rule(contract),
            pinned=pinned,
            current=current,
            lifecycle=row[_LIFECYCLE] if row else "DISCOVERED",
            effect_gate_open=bool(row[_GATE_OPEN]) if row else False,
            tenant_gate_open=row is None or not row[_TENANT_CLOSED],
        )
    return rules


# What a rule takes from its contract alone, by the contract's identity and digest (the
# digest names the content, so an entry never goes stale): made once per process instead
# of at every decision of every run.
_CONTRACT_RULES: dict[tuple[str, str, str], dict[str, Any]] = {}


def _contract_rule(contract: Contract) -> dict[str, Any]:
    key = (contract.id, contract.version, contract.digest)
    made = _CONTRACT_RULES.get(key)
    if made is None:
        made = _CONTRACT_RULES[key] = {
            "id": contract.id,
            "kind": contract.kind.value,
            "requires_approval": contract.requires_approval,
            "model_fields": frozenset(contract.fields_by(Provenance.MODEL)),
            "trusted_fields": frozenset(
                contract.fields_by(Provenance.HARNESS) + contract.fields_by(Provenance.ADAPTER)
            ),
            "retry_budgets": MappingProxyType(
                {
                    r.code.value: r.retry_budget
                    for r in contract.errors
                    if r.transition in ("observation.received", "effect.rejected")
                }
            ),
            "location_bound": bool(contract.scope.get("location_bound")),
        }
    return made


# The model projection's input schema of each contract version (a contract's digest names
# its content, so the schema of a key never changes).
_MODEL_SCHEMAS: dict[tuple[str, str, str], Mapping[str, Any]] = {}


def model_schema_errors(run: Run) -> Any:
    """Check model arguments against the model projection of the version ``run`` pinned."""
    from capabilities.base import schema_errors
    from capabilities.contracts import model_projection

    def check(capability: str, args: Mapping[str, Any]) -> list[str]:
        contract = pinned_contract(run, capability) or registry.ALL_CONTRACTS[capability]
        key = (contract.id, contract.version, contract.digest)
        schema = _MODEL_SCHEMAS.get(key)
        if schema is None:
            schema = _MODEL_SCHEMAS[key] = model_projection(contract)["input_schema"]
        return schema_errors(schema, dict(args))

    return check


def canonical_proposal(
    observations: Mapping[str, Mapping[str, Any]],
) -> tuple[Mapping[str, Any] | None, str]:
    """The latest admitted canonical proposal of the run, and its hash."""
    for obs in reversed(list(observations.values())):
        if obs.get("capability") == "propose_reservation" and obs.get("ok"):
            return obs["data"]["proposal"], obs["data"]["proposal_hash"]
    return None, ""


# What validation and completion need of the run's approval of a proposal: the newest
# checkpoint's status and expiry and whether its decision is recorded (not the stored
# proposal and evidence view a checkpoint also holds), then the attempts that consumed it.
_CHECKPOINT_OF = Statement(
    "SELECT c.status, c.expires_at, d.id FROM approvals_checkpoint c "
    "LEFT JOIN approvals_decision d ON d.checkpoint_id = c.id "
    "WHERE c.run_id = %s AND c.kind = %s AND c.proposal_hash = %s "
    "ORDER BY c.created_at DESC LIMIT 1"
)
_EXPIRES_AT = Checkpoint._meta.get_field("expires_at")
_ATTEMPTS_OF = Statement(
    "SELECT status, answer FROM runs_effectattempt "
    "WHERE run_id = %s AND proposal_hash = %s ORDER BY dispatch_sequence"
)


def approval_view(run: Run, proposal_hash: str) -> validation.ApprovalView | None:
    if not proposal_hash:
        return None
    run_pk = rows.run_pk(run.pk)
    found = _CHECKPOINT_OF.one([run_pk, Checkpoint.Kind.APPROVAL.value, proposal_hash])
    if found is None:
        return None
    status, expires_at, decision_id = found
    expires_at = converted(_EXPIRES_AT, expires_at)
    without_effect = False
    answer = ""
    if status == Checkpoint.Status.USED:
        attempts = _ATTEMPTS_OF.rows([run_pk, proposal_hash])
        without_effect = bool(attempts) and all(a[0] in effects.NO_EFFECT for a in attempts)
        if without_effect and attempts[-1][0] == AttemptStatus.ABSENT:
            answer = attempts[-1][1]
    if status == Checkpoint.Status.APPROVED and decision_id is None:
        status = "PENDING"
    return validation.ApprovalView(
        proposal_hash=proposal_hash,
        status=str(status),
        expires_at=expires_at,
        consumed_without_effect=without_effect,
        definite_answer=answer,
    )


def history(
    run: Run, observations: Mapping[str, Mapping[str, Any]]
) -> list[validation.PriorOutcome]:
    out = [
        validation.PriorOutcome(
            capability=o["capability"],
            args_digest=validation.args_digest(
                o["capability"], o.get("args", {}), o.get("proposal_hash", "")
            ),
            error=o.get("error", ""),
        )
        for o in observations.values()
        if o.get("capability") not in ("request", "answer", "external")
    ]
    for event in readcache.recorded_events(str(run.pk), run.revision):
        payload = event["payload"]
        if event["type"] == EventType.PROPOSAL_DENIED.value and payload.get("capability"):
            out.append(
                validation.PriorOutcome(
                    capability=payload["capability"],
                    args_digest=payload.get("args_digest", ""),
                    error="",
                    denied_reason=payload.get("reason", ""),
                )
            )
    return out


_EVENT_PAYLOAD = Loader(Event, ["payload"])
_LAST_PROPOSAL = Statement(
    "SELECT payload FROM runs_event WHERE run_id = %s AND type = %s ORDER BY sequence DESC LIMIT 1"
)


def decision_visible(run: Run) -> frozenset[str] | None:
    """The capabilities the latest decision's context showed (None: not recorded)."""

    def read() -> Any:
        found = _LAST_PROPOSAL.one([rows.run_pk(run.pk), EventType.PROPOSAL_EMITTED.value])
        payload = _EVENT_PAYLOAD.load(found).payload if found else None
        return payload.get("visible") if payload else None

    # Usually the decision this owner has just stored (runs/readcache.py).
    visible = readcache.latest_visible(str(run.pk), run.revision, read)
    if visible is None:
        return None
    return frozenset(str(name) for name in visible)


def validation_context(run: Run) -> validation.ValidationContext:
    observations = evidence.admitted_observations(str(run.pk), revision=run.revision)
    proposal, proposal_hash = canonical_proposal(observations)
    return validation.ValidationContext(
        state=State(run.state),
        terminal=bool(run.disposition),
        cancelled=run.cancel_revision > 0,
        budgets=Budgets(limits=run.budget_limits, counters=run.counters),
        contract_actions=frozenset(run.components),
        rejected={name: r.reason for name, r in REJECTED.items()},
        rules=capability_rules(run),
        schema_errors=model_schema_errors(run),
        tenant=run.tenant,
        scope=frozenset(run.scope),
        observations=observations,
        now=clock.now(),
        parts=ports.world().reference.parts,
        canonical_proposal=proposal,
        canonical_hash=proposal_hash,
        approval=approval_view(run, proposal_hash),
        history=history(run, observations),
        visible=decision_visible(run),
    )


def proposal_of(run: Run) -> Proposal:
    from runs.domain.proposals import InvalidProposal, from_dict

    content = evidence.contents([run.current_proposal]).get(run.current_proposal)
    if content is None:
        return InvalidProposal("proposal_evidence_missing", run.current_proposal)
    return from_dict(content)


_EVENT_REFS = Loader(Event, ["refs"])
_LAST_EFFECT_REFS = Statement(
    "SELECT refs FROM runs_event WHERE run_id = %s AND type IN (%s, %s) "
    "ORDER BY sequence DESC LIMIT 1"
)
_UNRESOLVED_STATUSES = sorted(effects.UNRESOLVED)  # the partial index's own list, term by term
_UNRESOLVED_COUNT = with_lists(
    "SELECT COUNT(*) FROM runs_effectattempt WHERE run_id = %s AND status IN ({statuses})",
    statuses=len(_UNRESOLVED_STATUSES),
)


def completion_inputs(run: Run) -> CompletionInputs:
    observations = evidence.admitted_observations(str(run.pk), revision=run.revision)
    proposal, proposal_hash = canonical_proposal(observations)
    view = approval_view(run, proposal_hash)
    expected_key = ""
    if proposal is not None:
        expected_key = reserve_part.semantic_key(
            reserve_part.semantic_intent(
                tenant=run.tenant,
                principal_ref=run.principal_ref,
                task_id=run.task_id,
                run_id=str(run.pk),
                proposal_hash=proposal_hash,
                part_id=proposal["part_id"],
                slot_id=proposal["slot_id"],
                quantity=proposal["quantity"],
            )
        )
    ledger = [
        LedgerFact(
            effect_id=e.effect_id,
            idempotency_key=e.idempotency_key,
            intent_matches=e.intent_hash == e.idempotency_key,
            part_id=e.part_id,
            slot_id=e.slot_id,
            quantity=e.quantity,
            tenant=e.tenant,
            status=e.status,
            committed_at=clock.iso(e.committed_at),
        )
        for e in ports.world().ledger(namespace=run.namespace, run_id=str(run.pk))
    ]
    run_pk = rows.run_pk(run.pk)
    found = _LAST_EFFECT_REFS.one(
        [run_pk, EventType.EFFECT_RECORDED.value, EventType.RECONCILIATION_MATCHED.value]
    )
    recorded = _EVENT_REFS.load_values(found)[0] if found is not None else None
    unresolved = _UNRESOLVED_COUNT.one([run_pk, *_UNRESOLVED_STATUSES])
    return CompletionInputs(
        tenant=run.tenant,
        observations=observations,
        canonical_proposal=proposal,
        canonical_hash=proposal_hash,
        approval_status=view.status if view else None,
        expected_key=expected_key,
        ledger=ledger,
        recorded_effect_id=(recorded or {}).get("effect", ""),
        unresolved_attempts=unresolved[0] if unresolved is not None else 0,
        parts=ports.world().reference.parts,
    )
