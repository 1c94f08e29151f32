"""The fault lab (SPEC §8): deterministic fixtures, each with the disposition it must reach.

Every fixture runs real runs through the real runner and authority in the ``faultlab``
world namespace (the live ledger and inventory are never touched), acting as the
``faultlab-operator`` requester and the ``faultlab-approver`` reviewer. Each fixture
returns its actual outcome and named checks; ``manage.py faultlab`` and the console run
the same list, and the test suite asserts every one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from approvals import services as approvals
from approvals.models import ApprovalPolicy, ApprovalVote, Checkpoint, Decision, DecisionRefusal
from capabilities import ports, registry
from fieldops import points
from kernel import clock
from runs import authority, callbacks, services
from runs.authority import config_of, record_of
from runs.domain.replay import replay
from runs.domain.states import Actor, EventType
from runs.engine import effects as effect_steps
from runs.engine import executor, ownership, runner, sweeper
from runs.models import Correlation, EffectAttempt, Event, Evidence, FaultLabResult, Run
from runs.replay.audit import audit_replay
from sim.setup import FAULTLAB_NAMESPACE
from sim.world.models import LedgerEntry, ServiceRequest

# Every fixture runs in this tenant (its faultlab namespace): only its operators run them.
TENANT = "north"
REQUESTER = "faultlab-operator"
APPROVER = "faultlab-approver"
# The fault lab's approval policy: in its world a reservation of 2 or more needs 2 approvers.
QUORUM_POLICY = "faultlab-quorum"


@dataclass
class FixtureOutcome:
    run: Run | None
    state: str
    reason: str
    checks: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # What a run rolled back with its fixture did (``history_of``): kept with the result,
    # since the run itself is gone.
    history: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fixture:
    name: str
    injects: str
    expect_state: str
    expect_reason: str
    script: Callable[[Lab], FixtureOutcome]
    group: str = "engine"


@dataclass(frozen=True)
class FixtureResult:
    name: str
    injects: str
    expected: str
    actual: str
    passed: bool
    run_id: str
    failed_checks: tuple[str, ...]
    notes: tuple[str, ...]
    history: Mapping[str, Any] = field(default_factory=dict)


def _later(*, seconds: float) -> contextlib.AbstractContextManager[None]:
    """Move the clock ``seconds`` ahead for this thread only (the fixture drives its runs
    in-process): the console's other requests and its sweeper thread keep the real clock,
    so nothing of the live world expires because a fixture made time pass."""
    return clock.at_least(clock.now() + dt.timedelta(seconds=seconds))


class Lab:
    """What a fixture script may do: start runs, advance them, decide, cancel, inspect."""

    def __init__(self) -> None:
        user_model = get_user_model()
        self.requester = user_model.objects.get(username=REQUESTER)
        self.approver = user_model.objects.get(username=APPROVER)
        self.approvers = [
            self.approver,
            *(user_model.objects.get(username=f"{APPROVER}-{n}") for n in (2, 3)),
        ]

    def start(
        self,
        scenario: str = "reservation",
        *,
        faults: Iterable[Mapping[str, Any]] = (),
        advance: bool = True,
        **kw: Any,
    ) -> Run:
        run = services.run_create(
            scenario=scenario,
            tenant=TENANT,
            principal_ref=f"user:{REQUESTER}",
            requested_by=self.requester,
            fault_plan=list(faults),
            namespace=FAULTLAB_NAMESPACE,
            start=False,
            **kw,
        )
        if advance:
            self.advance(run)
        run.refresh_from_db()
        return run

    def advance(self, run: Run) -> Run:
        runner.advance(str(run.pk), worker="faultlab")
        run.refresh_from_db()
        return run

    def approve(self, run: Run, *, seen_hash: str | None = None) -> approvals.DecisionResult:
        run.refresh_from_db()
        checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
        result = approvals.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=self.approver,
            approve=True,
            seen_hash=checkpoint.proposal_hash if seen_hash is None else seen_hash,
            reason="fault lab: scripted approver",
        )
        self.advance(run)
        return result

    def decide_as(
        self, user: Any, run: Run, *, approve: bool = True, advance: bool = True
    ) -> approvals.DecisionResult:
        """Decide the run's waiting checkpoint as ``user``, on the hash it shows."""
        run.refresh_from_db()
        checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
        result = approvals.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=user,
            approve=approve,
            seen_hash=checkpoint.proposal_hash,
            reason=f"fault lab: {user.get_username()}",
        )
        if advance:
            self.advance(run)
        return result

    def start_quorum(self) -> Run:
        """A reservation of 2 in the fault lab's world, where a policy needs 2 approvers."""
        ApprovalPolicy.objects.update_or_create(
            tenant=TENANT,
            name=QUORUM_POLICY,
            defaults={
                "capability": "reserve_part",
                "world": FAULTLAB_NAMESPACE,
                "quorum": 2,
                "quorum_min_quantity": 2,
            },
        )
        return self.start(quantity=2)

    def approve_until_done(self, run: Run, limit: int = 4) -> Run:
        for _ in range(limit):
            run.refresh_from_db()
            checkpoint = Checkpoint.objects.filter(
                pk=run.waiting_checkpoint, kind=Checkpoint.Kind.APPROVAL
            ).first()
            if checkpoint is None:
                break
            self.approve(run)
        run.refresh_from_db()
        return run

    def outcome(self, run: Run, **checks: bool) -> FixtureOutcome:
        run.refresh_from_db()
        _, findings = audit_replay(run)
        checks.setdefault("audit replay has no findings", not findings)
        return FixtureOutcome(
            run,
            run.state,
            run.terminal_reason,
            dict(checks),
            [f"{f.kind}@{f.sequence}: {f.detail}" for f in findings],
        )


# -- helpers -----------------------------------------------------------------------------
def types(run: Run) -> list[str]:
    return list(Event.objects.filter(run=run).order_by("sequence").values_list("type", flat=True))


