"""Execution simulation (SPEC §6): re-run a recorded run's request against the doubles in
an isolated world namespace, and compare dispositions.

The simulated run has the recorded run's request (same scenario or a candidate scenario,
same vocabulary and adapter version, limits, scope, pinned components and fault plan), in
a namespace ``sim-<recorded id>-<nonce>`` seeded with ``seed_world``. It may create
synthetic effects there and nowhere else. Human inputs come from scripted principals that
replay the recorded run's decisions in order (approvals and declines, clarification
answers, external callbacks, an operator's cancellation); they act on the simulated run
only. A simulation that needs an input the recording does not have stops there, and is
cancelled so no human queue ever shows it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.models import Membership
from access.roles import APPROVER, OPERATOR, ensure_groups, principal_ref_of
from approvals import services as approvals
from approvals.models import Checkpoint, Decision
from kernel import clock
from kernel.text import quoted_shortly
from runs import callbacks, services
from runs.domain.proposals import from_dict, summary
from runs.domain.states import Actor, EventType, State, is_terminal, is_waiting
from runs.engine import runner, steps, sweeper
from runs.models import Correlation, Event, Evidence, Run
from runs.policies import model_client
from runs.replay.decision import ReplayError, run_vocabulary
from sim import double
from sim.world.models import LedgerEntry
from sim.world.service import seed_world

SIM_PREFIX = "sim-"
SIM_STOP_BY = "simulation:scripted-operator"
SIM_STOP_REASON = "simulation stopped: the recording has no further human input"
SIM_REPLAYED_CANCEL = "simulation: replays the recorded cancellation"
SIM_REPLAYED_BUDGET = "simulation: replays a recorded operator budget change"
EXPIRIES = (EventType.APPROVAL_EXPIRED.value, EventType.EXTERNAL_EXPIRED.value)
ONE_TICK = dt.timedelta(microseconds=1)
MAX_SCRIPTED_INPUTS = 20
EVIDENCE_REF = re.compile(r"\b(?:ev|rq)-[0-9a-f]{20}\b")


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    namespace: str
    state: str
    disposition: str
    reason: str
    decisions: tuple[str, ...]
    denials: tuple[str, ...]
    effects: int

    @property
    def disposition_key(self) -> tuple[str, str, str]:
        return (self.state, self.disposition, self.reason)


@dataclass(frozen=True)
class Simulation:
    recorded: RunOutcome
    simulated: RunOutcome
    scenario: str
    vocabulary: str
    scripted: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def same_disposition(self) -> bool:
        return self.recorded.disposition_key == self.simulated.disposition_key

    @property
    def same_decisions(self) -> bool:
        return self.recorded.decisions == self.simulated.decisions

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(same_disposition=self.same_disposition, same_decisions=self.same_decisions)
        return data


@dataclass
class _Script:
    """The recorded run's human and external inputs, consumed in order."""

    approvals: list[Decision]
    answers: list[Decision]
    callbacks: list[Mapping[str, Any]]
    cancellation: Event | None
    budget_changes: list[Event]
    expiries: list[str]  # the recorded expiry event types, in order


def outcome(run: Run) -> RunOutcome:
    """The comparable outcome of ``run`` (a stopped simulation reports where it stopped)."""
    events = list(Event.objects.filter(run=run).order_by("sequence"))
    state, disposition, reason = run.state, run.disposition, run.terminal_reason
    last = events[-1] if events else None
    if (
        last is not None
        and last.type == EventType.RUN_CANCELLED.value
        and last.payload.get("by") == SIM_STOP_BY
    ):
        state, disposition, reason = last.prev_state, "", ""
    emitted = [e.refs.get("proposal", "") for e in events if e.type == "proposal.emitted"]
    stored = dict(Evidence.objects.filter(pk__in=emitted).values_list("pk", "content"))
    return RunOutcome(
        run_id=str(run.pk),
        namespace=run.namespace,
        state=state,
        disposition=disposition,
        reason=reason,
        decisions=tuple(
            EVIDENCE_REF.sub("<ref>", summary(from_dict(stored[p]))) if p in stored else "-"
            for p in emitted
        ),
        denials=tuple(e.reason_code for e in events if e.type == EventType.PROPOSAL_DENIED.value),
        effects=LedgerEntry.objects.filter(namespace=run.namespace, run_id=str(run.pk)).count(),
    )


