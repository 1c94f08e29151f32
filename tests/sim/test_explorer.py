"""The effect schedule explorer: every crash, pause, cancellation and takeover order on the
reservation path keeps the exactly-once promise (issue 14), and the explorer can fail."""

from __future__ import annotations

import pytest

from runs.domain import effects
from runs.domain.effects import AttemptStatus
from runs.replay import effect_audit
from sim import explorer
from sim.world.models import LedgerEntry
from tests.helpers import make_run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# Where the defects of issue 14 happened: inside the world's commit (two reservations), after
# the effect committed and before it was recorded (the effect missing from the run, and the
# cancellation that hid it). Every one must be a point the explorer stops at.
ISSUE_POINTS = (
    "world.after_ledger_insert#1",
    "after_effect_committed#1",
    "authority.in_transaction:effect.recorded#1",
)


def test_every_schedule_keeps_the_exactly_once_promise(world, capsys):
    """Every single-owner schedule of every fault variant, and every two-owner order of the
    answered path. ``manage.py explore_effects`` runs the two-owner orders of every variant
    too (several hundred more schedules; see docs/effects.md)."""
    single = explorer.explore(kinds=("crash", "takeover", "cancel", "crash-cancel"))
    orders = explorer.explore(variants=("answered",), kinds=("takeover-pause",))
    report = explorer.Report(
        outcomes=single.outcomes + orders.outcomes,
        skipped=single.skipped + orders.skipped,
        traces=single.traces,
    )
    with capsys.disabled():
        print(f"\neffect explorer: {len(report.explored)} schedules, {dict(report.counts())}")
    failures = [f"{o.schedule.name}: {'; '.join(o.violations)}" for o in report.failures]
    assert failures == []
    for variant, reached in report.traces.items():
        explored = {o.schedule.point for o in report.explored if o.schedule.variant == variant}
        assert explored == set(reached), f"{variant}: every traced point is explored"
    assert set(ISSUE_POINTS) <= set(report.traces["answered"])
    kinds = report.counts()
    assert all(kinds[kind] > 0 for kind in explorer.KINDS), kinds
    # Two owners really interleaved: the old one resumed after the new one, and the reverse.
    resumed = {o.schedule.order for o in orders.explored}
    assert resumed == {"old-first", "new-first"}
    assert report.skipped == 0  # on PostgreSQL every schedule runs


def test_the_explorer_fails_when_the_sweeper_forgets_a_sending_attempt(world, monkeypatch):
    """The sweeper's old hard-coded pair (DISPATCH_RECORDED, AMBIGUOUS) left a cancelled
    run's SENDING attempt unreconciled: the explorer names the schedule that shows it."""
    monkeypatch.setattr(
        effects,
        "SWEEPER_PICKUP",
        frozenset({AttemptStatus.DISPATCH_RECORDED, AttemptStatus.AMBIGUOUS}),
    )
    schedule = explorer.Schedule("answered", "crash-cancel", "world.after_commit#1")
    with explorer._exploring():
        outcome = explorer.run_schedule(schedule)
    assert outcome.state == "CANCELLED"
    assert any("referenced by 0 recording events" in v for v in outcome.violations)
    assert any("has no owner" in v for v in outcome.violations)


def test_the_audit_reports_an_effect_the_run_does_not_record(world):
    run = make_run()  # waits for approval: no effect, nothing recorded
    assert effect_audit.effect_violations(run, swept=False) == []
    LedgerEntry.objects.create(
        namespace=run.namespace,
        idempotency_key="f" * 64,
        intent_hash="f" * 64,
        effect_id="EF-000000000001",
        tenant="north",
        principal_ref=run.principal_ref,
        task_id=run.task_id,
        run_id=str(run.pk),
        proposal_hash="a" * 64,
        part_id="A17",
        slot_id="S-N1-01",
        quantity=1,
        committed_at=run.created_at,
        retain_until=run.created_at,
    )
    problems = effect_audit.effect_violations(run, swept=False)
    assert any("EF-000000000001 is referenced by 0 recording events" in p for p in problems)