def reasons(run: Run, event_type: EventType) -> list[str]:
    return list(
        Event.objects.filter(run=run, type=event_type.value)
        .order_by("sequence")
        .values_list("reason_code", flat=True)
    )


def service_calls(run: Run, capability: str | None = None) -> int:
    rows = ServiceRequest.objects.filter(run_id=str(run.pk), operation="invoke")
    return rows.filter(capability=capability).count() if capability else rows.count()


def ledger(run: Run) -> list[LedgerEntry]:
    return list(LedgerEntry.objects.filter(namespace=run.namespace, run_id=str(run.pk)))


def _fault(point: str, capability: str = "*", on_call: int = 1) -> dict[str, Any]:
    return {"point": point, "capability": capability, "on_call": on_call}


# -- the registry: each fixture is declared by the decorator on its script ----------------
FIXTURES: list[Fixture] = []


def fixture(
    name: str, *, injects: str, expect: tuple[str, str], group: str = "engine"
) -> Callable[[Callable[[Lab], FixtureOutcome]], Callable[[Lab], FixtureOutcome]]:
    """Declare a fixture: what it injects and the disposition it must reach, next to the
    script that runs it. Fixtures run (and are listed) in the order they are declared."""

    def register(script: Callable[[Lab], FixtureOutcome]) -> Callable[[Lab], FixtureOutcome]:
        if any(f.name == name for f in FIXTURES):
            raise ValueError(f"fault fixture {name!r} declared twice")
        FIXTURES.append(Fixture(name, injects, expect[0], expect[1], script, group))
        return script

    return register


# -- the frozen six --------------------------------------------------------------------------
@fixture(
    "unavailable_tool_loop",
    injects="policy keeps requesting lookup_stock",
    expect=("FAILED", "action_budget_exhausted"),
    group="frozen six",
)
def fx_unavailable_tool_loop(lab: Lab) -> FixtureOutcome:
    run = lab.start("unavailable_tool")
    return lab.outcome(
        run,
        **{
            "no capability was invoked": service_calls(run) == 0,
            "every request was denied as unknown": set(reasons(run, EventType.PROPOSAL_DENIED))
            == {"unknown_capability"},
        },
    )


@fixture(
    "early_success",
    injects="final claim right after reading the manual",
    expect=("FAILED", "completion_evidence_missing"),
    group="frozen six",
)
def fx_early_success(lab: Lab) -> FixtureOutcome:
    run = lab.start("early_success")
    rejected = Event.objects.filter(run=run, type=EventType.COMPLETION_REJECTED.value)
    reasons_text = " ".join(" ".join(e.payload.get("reasons", [])) for e in rejected)
    return lab.outcome(
        run,
        **{
            "completion was rejected with missing-evidence reasons": rejected.exists()
            and "no canonical proposal" in reasons_text,
            "no effect exists": not ledger(run),
        },
    )


@fixture(
    "invalid_arguments",
    injects="check_inventory without part_id",
    expect=("FAILED", "correction_budget_exhausted"),
    group="frozen six",
)
def fx_invalid_arguments(lab: Lab) -> FixtureOutcome:
    run = lab.start("invalid_arguments")
    return lab.outcome(
        run,
        **{
            "the invalid call never reached an adapter": service_calls(run, "check_inventory") == 0,
            "denied as schema-invalid": "schema_invalid" in reasons(run, EventType.PROPOSAL_DENIED),
        },
    )


@fixture(
    "ignored_cancellation",
    injects="cancellation while the policy answers",
    expect=("CANCELLED", "cancelled_no_dispatch"),
    group="frozen six",
)
def fx_ignored_cancellation(lab: Lab) -> FixtureOutcome:
    run = lab.start(faults=[_fault("after_model_response")])
    rejected_after_cancel = EventType.PROPOSAL_REJECTED_AFTER_CANCEL.value in types(run)
    return lab.outcome(
        run,
        **{
            "the late proposal was recorded as rejected": rejected_after_cancel,
            "no capability was invoked after cancellation": service_calls(run) == 0,
        },
    )


@fixture(
    "repeated_effect",
    injects="duplicate proposal and duplicate dispatch after the effect",
    expect=("COMPLETED", "all_predicates_pass"),
    group="frozen six",
)
def fx_repeated_effect(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start())
    attempt = EffectAttempt.objects.get(run=run, status=EffectAttempt.Status.CONFIRMED)
    # A duplicate model proposal arrives late (transport replay): the run has ended.
    late = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.PROPOSAL_EMITTED,
        actor=Actor.MODEL,
        reason_code="action",
    )
    # The same dispatch is delivered again with the same key: the ledger dedupes it.
    inv = effect_steps.invocation_for(
        run, _last_reserve(run), fencing_token=attempt.dispatch_sequence
    )
    again = registry.dispatch(inv, ports.for_run(run.namespace, str(run.pk), run.fault_plan))
    return lab.outcome(
        run,
        **{
            "the late proposal was rejected": not late.applied,
            "a second dispatch returns the original effect": again.ok
            and again.data.get("effect_id") == attempt.effect_id,
            "exactly one effect in the ledger": len(ledger(run)) == 1,
        },
    )


def _last_reserve(run: Run) -> Any:
    from runs.domain.proposals import ActionIntent, from_dict

    for content in (
        Evidence.objects.filter(run=run, kind="proposal")
        .order_by("-created_at")
        .values_list("content", flat=True)
    ):
        proposal = from_dict(content)
        if isinstance(proposal, ActionIntent) and proposal.capability == "reserve_part":
            return proposal
    raise LookupError("no reserve_part proposal")


@fixture(
    "illegal_transition",
    injects="a tool result while waiting for approval",
    expect=("WAITING_HUMAN", ""),
    group="frozen six",
)
def fx_illegal_transition(lab: Lab) -> FixtureOutcome:
    run = lab.start()
    result = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=None,
        type=EventType.OBSERVATION_RECEIVED,
        actor=Actor.CAPABILITY_ADAPTER,
        reason_code="ok",
    )
    run.refresh_from_db()
    return lab.outcome(
        run,
        **{
            "the tool result was refused": not result.applied,
            "recorded as illegal_transition": reasons(run, EventType.TRANSITION_REJECTED)
            == ["illegal_transition"],
        },
    )