def simulation_namespace_prefix(run: Run) -> str:
    return f"{SIM_PREFIX}{run.pk.hex[:12]}-"


def is_simulation(run: Run) -> bool:
    return str(run.namespace).startswith(SIM_PREFIX)


def simulations_of(run: Run) -> list[Run]:
    """Simulated runs of ``run``, newest first (same tenant only)."""
    return list(
        Run.objects.filter(
            tenant=run.tenant, namespace__startswith=simulation_namespace_prefix(run)
        ).order_by("-created_at")
    )


def compare(recorded: Run, simulated: Run) -> Simulation:
    """Compare a recorded run with one of its simulations (both read from the store)."""
    vocab = run_vocabulary(simulated)
    scripted, notes = _scripted_log(simulated)
    return Simulation(
        recorded=outcome(recorded),
        simulated=outcome(simulated),
        scenario=simulated.scenario,
        vocabulary=vocab.name if vocab else simulated.model_adapter_version,
        scripted=tuple(scripted),
        notes=tuple(notes),
    )


def _scripted_log(sim: Run) -> tuple[list[str], list[str]]:
    """What the scripted principals did to ``sim``, and where it stopped, from its events."""
    scripted: list[str] = []
    notes: list[str] = []
    events = list(Event.objects.filter(run=sim).order_by("sequence"))
    answers = dict(
        Decision.objects.filter(checkpoint__run=sim, verdict=Decision.Verdict.ANSWER).values_list(
            "checkpoint_id", "answer"
        )
    )
    observed = [e.refs.get("observation", "") for e in events]
    contents = dict(
        Evidence.objects.filter(pk__in=[o for o in observed if o], kind="callback").values_list(
            "pk", "content"
        )
    )
    for e in events:
        if e.type == EventType.APPROVAL_GRANTED.value:
            scripted.append("scripted approver: approve")
        elif e.type == EventType.APPROVAL_DECLINED.value:
            scripted.append("scripted approver: decline")
        elif e.type == EventType.CLARIFICATION_ANSWERED.value:
            answer = answers.get(e.refs.get("checkpoint", ""), "")
            scripted.append(f"scripted requester answered {answer!r}")
        elif e.type == EventType.EXTERNAL_OBSERVED.value and e.reason_code == "correlated":
            data = contents.get(e.refs.get("observation", ""), {}).get("data", {})
            scripted.append(f"scripted callback {data.get('response_type', '')}: accepted")
        elif e.type in EXPIRIES:
            scripted.append(f"scripted clock: {e.type}")
        elif (
            e.type == EventType.BUDGET_CHANGED.value
            and e.payload.get("reason") == SIM_REPLAYED_BUDGET
        ):
            for budget, limit in sorted(e.payload.get("limits", {}).items()):
                scripted.append(f"scripted operator changed {budget} to {limit}")
        elif e.type == EventType.RUN_CANCELLED.value:
            if e.payload.get("by") == SIM_STOP_BY:
                notes.append(
                    f"stopped in {e.prev_state}: the recording has no further input for it"
                )
            elif e.payload.get("reason") == SIM_REPLAYED_CANCEL:
                scripted.append(f"scripted operator cancelled while {e.prev_state}")
    return scripted, notes


def scripted_users(tenant: str) -> tuple[Any, Any]:
    """The scripted requester (operator) and approver of simulations in ``tenant``.

    System principals without a usable password: they cannot log in, and they are never
    the principal or the approver of any recorded run.
    """
    ensure_groups()
    made: list[Any] = []
    for role in (OPERATOR, APPROVER):
        username = f"simulation-{'requester' if role == OPERATOR else 'approver'}-{tenant}"
        user: Any
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
        user.groups.set(Group.objects.filter(name=role))
        made.append(user)
    return made[0], made[1]


