"""Eligibility and quorum (issue 19): who may decide a checkpoint, N distinct approvals of
the same hash, any decline declines, and a race for the last slot counts exactly once."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from access.roles import APPROVER
from approvals import services
from approvals.models import ApprovalPolicy, ApprovalVote, Checkpoint, Decision, DecisionRefusal
from runs.engine import runner
from runs.models import EffectAttempt, Event, Run
from tests.conftest import make_user
from tests.helpers import at_once, make_run, types


def _policy(**kw: Any) -> ApprovalPolicy:
    kw.setdefault("capability", "reserve_part")
    kw.setdefault("quorum", 2)
    return ApprovalPolicy.objects.create(tenant="north", name=kw.pop("name", "two-of"), **kw)


def _checkpoint(run: Run) -> Checkpoint:
    run.refresh_from_db()
    return Checkpoint.objects.get(pk=run.waiting_checkpoint)


def _approve(cp: Checkpoint, user: Any, *, approve: bool = True, seen: str = "") -> Any:
    return services.approval_decide(
        checkpoint_id=cp.pk,
        user=user,
        approve=approve,
        seen_hash=seen or cp.proposal_hash,
        reason=f"by {user.get_username()}",
    )


@pytest.fixture
def approvers(world: None) -> list[Any]:
    return [make_user(f"appr-{n}", "north", APPROVER) for n in range(3)]


@pytest.mark.django_db
def test_a_quorum_of_two_counts_then_grants_and_the_effect_names_both(approvers):
    _policy()
    run = make_run()
    cp = _checkpoint(run)
    assert cp.quorum == 2 and cp.policy_name == "two-of"
    first = _approve(cp, approvers[0])
    assert first.recorded and first.counted
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert run.state == "WAITING_HUMAN" and run.waiting_checkpoint == cp.pk
    assert types(run)[-1] == "approval.counted"
    second = _approve(cp, approvers[1])
    assert second.recorded and not second.counted
    runner.advance(str(run.pk), worker="test")
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    decision = Decision.objects.get(checkpoint=cp)
    assert decision.approvers == ["user:appr-0", "user:appr-1"]
    granted = Event.objects.get(run=run, type="approval.granted")
    assert granted.payload["approvers"] == ["user:appr-0", "user:appr-1"]
    attempt = EffectAttempt.objects.get(run=run)
    assert attempt.checkpoint_id == cp.pk and decision.consumed_by_attempt == attempt.pk
    recorded = Event.objects.get(run=run, type="effect.recorded")
    assert recorded.payload["approvers"] == ["user:appr-0", "user:appr-1"]


@pytest.mark.django_db
def test_any_decline_declines_a_partly_approved_quorum(approvers):
    _policy()
    run = make_run()
    cp = _checkpoint(run)
    assert _approve(cp, approvers[0]).counted
    declined = _approve(cp, approvers[1], approve=False)
    assert declined.recorded
    cp.refresh_from_db()
    assert cp.status == "DECLINED"
    assert "approval.declined" in types(run)
    late = _approve(cp, approvers[2])
    assert late.refusal == "already_decided"


@pytest.mark.django_db
def test_the_requester_never_counts_towards_a_quorum(world, approvers):
    _policy()
    lead = make_user("lead", "north", "operator", APPROVER)
    run = make_run(principal="user:lead")
    cp = _checkpoint(run)
    assert _approve(cp, lead).refusal == "self_approval"
    assert not ApprovalVote.objects.exists()


@pytest.mark.django_db
def test_an_ineligible_approver_is_refused_and_recorded(world, approvers):
    make_user("senior", "north", APPROVER, "operator")
    _policy(group="operator", quorum=1)
    run = make_run()
    cp = _checkpoint(run)
    assert cp.eligible_group == "operator"
    refused = _approve(cp, approvers[0])
    assert refused.refusal == "not_eligible"
    assert "approval policy names who may decide" in refused.message
    assert DecisionRefusal.objects.get().code == "not_eligible"
    named = make_run()
    ApprovalPolicy.objects.all().delete()
    _policy(usernames=["appr-2"], quorum=1, name="named")
    other = _checkpoint(make_run())
    assert other.eligible_users == ["appr-2"]
    assert _approve(other, approvers[0]).refusal == "not_eligible"
    assert _approve(other, approvers[2]).recorded
    assert named.pk != other.run_id


@pytest.mark.django_db
def test_a_conditional_quorum_needs_two_only_above_the_quantity(approvers):
    _policy(quorum_min_quantity=2)
    assert _checkpoint(make_run()).quorum == 1
    assert _checkpoint(make_run(quantity=2)).quorum == 2


@pytest.mark.django_db
def test_the_proposal_page_shows_who_approved_and_who_still_may(world, approvers, operator):
    _policy()
    run = make_run(principal="user:operator", requested_by=operator, namespace="live")
    cp = _checkpoint(run)
    _approve(cp, approvers[0])
    client = Client()
    client.force_login(approvers[1])
    page = client.get(reverse("approvals-detail", args=[cp.pk])).content.decode()
    assert "Approvals: 1 of 2" in page
    assert "user:appr-0</span> approved hash" in page
    still = page.split("Who still may approve:")[1].split("</p>")[0]
    assert "user:appr-1" in still and "user:appr-2" in still and "user:appr-0" not in still
    # The first approver's own page disables a second approval.
    client.force_login(approvers[0])
    mine = client.get(reverse("approvals-detail", args=[cp.pk])).content.decode()
    assert "You already approved this checkpoint" in mine
    # "Assigned to me": the checkpoint is in appr-1's queue, not in appr-0's any more.
    queue = reverse("approvals-queue")
    client.force_login(approvers[1])
    assert [c.pk for c, _ in client.get(queue, {"assigned": "me"}).context["rows"]] == [cp.pk]
    client.force_login(approvers[0])
    assert client.get(queue, {"assigned": "me"}).context["rows"] == []
    assert [c.pk for c, _ in client.get(queue).context["rows"]] == [cp.pk]


@pytest.mark.django_db
def test_the_assigned_queue_follows_the_policy_group(world, approvers):
    senior = make_user("senior", "north", APPROVER, "operator")
    _policy(group="operator", quorum=1)
    cp = _checkpoint(make_run(namespace="live"))
    client = Client()
    client.force_login(approvers[0])
    assert client.get(reverse("approvals-queue"), {"assigned": "me"}).context["rows"] == []
    client.force_login(senior)
    rows = client.get(reverse("approvals-queue"), {"assigned": "me"}).context["rows"]
    assert [c.pk for c, _ in rows] == [cp.pk]


# -- the race for the last slot, on separate PostgreSQL connections ------------------------
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    quorum=st.integers(min_value=2, max_value=3),
    given_before=st.integers(min_value=0, max_value=2),
    racers=st.integers(min_value=2, max_value=3),
    twice=st.booleans(),
)
def test_racing_approvals_fill_the_quorum_exactly_once(world, quorum, given_before, racers, twice):
    given_before = min(given_before, quorum - 1)
    tag = uuid.uuid4().hex[:6]
    ApprovalPolicy.objects.update_or_create(
        tenant="north", name="race", defaults={"capability": "reserve_part", "quorum": quorum}
    )
    people = [make_user(f"r{tag}-{n}", "north", APPROVER) for n in range(given_before + racers)]
    run = make_run()
    cp = _checkpoint(run)
    assert cp.quorum == quorum
    for person in people[:given_before]:
        assert _approve(cp, person).counted
    contenders = people[given_before:]
    if twice:  # the same person also races against themself
        contenders = [*contenders, contenders[0]]
    # Every contender has read the checkpoint before any of them appends.
    results = at_once(
        "approvals.before_decision_append",
        [lambda person=person: _approve(cp, person) for person in contenders],
    )
    needed = quorum - given_before
    recorded = [r for r in results if r.recorded]
    refused = sorted(r.refusal for r in results if not r.recorded)
    assert len(recorded) == min(needed, racers)
    assert all(code in ("quorum_complete", "already_approved") for code in refused), refused
    votes = list(ApprovalVote.objects.filter(checkpoint=cp).values_list("by_ref", flat=True))
    assert len(votes) == len(set(votes)) == min(quorum, given_before + racers)
    cp.refresh_from_db()
    grants = Event.objects.filter(run=run, type="approval.granted").count()
    if given_before + racers >= quorum:
        # APPROVED, or USED once the relayed run dispatched it.
        assert cp.status in ("APPROVED", "USED") and grants == 1
        assert sorted(Decision.objects.get(checkpoint=cp).approvers) == sorted(votes)
    else:
        assert cp.status == "PENDING" and grants == 0
    # Every refused racer is recorded.
    assert DecisionRefusal.objects.filter(checkpoint=cp).count() == len(refused)