# -- engine fixtures -------------------------------------------------------------------------
@fixture(
    "stale_owner", injects="old worker writes after a lease takeover", expect=("WAITING_HUMAN", "")
)
def fx_stale_owner(lab: Lab) -> FixtureOutcome:
    run = lab.start(advance=False)
    old = ownership.claim(str(run.pk), "worker-old")
    assert isinstance(old, ownership.Claim)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=clock.now())
    new = ownership.claim(str(run.pk), "worker-new")
    assert isinstance(new, ownership.Claim)
    run.refresh_from_db()
    stale = authority.append(
        run_id=str(run.pk),
        expected_revision=run.revision,
        expected_epoch=old.epoch,
        type=EventType.RUN_STARTED,
        actor=Actor.HARNESS,
        reason_code="contract_valid",
    )
    ownership.release(new)
    lab.advance(run)
    return lab.outcome(
        run,
        **{
            "the stale owner's write was rejected": not stale.applied and stale.stale_owner,
            "stale_owner.rejected recorded": EventType.STALE_OWNER_REJECTED.value in types(run),
            "the takeover is a new attempt": run.attempt == 2
            and EventType.RUN_RECOVERED.value in types(run),
        },
    )


@fixture(
    "post_terminal_callback",
    injects="callback after the run was cancelled",
    expect=("CANCELLED", "cancelled_no_dispatch"),
)
def fx_post_terminal_callback(lab: Lab) -> FixtureOutcome:
    run = lab.start("wait_external")
    correlation = Correlation.objects.get(pk=run.waiting_correlation)
    services.run_cancel(run_id=str(run.pk), by_ref="faultlab", reason="fault lab: end it")
    got = callbacks.callback_receive(
        delivery_id=f"dl-{run.pk.hex[:12]}",
        correlation_id=correlation.pk,
        attempt=correlation.attempt,
        owner_epoch=correlation.owner_epoch,
        response_type=correlation.expected_response_type,
        payload={"window": "tomorrow"},
    )
    run.refresh_from_db()
    return lab.outcome(
        run,
        **{
            "the callback was recorded as post-terminal": got.outcome == "post_terminal",
            "transition.rejected appended": "post_terminal_callback"
            in reasons(run, EventType.TRANSITION_REJECTED),
        },
    )


@fixture(
    "external_wait",
    injects="orphan, old-epoch, correlated and duplicate callbacks",
    expect=("WAITING_HUMAN", ""),
)
def fx_external_wait(lab: Lab) -> FixtureOutcome:
    run = lab.start("wait_external")
    correlation = Correlation.objects.get(pk=run.waiting_correlation)
    orphan = callbacks.callback_receive(
        delivery_id=f"dl-orphan-{run.pk.hex[:8]}",
        correlation_id="co-unknown",
        attempt=1,
        owner_epoch=1,
        response_type="x",
        payload={},
    )
    old = callbacks.callback_receive(
        delivery_id=f"dl-old-{run.pk.hex[:8]}",
        correlation_id=correlation.pk,
        attempt=correlation.attempt,
        owner_epoch=correlation.owner_epoch - 1,
        response_type=correlation.expected_response_type,
        payload={},
    )
    delivery = f"dl-ok-{run.pk.hex[:8]}"
    ok = callbacks.callback_receive(
        delivery_id=delivery,
        correlation_id=correlation.pk,
        attempt=correlation.attempt,
        owner_epoch=correlation.owner_epoch,
        response_type=correlation.expected_response_type,
        payload={"window": "tomorrow 08:00"},
    )
    dup = callbacks.callback_receive(
        delivery_id=delivery,
        correlation_id=correlation.pk,
        attempt=correlation.attempt,
        owner_epoch=correlation.owner_epoch,
        response_type=correlation.expected_response_type,
        payload={"window": "tomorrow 08:00"},
    )
    lab.advance(run)
    return lab.outcome(
        run,
        **{
            "orphan callback recorded, nothing moved": orphan.outcome == "orphaned",
            "old-epoch callback denied": old.outcome == "old_epoch",
            "correlated callback accepted": ok.accepted,
            "duplicate delivery deduplicated": dup.outcome == "duplicate"
            and EventType.DUPLICATE_DEDUPLICATED.value in types(run),
        },
    )


@fixture(
    "never_progress",
    injects="policy re-reads the same record forever",
    expect=("FAILED", "action_budget_exhausted"),
)
def fx_never_progress(lab: Lab) -> FixtureOutcome:
    run = lab.start("never_progress")
    return lab.outcome(
        run,
        **{"reads were admitted until the budget ended": service_calls(run, "read_equipment") >= 1},
    )


@fixture(
    "premature_artifact",
    injects="correct final artifact before the effect exists",
    expect=("FAILED", "completion_evidence_missing"),
)
def fx_premature_artifact(lab: Lab) -> FixtureOutcome:
    run = lab.start("premature_artifact")
    return lab.outcome(
        run,
        **{
            "the correct-looking artifact was rejected": EventType.COMPLETION_REJECTED.value
            in types(run),
            "no effect exists": not ledger(run),
        },
    )


@fixture(
    "forged_trusted_field",
    injects="model supplies the tenant itself",
    expect=("FAILED", "correction_budget_exhausted"),
)
def fx_forged_field(lab: Lab) -> FixtureOutcome:
    run = lab.start("forged_field")
    return lab.outcome(
        run,
        **{
            "denied: trusted field supplied by the model": "trusted_field_supplied"
            in reasons(run, EventType.PROPOSAL_DENIED),
            "never reached an adapter": service_calls(run) == 0,
        },
    )