def simulate(run: Run, *, candidate: str | None = None, allow_model: bool = False) -> Simulation:
    """Re-run ``run`` in a fresh simulated world and compare its disposition with ``run``'s.

    ``candidate`` names another double scenario to run in the recorded conditions (default:
    the recorded scenario). Nothing of ``run`` is written; raise ReplayError when ``run``
    is itself a simulation or the candidate is unknown.
    """
    if is_simulation(run):
        raise ReplayError("this run is a simulation; simulate the recorded run instead")
    scenario = candidate or run.scenario
    if scenario == model_client.SCENARIO and not allow_model:
        raise ReplayError("the model client is not a double: simulate it from the command")
    if scenario != model_client.SCENARIO and scenario not in double.SCENARIOS:
        raise ReplayError(f"unknown scenario {quoted_shortly(scenario)}")
    vocab = run_vocabulary(run)
    if vocab is None:
        raise ReplayError(f"the run's adapter {run.model_adapter_version} is not installed")
    request = Evidence.objects.get(pk=steps.request_evidence_id(run)).content["data"]
    namespace = f"{simulation_namespace_prefix(run)}{secrets.token_hex(3)}"
    seed_world(namespace)
    requester, approver = scripted_users(run.tenant)
    sim = services.run_create(
        scenario=scenario,
        tenant=run.tenant,
        principal_ref=principal_ref_of(requester),
        requested_by=requester,
        equipment_id=request["equipment_id"],
        location_id=request["location_id"],
        quantity=int(request["quantity"]),
        scope=list(run.scope),
        limits=dict(run.limits),
        fault_plan=list(run.fault_plan),
        namespace=namespace,
        vocabulary=vocab.name,
        adapter_version=vocab.adapter_version,
        components=dict(run.components),
        start=False,
    )
    _drive(sim, _script_of(run), requester, approver)
    sim.refresh_from_db()
    return compare(run, sim)


def _script_of(run: Run) -> _Script:
    """Read (only) the recorded run's inputs that came from people and the outside."""
    decisions = list(
        Decision.objects.filter(checkpoint__run=run)
        .select_related("checkpoint")
        .order_by("created_at")
    )
    observed = Event.objects.filter(run=run, type=EventType.EXTERNAL_OBSERVED.value).order_by(
        "sequence"
    )
    refs = [e.refs.get("observation", "") for e in observed]
    contents = dict(Evidence.objects.filter(pk__in=refs).values_list("pk", "content"))
    cancellation = (
        Event.objects.filter(run=run, type=EventType.RUN_CANCELLED.value)
        .exclude(payload__by="faultlab:scheduled")
        .first()
    )
    budget_changes = Event.objects.filter(
        run=run, type=EventType.BUDGET_CHANGED.value, actor=Actor.OPERATOR.value
    ).order_by("sequence")
    return _Script(
        approvals=[d for d in decisions if d.checkpoint.kind == Checkpoint.Kind.APPROVAL],
        answers=[d for d in decisions if d.verdict == Decision.Verdict.ANSWER],
        callbacks=[contents[r]["data"] for r in refs if r in contents],
        cancellation=cancellation,
        budget_changes=list(budget_changes),
        expiries=list(
            Event.objects.filter(run=run, type__in=EXPIRIES)
            .order_by("sequence")
            .values_list("type", flat=True)
        ),
    )


def _drive(sim: Run, script: _Script, requester: Any, approver: Any) -> None:
    """Advance ``sim`` in-process, answering each wait from ``script``, until it ends or
    needs an input the recording lacks (then it is cancelled: no human ever sees it)."""
    _advance(sim, script, requester)
    for _ in range(MAX_SCRIPTED_INPUTS):
        sim.refresh_from_db()
        if is_terminal(sim.state) or not _answer_wait(sim, script, requester, approver):
            break
        _advance(sim, script, requester)
    sim.refresh_from_db()
    if is_terminal(sim.state):
        return
    if script.cancellation is not None:
        services.run_cancel(
            run_id=str(sim.pk), by_ref=principal_ref_of(requester), reason=SIM_REPLAYED_CANCEL
        )
        return
    services.run_cancel(run_id=str(sim.pk), by_ref=SIM_STOP_BY, reason=SIM_STOP_REASON)


