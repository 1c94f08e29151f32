"""Random event sequences fired at the authority; every invariant checked after each step.

Writers are the runner's owner, a stale owner, operators and the clock; events are any
type in the vocabulary with random counter deltas. Whatever happens, the stored run must
equal the fold of its events, revisions must be dense, counters monotonic, the state
unchanged after terminal, and at most one terminal record must exist.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from runs import authority
from runs.domain.states import CONTROL_EVENTS, Actor, EventType, is_terminal
from runs.engine import ownership
from runs.models import Event, Run, TerminalRecord
from runs.replay.audit import audit_replay
from tests.helpers import make_run

EVENTS = st.sampled_from(list(EventType))
ACTORS = st.sampled_from(list(Actor))
DELTAS = st.dictionaries(
    st.sampled_from(["turns", "proposals", "actions", "corrections", "effects"]),
    st.integers(0, 2),
    max_size=2,
)


class AuthorityMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.run = make_run(advance=False)
        claim = ownership.claim(str(self.run.pk), "owner")
        assert isinstance(claim, ownership.Claim)
        self.epoch = claim.epoch
        self.previous_counters = dict(self.run.counters)
        self.terminal_state: str | None = None

    def _fresh(self) -> Run:
        return Run.objects.get(pk=self.run.pk)

    @rule(
        event=EVENTS,
        actor=ACTORS,
        delta=DELTAS,
        stale=st.booleans(),
        off_by=st.sampled_from([0, 0, 0, 1, -1]),
    )
    def append(self, event, actor, delta, stale, off_by) -> None:
        run = self._fresh()
        refs = {
            "effect": "EF-X",
            "attempt": "at-X",
            "approval": "cp-X",
            "completion": "c",
            "observation": "o",
            "proposal": "p",
        }
        kwargs = dict(
            run_id=str(run.pk),
            expected_revision=run.revision + off_by,
            expected_epoch=self.epoch - 1 if stale else self.epoch,
            type=event,
            actor=actor,
            counters_delta=delta,
            refs=refs,
            reason_code="fuzz",
        )
        if event in CONTROL_EVENTS and (any(delta.values()) or actor is Actor.MODEL):
            # Malformed requests from code are refused before anything is written.
            with pytest.raises(ValueError):
                authority.append(**kwargs)
            return
        authority.append(**kwargs)

    @rule()
    def takeover(self) -> None:
        Run.objects.filter(pk=self.run.pk).update(lease_owner="gone", lease_expires_at=None)
        claim = ownership.claim(str(self.run.pk), "next-owner")
        if isinstance(claim, ownership.Claim):
            self.epoch = claim.epoch

    @invariant()
    def the_record_is_consistent(self) -> None:
        if not hasattr(self, "run"):
            return
        run = self._fresh()
        sequences = list(
            Event.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True)
        )
        assert sequences == list(range(1, run.revision + 1))
        _, findings = audit_replay(run)
        # The fuzzer's refs name evidence that was never stored; everything else must hold.
        findings = [f for f in findings if f.kind != "missing_evidence"]
        assert findings == [], findings
        for key, before in self.previous_counters.items():
            assert run.counters[key] >= before
        for key, value in run.counters.items():
            if key != "elapsed_ms":
                assert value <= run.budget_limits[key]
        self.previous_counters = dict(run.counters)
        if self.terminal_state is not None:
            assert run.state == self.terminal_state
        elif is_terminal(run.state):
            self.terminal_state = run.state
        assert TerminalRecord.objects.filter(run=run).count() == (
            1 if is_terminal(run.state) else 0
        )


@pytest.mark.django_db
def test_random_event_sequences_keep_every_invariant(world):
    AuthorityMachine.TestCase.settings = settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    AuthorityMachine.TestCase().runTest()