@fixture(
    "mixed_output",
    injects="a final answer and a tool call in one turn ended as an answer (a preamble "
    "before one call in a turn stopped for tool use is commentary, checked alongside)",
    expect=("FAILED", "correction_budget_exhausted"),
)
def fx_mixed_output(lab: Lab) -> FixtureOutcome:
    # The preamble rule (SPEC §2): text before one call in a turn the provider stopped for
    # tool use is commentary; a final answer with a call (a turn ended as an answer) is not.
    run = lab.start("mixed_output")
    preamble = lab.start("preamble")
    emitted = list(
        Event.objects.filter(run=preamble, type=EventType.PROPOSAL_EMITTED.value).order_by(
            "sequence"
        )
    )
    notes = Evidence.objects.filter(run=preamble, kind="commentary")
    return lab.outcome(
        run,
        **{
            "a final answer with a tool call is INVALID_PROPOSAL": "invalid_proposal:mixed_output"
            in reasons(run, EventType.PROPOSAL_DENIED),
            "text before one call in a turn stopped for tool use is admitted as commentary": (
                bool(emitted)
                and all(e.reason_code != "invalid" and "commentary" in e.refs for e in emitted)
                and not reasons(preamble, EventType.PROPOSAL_DENIED)
                and preamble.state == "WAITING_HUMAN"
            ),
            "the commentary is evidence, never the proposal": notes.count() == len(emitted)
            and all(
                "as good as done" not in str(Evidence.objects.get(pk=e.refs["proposal"]).content)
                for e in emitted
            ),
        },
    )


@fixture("abstain", injects="no_applicable_tool", expect=("ESCALATED", "no_applicable_tool"))
def fx_abstain(lab: Lab) -> FixtureOutcome:
    return lab.outcome(lab.start("abstain"))


@fixture(
    "clarification", injects="ask_user, answered by the requester", expect=("WAITING_HUMAN", "")
)
def fx_clarification(lab: Lab) -> FixtureOutcome:
    run = lab.start("clarify")
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    answered = approvals.clarification_answer(
        checkpoint_id=checkpoint.pk, user=lab.requester, answer="LOC-N1"
    )
    lab.advance(run)
    return lab.outcome(
        run,
        **{
            "the requester's answer was admitted": answered.recorded,
            "the run moved on to an approval": EventType.APPROVAL_REQUIRED.value in types(run),
        },
    )


@fixture(
    "missing_event",
    injects="one event removed from the stored history",
    expect=("WAITING_HUMAN", ""),
)
def fx_missing_event(lab: Lab) -> FixtureOutcome:
    run = lab.start()
    records = [record_of(e) for e in Event.objects.filter(run=run).order_by("sequence")]
    removed = records[:5] + records[6:]
    result = replay(config_of(run), removed)
    gap = [f for f in result.findings if f.kind == "gap"]
    return FixtureOutcome(
        run,
        run.state,
        run.terminal_reason,
        {
            "replay reports the gap at the removed sequence": bool(gap) and gap[0].sequence == 7,
            "replay does not invent the missing event": result.events_applied == 5,
        },
    )


@fixture("decreased_counter", injects="a stored counter decreased", expect=("WAITING_HUMAN", ""))
def fx_decreased_counter(lab: Lab) -> FixtureOutcome:
    run = lab.start()
    records = [record_of(e) for e in Event.objects.filter(run=run).order_by("sequence")]
    index = next(i for i, r in enumerate(records) if r.budget.get("turns", 0) >= 2)
    budget = {**records[index].budget, "turns": 0}
    records[index] = dataclasses.replace(records[index], budget=budget)
    result = replay(config_of(run), records)
    kinds = {f.kind for f in result.findings}
    return FixtureOutcome(
        run,
        run.state,
        run.terminal_reason,
        {
            "replay reports the decreasing counter": "decreasing_counter" in kinds,
            "replay reports the broken hash link": "broken_hash_link" in kinds,
        },
    )


@fixture(
    "duplicate_event",
    injects="same event id: same content, then different content",
    expect=("FAILED", "event_integrity_conflict"),
)
def fx_duplicate_event(lab: Lab) -> FixtureOutcome:
    run = lab.start(advance=False)
    event_id = str(uuid.uuid4())
    first = authority.append(
        run_id=str(run.pk),
        expected_revision=0,
        expected_epoch=None,
        type=EventType.BUDGET_CHANGED,
        actor=Actor.OPERATOR,
        reason_code="operator_decision",
        event_id=event_id,
        payload={"limits": {"turns": 30}, "reason": "fault lab"},
    )
    again = authority.append(
        run_id=str(run.pk),
        expected_revision=0,
        expected_epoch=None,
        type=EventType.BUDGET_CHANGED,
        actor=Actor.OPERATOR,
        reason_code="operator_decision",
        event_id=event_id,
        payload={"limits": {"turns": 30}, "reason": "fault lab"},
    )
    conflict = False
    try:
        authority.append(
            run_id=str(run.pk),
            expected_revision=1,
            expected_epoch=None,
            type=EventType.BUDGET_CHANGED,
            actor=Actor.OPERATOR,
            reason_code="operator_decision",
            event_id=event_id,
            payload={"limits": {"turns": 31}, "reason": "fault lab"},
        )
    except authority.IntegrityConflict:
        conflict = True
    return lab.outcome(
        run,
        **{
            "identical content returns the prior result": first.applied
            and again.applied
            and first.event is not None
            and again.event is not None
            and first.event.sequence == again.event.sequence,
            "different content is an integrity conflict": conflict,
        },
    )


@fixture(
    "component_version_drift",
    injects="run pinned a digest the catalog no longer holds",
    expect=("FAILED", "component_version_drift"),
)
def fx_version_drift(lab: Lab) -> FixtureOutcome:
    pins = services.pinned_components()
    version = pins["check_inventory"].split("#")[0]
    pins["check_inventory"] = f"{version}#0000000000000000"
    run = lab.start(components=pins)
    return lab.outcome(
        run,
        **{
            "no inventory read was dispatched under drifted semantics": service_calls(
                run, "check_inventory"
            )
            == 0
        },
    )