def _advance(sim: Run, script: _Script, requester: Any) -> None:
    """Advance ``sim`` in-process until it waits or ends.

    With recorded operator budget changes it goes one step at a time and makes each change
    at the revision where the recording made it (once a diverging simulation is past that
    revision, at its next step), so budgets run out where they ran out in the recording.
    """
    if not script.budget_changes:
        runner.advance(str(sim.pk), worker="simulation")
        return
    for _ in range(runner.MAX_STEPS):
        _change_budgets_due(sim, script, requester)
        before = sim.revision
        runner.advance(str(sim.pk), worker="simulation", max_steps=1)
        sim.refresh_from_db()
        if sim.revision == before or is_terminal(sim.state) or is_waiting(sim.state):
            break
    _change_budgets_due(sim, script, requester)  # e.g. a change made while the run waited


def _change_budgets_due(sim: Run, script: _Script, requester: Any) -> None:
    """Replay each recorded budget change whose sequence the simulation has reached."""
    while script.budget_changes and script.budget_changes[0].sequence <= sim.revision + 1:
        recorded = script.budget_changes.pop(0)
        for budget, limit in sorted(recorded.payload.get("limits", {}).items()):
            # When the simulation has ended or already used more, the change cannot apply.
            with contextlib.suppress(services.RunInputError):
                services.run_budget_change(
                    run_id=str(sim.pk),
                    by_ref=principal_ref_of(requester),
                    budget=budget,
                    limit=int(limit),
                    reason=SIM_REPLAYED_BUDGET,
                )
        sim.refresh_from_db()


def _answer_wait(sim: Run, script: _Script, requester: Any, approver: Any) -> bool:
    """Give the waiting ``sim`` its next recorded input; False when there is none."""
    if sim.state == State.WAITING_HUMAN.value:
        checkpoint = Checkpoint.objects.get(pk=sim.waiting_checkpoint)
        if checkpoint.kind == Checkpoint.Kind.APPROVAL and script.approvals:
            recorded = script.approvals.pop(0)
            approve = recorded.verdict == Decision.Verdict.APPROVE
            result = approvals.approval_decide(
                checkpoint_id=checkpoint.pk,
                user=approver,
                approve=approve,
                seen_hash=checkpoint.proposal_hash,
                reason=f"simulation: scripted approver replays a recorded {recorded.verdict}",
                requested_change=None if approve else dict(recorded.requested_change),
            )
            return result.recorded
        if checkpoint.kind == Checkpoint.Kind.CLARIFICATION and script.answers:
            recorded = script.answers.pop(0)
            result = approvals.clarification_answer(
                checkpoint_id=checkpoint.pk, user=requester, answer=recorded.answer
            )
            return result.recorded
        if script.expiries[:1] == [EventType.APPROVAL_EXPIRED.value]:
            # The recording's checkpoint ran out unanswered: so does this one. The clock
            # moves past its expiry for this simulation only (other requests keep theirs).
            script.expiries.pop(0)
            with clock.at_least(checkpoint.expires_at + ONE_TICK):
                return approvals.checkpoint_expire(checkpoint_id=checkpoint.pk)
        return False
    if sim.state == State.WAITING_EXTERNAL.value and script.callbacks:
        data = script.callbacks.pop(0)
        correlation = Correlation.objects.get(pk=sim.waiting_correlation)
        got = callbacks.callback_receive(
            delivery_id=f"sim-{correlation.pk}",
            correlation_id=correlation.pk,
            attempt=correlation.attempt,
            owner_epoch=correlation.owner_epoch,
            response_type=str(data.get("response_type", correlation.expected_response_type)),
            payload=dict(data.get("payload", {})),
        )
        return got.accepted
    if sim.state == State.WAITING_EXTERNAL.value and script.expiries[:1] == [
        EventType.EXTERNAL_EXPIRED.value
    ]:
        script.expiries.pop(0)
        correlation = Correlation.objects.select_related("run").get(pk=sim.waiting_correlation)
        with clock.at_least(correlation.deadline + ONE_TICK):
            return sweeper.expire_wait(correlation)
    return False