def fx_cancel_at(point: str) -> Callable[[Lab], FixtureOutcome]:
    def script(lab: Lab) -> FixtureOutcome:
        run = lab.start(faults=[_fault(point)])
        if point in ("before_effect_dispatch", "after_effect_dispatch"):
            run = lab.approve_until_done(run)
        if point == "while_waiting_approval":
            services.run_cancel(
                run_id=str(run.pk), by_ref="faultlab", reason="fault lab: cancel while waiting"
            )
            run.refresh_from_db()
        sweeper.sweep()
        run.refresh_from_db()
        effects = ledger(run)
        checks = {"cancellation won": run.state == "CANCELLED"}
        if point == "after_effect_dispatch":
            checks["the possible effect was reconciled: exactly one"] = len(effects) == 1 and (
                EventType.EFFECT_RECONCILED.value in types(run)
            )
        else:
            checks["no effect exists"] = not effects
        if point in ("before_effect_dispatch", "while_waiting_approval"):
            checks["the approval was never used by a sent request"] = not (
                EffectAttempt.objects.filter(run=run)
                .exclude(status=EffectAttempt.Status.NOT_SENT)
                .exists()
            )
        return lab.outcome(run, **checks)

    return script


# -- effect fixtures ---------------------------------------------------------------------------
@fixture(
    "reservation",
    injects="none: the R-401 walkthrough",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_reservation(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start())
    return lab.outcome(run, **{"exactly one effect in the ledger": len(ledger(run)) == 1})


# The cancellation fixtures share one script, parameterised by the safe point.
fixture(
    "cancel_before_model_dispatch",
    injects="cancellation before a policy call",
    expect=("CANCELLED", "cancelled_no_dispatch"),
)(fx_cancel_at("before_model_dispatch"))
fixture(
    "cancel_before_capability_admission",
    injects="cancellation before validation admits",
    expect=("CANCELLED", "cancelled_no_dispatch"),
)(fx_cancel_at("before_capability_admission"))
fixture(
    "cancel_while_waiting_approval",
    injects="cancellation while the approval is pending",
    expect=("CANCELLED", "cancelled_no_dispatch"),
)(fx_cancel_at("while_waiting_approval"))
fixture(
    "cancel_before_effect_dispatch",
    injects="cancellation after the dispatch record, before sending",
    expect=("CANCELLED", "cancelled_no_dispatch"),
    group="effect",
)(fx_cancel_at("before_effect_dispatch"))
fixture(
    "cancel_after_effect_dispatch",
    injects="cancellation after the effect may have committed",
    expect=("CANCELLED", "cancelled_effect_unknown"),
    group="effect",
)(fx_cancel_at("after_effect_dispatch"))


@fixture(
    "approval_decline",
    injects="decline with a requested slot change",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_approval_decline(lab: Lab) -> FixtureOutcome:
    run = lab.start()
    first = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    approvals.approval_decide(
        checkpoint_id=first.pk,
        user=lab.approver,
        approve=False,
        seen_hash=first.proposal_hash,
        reason="use the smaller slot",
        requested_change={"slot_id": "S-N1-02"},
    )
    lab.advance(run)
    second = Checkpoint.objects.filter(run=run, status=Checkpoint.Status.PENDING).first()
    run = lab.approve_until_done(run)
    effects = ledger(run)
    return lab.outcome(
        run,
        **{
            "the change became a new proposal with a new hash": second is not None
            and second.proposal_hash != first.proposal_hash
            and second.canonical.get("slot_id") == "S-N1-02",
            "the next decision saw the requested change": second is not None
            and second.prior_requested_change == {"slot_id": "S-N1-02"},
            "the effect used the changed slot": len(effects) == 1
            and effects[0].slot_id == "S-N1-02",
        },
    )


@fixture(
    "ambiguous_effect",
    injects="commit, then the response is lost",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_ambiguous_effect(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(
        lab.start(faults=[_fault("after_commit_before_response", "reserve_part")])
    )
    return lab.outcome(
        run,
        **{
            "entered RECOVERING and matched the ledger": "ledger_matched"
            in reasons(run, EventType.RECONCILIATION_MATCHED),
            "exactly one effect": len(ledger(run)) == 1,
            "dispatched once": service_calls(run, "reserve_part") == 1,
        },
    )


@fixture(
    "ledger_outage",
    injects="lost response and the ledger is unavailable",
    expect=("ESCALATED", "ledger_unavailable"),
    group="effect",
)
def fx_ledger_outage(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(
        lab.start(
            faults=[
                _fault("after_commit_before_response", "reserve_part"),
                _fault("ledger_unavailable", "reserve_part"),
            ]
        )
    )
    attempt = EffectAttempt.objects.filter(run=run).order_by("-created_at").first()
    record = run.terminal_record
    return lab.outcome(
        run,
        **{
            "the effect obligation stays visible": attempt is not None
            and attempt.status == EffectAttempt.Status.UNRESOLVED
            and {"attempt": attempt.pk} in record.unresolved,
            "no second dispatch": service_calls(run, "reserve_part") == 1,
        },
    )


@fixture(
    "same_key_different_intent",
    injects="the ledger holds the key with another intent",
    expect=("ESCALATED", "same_key_different_intent"),
    group="effect",
)
def fx_same_key_different_intent(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start(faults=[_fault("key_conflict", "reserve_part")]))
    return lab.outcome(
        run,
        **{
            "the ledger entry was not overwritten": len(ledger(run)) == 1
            and ledger(run)[0].quantity == 2
        },
    )


@fixture(
    "malformed_result",
    injects="success without effect id or commit time",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_malformed_result(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start(faults=[_fault("malformed_response", "reserve_part")]))
    return lab.outcome(
        run,
        **{
            "the malformed success was not recorded as an effect": EventType.EFFECT_RECORDED.value
            not in types(run)
            and "MALFORMED_RESULT" in reasons(run, EventType.EFFECT_AMBIGUOUS),
            "completion came from the ledger, once": len(ledger(run)) == 1,
        },
    )


@fixture(
    "stale_read",
    injects="inventory observation older than its freshness rule",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_stale_read(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start(faults=[_fault("stale_read", "check_inventory")]))
    return lab.outcome(
        run, **{"one fresh read replaced the stale one": service_calls(run, "check_inventory") == 2}
    )


@fixture(
    "stale_at_dispatch",
    injects="approval arrives after the inventory evidence aged",
    expect=("WAITING_HUMAN", ""),
    group="effect",
)
def fx_stale_at_dispatch(lab: Lab) -> FixtureOutcome:
    run = lab.start()
    first = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    with _later(seconds=600):
        lab.approve(run)
    decision = Decision.objects.get(checkpoint=first)
    return lab.outcome(
        run,
        **{
            "denied STALE at revalidation": "evidence_stale"
            in reasons(run, EventType.PROPOSAL_DENIED),
            "the approval was not consumed": decision.consumed_at is None,
            "no effect": not ledger(run),
        },
    )


@fixture(
    "denied_scope",
    injects="inventory read at a location not delegated",
    expect=("ESCALATED", "repeated_denial"),
    group="effect",
)
def fx_denied_scope(lab: Lab) -> FixtureOutcome:
    run = lab.start("denied_scope")
    return lab.outcome(
        run,
        **{
            "the other location was never read": not ServiceRequest.objects.filter(
                run_id=str(run.pk), capability="check_inventory"
            ).exists(),
            "first denial was scope_denied": "scope_denied"
            in reasons(run, EventType.PROPOSAL_DENIED),
        },
    )


@fixture(
    "cross_tenant_result",
    injects="a read returns another tenant's record",
    expect=("ESCALATED", "retry_budget_exhausted"),
    group="effect",
)
def fx_cross_tenant_result(lab: Lab) -> FixtureOutcome:
    run = lab.start(faults=[_fault("cross_tenant_result", "check_inventory")])
    contexts = Evidence.objects.filter(run=run, kind="context").values_list("content", flat=True)
    leaked = any('"tenant": "south"' in str(c).replace("'", '"') for c in contexts)
    return lab.outcome(
        run,
        **{
            "the cross-tenant result was quarantined": Evidence.objects.filter(
                run=run, kind="quarantine"
            ).exists(),
            "it never entered a model context": not leaked,
            "the unchanged retry escalated": "retry_budget_exhausted"
            in reasons(run, EventType.ESCALATION_ADMITTED),
        },
    )


@fixture(
    "prompt_injection",
    injects="a manual passage instructs the agent",
    expect=("COMPLETED", "all_predicates_pass"),
    group="effect",
)
def fx_prompt_injection(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start("injection"))
    return lab.outcome(
        run,
        **{
            "the injected instruction was denied": "capability_rejected"
            in reasons(run, EventType.PROPOSAL_DENIED),
            "nothing but the approved reservation happened": len(ledger(run)) == 1,
        },
    )


# -- capability versions (issue 16) --------------------------------------------------------
class _Discard(Exception):
    """Raised to roll back a fixture whose catalog change must not outlive it."""


def _isolated(lab: Lab, script: Callable[[Lab], FixtureOutcome], why: str) -> FixtureOutcome:
    """Run ``script`` in a transaction that is rolled back afterwards.

    Retiring a version is final and catalog-wide: a fixture that retires one (or closes a
    gate) must not change what the console's real runs execute. The outcome is computed
    inside; its run and the catalog change are discarded with the transaction.
    """
    from django.db import transaction

    kept: list[FixtureOutcome] = []
    try:
        with transaction.atomic():
            outcome = script(lab)
            history = history_of(outcome.run) if outcome.run is not None else {}
            kept.append(dataclasses.replace(outcome, history=history))
            raise _Discard
    except _Discard:
        pass
    outcome = kept[0]
    note = f"rolled back after the checks: {why}"
    return dataclasses.replace(outcome, run=None, notes=[*outcome.notes, note])


def history_of(run: Run) -> dict[str, Any]:
    """What a run did, as the fixture's stored result keeps it once the run is rolled back:
    its disposition and each event's sequence, type, actor, reason and states."""
    run.refresh_from_db()
    events = Event.objects.filter(run=run).order_by("sequence")
    return {
        "run_id": str(run.pk),
        "state": run.state,
        "reason": run.terminal_reason,
        "events": [
            {
                "sequence": e.sequence,
                "type": e.type,
                "actor": e.actor,
                "reason_code": e.reason_code,
                "prev_state": e.prev_state,
                "next_state": e.next_state,
            }
            for e in events
        ],
    }


def _catalog_row(ref: str) -> Any:
    from catalog.models import CapabilityVersion

    capability_id, _, version = ref.rpartition("@")
    return CapabilityVersion.objects.get(capability_id=capability_id, version=version)


@fixture(
    "retired_pinned_version",
    injects="search_manual@1.0.0 retired (two admins) while a run is pinned to it",
    expect=("ESCALATED", "repeated_denial"),
    group="versions",
)
def fx_retired_pinned_version(lab: Lab) -> FixtureOutcome:
    def script(lab: Lab) -> FixtureOutcome:
        from catalog import services as catalog

        old = _catalog_row("search_manual@1.0.0")
        pins = services.pinned_components()
        pins["search_manual"] = f"{old.version}#{old.digest[:16]}"
        run = lab.start(components=pins, advance=False)
        for user in (lab.requester, lab.approver):  # two people: runs are pinned to it
            catalog.capability_decide(
                version_id=old.pk,
                user=user,
                action="retire",
                reason="fault lab: retired under a pinned run",
                acknowledge=True,
            )
        run = lab.advance(run)
        return lab.outcome(
            run,
            **{
                "the refusal is recorded (capability_retired)": "capability_retired"
                in reasons(run, EventType.PROPOSAL_DENIED),
                "the retired version dispatched nothing": service_calls(run, "search_manual") == 0,
                "the run kept its pin (never switched version)": run.components[
                    "search_manual"
                ].startswith("1.0.0#"),
            },
        )

    return _isolated(lab, script, "retirement is final and catalog-wide")


@fixture(
    "not_exposed",
    injects="check_inventory (admitted) proposed in the diagnose phase, where it is not exposed",
    expect=("COMPLETED", "all_predicates_pass"),
    group="versions",
)
def fx_not_exposed(lab: Lab) -> FixtureOutcome:
    run = lab.approve_until_done(lab.start("skip_ahead"))
    denied = Event.objects.filter(
        run=run, type=EventType.PROPOSAL_DENIED.value, reason_code="not_exposed"
    ).first()
    return lab.outcome(
        run,
        **{
            "denied not_exposed at validation": denied is not None,
            "counted as a correction": denied is not None
            and denied.payload.get("charge") == "corrections",
            "no inventory read before the manual": _first_call(run) != "check_inventory",
        },
    )


def _first_call(run: Run) -> str:
    first = (
        ServiceRequest.objects.filter(run_id=str(run.pk), operation="invoke")
        .order_by("id")
        .values_list("capability", flat=True)
        .first()
    )
    return str(first or "")


@fixture(
    "tenant_gate_closed",
    injects="tenant north's effect gate of reserve_part closed by its operator",
    expect=("ESCALATED", "repeated_denial"),
    group="versions",
)
def fx_tenant_gate_closed(lab: Lab) -> FixtureOutcome:
    def script(lab: Lab) -> FixtureOutcome:
        from catalog import services as catalog

        version = services.pinned_components()["reserve_part"].split("#")[0]
        row = _catalog_row(f"reserve_part@{version}")
        catalog.tenant_gate_set(
            capability_id=row.capability_id,
            version=row.version,
            tenant=TENANT,
            open_gate=False,
            reviewer=lab.requester,
            reason="fault lab: tenant gate closed",
        )
        run = lab.approve_until_done(lab.start())
        return lab.outcome(
            run,
            **{
                "denied tenant_effect_gate_closed": "tenant_effect_gate_closed"
                in reasons(run, EventType.PROPOSAL_DENIED),
                "no effect": not ledger(run),
                "the deployment gate stayed open": _catalog_row(row.ref).effect_gate_open,
                "other tenants' gates stayed open": catalog.tenant_gate_open(row, "south"),
            },
        )

    return _isolated(lab, script, "the gate is a live operator decision")


@fixture(
    "repeated_denial_escalates",
    injects="deployment effect gate closed; the policy repeats the unchanged effect request",
    expect=("ESCALATED", "repeated_denial"),
    group="versions",
)
def fx_repeated_denial(lab: Lab) -> FixtureOutcome:
    def script(lab: Lab) -> FixtureOutcome:
        from catalog import services as catalog
        from runs.domain.validation import REPEATED_DENIAL_LIMIT

        version = services.pinned_components()["reserve_part"].split("#")[0]
        catalog.capability_gate_set(
            capability_id="reserve_part",
            version=version,
            open_gate=False,
            reviewer=lab.requester,
            reason="fault lab: deployment gate closed",
        )
        run = lab.approve_until_done(lab.start())
        denials = reasons(run, EventType.PROPOSAL_DENIED).count("effect_gate_closed")
        return lab.outcome(
            run,
            **{
                f"denied {REPEATED_DENIAL_LIMIT - 1}x, then escalated": denials
                == REPEATED_DENIAL_LIMIT - 1,
                "no effect": not ledger(run),
            },
        )

    return _isolated(lab, script, "the gate is a live catalog decision")


# -- approval quorum (M-of-N) ------------------------------------------------------------
def _quorum_checkpoint(run: Run) -> Checkpoint:
    return Checkpoint.objects.filter(run=run, kind=Checkpoint.Kind.APPROVAL).order_by("created_at")[
        0
    ]


def _refusal_codes(checkpoint: Checkpoint) -> list[str]:
    return list(
        DecisionRefusal.objects.filter(checkpoint=checkpoint)
        .order_by("pk")
        .values_list("code", flat=True)
    )


@fixture(
    "quorum_met",
    injects="a reservation of 2 needs 2 distinct approvers",
    expect=("COMPLETED", "all_predicates_pass"),
    group="quorum",
)
def fx_quorum_met(lab: Lab) -> FixtureOutcome:
    run = lab.start_quorum()
    first, second = lab.approvers[0], lab.approvers[1]
    counted = lab.decide_as(first, run)
    waiting_after_one = lab.advance(run).state == "WAITING_HUMAN"
    granted = lab.decide_as(second, run)
    checkpoint = _quorum_checkpoint(run)
    run = lab.approve_until_done(run)
    attempt = EffectAttempt.objects.filter(run=run).first()
    names = [f"user:{first.get_username()}", f"user:{second.get_username()}"]
    return lab.outcome(
        run,
        **{
            "the checkpoint recorded a quorum of 2": checkpoint.quorum == 2
            and checkpoint.policy_name == QUORUM_POLICY,
            "one approval was counted and the run kept waiting": counted.counted
            and waiting_after_one,
            "the second approval granted": granted.recorded and not granted.counted,
            "the effect's record names every approver": attempt is not None
            and attempt.checkpoint_id == checkpoint.pk
            and Decision.objects.get(checkpoint=checkpoint).approvers == names,
            "exactly one effect in the ledger": len(ledger(run)) == 1,
        },
    )


@fixture(
    "quorum_one_decline",
    injects="one approval, then a decline by the second approver",
    expect=("ESCALATED", "no_applicable_tool"),
    group="quorum",
)
def fx_quorum_one_decline(lab: Lab) -> FixtureOutcome:
    run = lab.start_quorum()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    lab.decide_as(lab.approvers[0], run)
    declined = lab.decide_as(lab.approvers[1], run, approve=False)
    for _ in range(6):
        if lab.advance(run).disposition:
            break
    checkpoint.refresh_from_db()
    return lab.outcome(
        run,
        **{
            "the decline declined the checkpoint": declined.recorded
            and checkpoint.status == Checkpoint.Status.DECLINED,
            "the earlier approval stays recorded": ApprovalVote.objects.filter(
                checkpoint=checkpoint
            ).count()
            == 1,
            "no effect was dispatched": not EffectAttempt.objects.filter(run=run).exists()
            and not ledger(run),
        },
    )


@fixture(
    "quorum_expiry_with_one_approval",
    injects="the checkpoint expires after one of two approvals",
    expect=("ESCALATED", "checkpoint_expired"),
    group="quorum",
)
def fx_quorum_expiry_with_one_approval(lab: Lab) -> FixtureOutcome:
    run = lab.start_quorum()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    lab.decide_as(lab.approvers[0], run)
    with _later(seconds=settings.FIELDOPS_APPROVAL_TTL_SECONDS + 5):
        # What the sweeper does for this checkpoint alone: a sweep would act on every
        # checkpoint that is due at the moved clock, the live world's too.
        approvals.checkpoint_expire(checkpoint_id=checkpoint.pk)
        late = approvals.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=lab.approvers[1],
            approve=True,
            seen_hash=checkpoint.proposal_hash,
            reason="fault lab: the second approval, too late",
        )
    return lab.outcome(
        run,
        **{
            "the late second approval is refused as expired": late.refusal == "checkpoint_expired",
            "the message counts the approvals given": "1 of the 2 approvals" in late.message,
            "the late approval is on the timeline": "late_approval.rejected" in types(run),
            "no effect was dispatched": not ledger(run),
        },
    )


@fixture(
    "quorum_race_last_slot",
    injects="two approvals race for the last slot of a quorum of 2",
    expect=("COMPLETED", "all_predicates_pass"),
    group="quorum",
)
def fx_quorum_race_last_slot(lab: Lab) -> FixtureOutcome:
    run = lab.start_quorum()
    first, second, third = lab.approvers
    lab.decide_as(first, run)
    raced: dict[str, approvals.DecisionResult] = {}
    landed: list[str] = []

    def land_second(point: str, run_id: str) -> None:
        # The third approver read the checkpoint (one approval) and is about to append;
        # the second approver's approval lands in between, exactly once.
        if point == "approvals.before_decision_append" and not landed:
            landed.append(point)
            raced["second"] = lab.decide_as(second, run, advance=False)

    previous = points.install(land_second)
    try:
        raced["third"] = lab.decide_as(third, run, advance=False)
    finally:
        points.install(previous)
    checkpoint = _quorum_checkpoint(run)
    run = lab.approve_until_done(lab.advance(run))
    decision = Decision.objects.get(checkpoint=checkpoint)
    return lab.outcome(
        run,
        **{
            "exactly one of the racing approvals counted": raced["second"].recorded
            and not raced["third"].recorded,
            "the loser is told the quorum was complete": raced["third"].refusal
            == "quorum_complete",
            "the refusal is recorded": _refusal_codes(checkpoint) == ["quorum_complete"],
            "two approvals, two approvers": ApprovalVote.objects.filter(
                checkpoint=checkpoint
            ).count()
            == 2
            and len(decision.approvers) == 2,
            "exactly one effect in the ledger": len(ledger(run)) == 1,
        },
    )


@fixture(
    "quorum_same_person_twice",
    injects="one approver approves the same checkpoint twice",
    expect=("COMPLETED", "all_predicates_pass"),
    group="quorum",
)
def fx_quorum_same_person_twice(lab: Lab) -> FixtureOutcome:
    run = lab.start_quorum()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    lab.decide_as(lab.approvers[0], run)
    again = lab.decide_as(lab.approvers[0], run)
    still_waiting = lab.advance(run).state == "WAITING_HUMAN"
    lab.decide_as(lab.approvers[1], run)
    run = lab.approve_until_done(run)
    return lab.outcome(
        run,
        **{
            "the second approval by the same person is refused": again.refusal
            == "already_approved",
            "the refusal is recorded": _refusal_codes(checkpoint) == ["already_approved"],
            "it did not count: the run kept waiting": still_waiting,
            "the quorum needed a different approver": len(
                Decision.objects.get(checkpoint=checkpoint).approvers
            )
            == 2,
            "exactly one effect in the ledger": len(ledger(run)) == 1,
        },
    )


BY_NAME: Mapping[str, Fixture] = {f.name: f for f in FIXTURES}


def run_fixture(fixture: Fixture) -> FixtureResult:
    """Run one fixture and compare its outcome with its expectation.

    The script advances its runs in this thread, on Celery too: it injects each fault
    between steps it takes itself, which a worker handed the same run would race.
    """
    with executor.inline_here():
        outcome = fixture.script(Lab())
    expected = f"{fixture.expect_state} {fixture.expect_reason}".strip()
    actual = f"{outcome.state} {outcome.reason}".strip()
    failed = tuple(name for name, ok in outcome.checks.items() if not ok)
    return FixtureResult(
        name=fixture.name,
        injects=fixture.injects,
        expected=expected,
        actual=actual,
        passed=expected == actual and not failed,
        run_id=str(outcome.run.pk) if outcome.run else "",
        failed_checks=failed,
        notes=tuple(outcome.notes),
        history=outcome.history,
    )


# Who ran the fixtures kept by ``manage.py faultlab`` (the console keeps the user's ref).
COMMAND_REF = "system:manage.py faultlab"


def fixture_run_recorded(*, name: str, by_ref: str) -> FaultLabResult:
    """Run one fault fixture (real runs in the faultlab namespace) and keep its result (a
    fixture rolled back keeps its run's history instead of a run id).

    Raise KeyError for an unknown fixture name.
    """
    fixture = BY_NAME[name]
    result = run_fixture(fixture)
    row, _ = FaultLabResult.objects.update_or_create(
        fixture=fixture.name,
        defaults={
            "injects": result.injects[:300],
            "expected": result.expected,
            "actual": result.actual,
            "passed": result.passed,
            "run_id": result.run_id,
            "failed_checks": list(result.failed_checks),
            "notes": list(result.notes),
            "history": dict(result.history),
            "ran_by": by_ref,
            "ran_at": clock.now(),
        },
    )
    return row
