"""The approval rows a run reads and writes through prepared statements (approvals/rows.py,
fieldops.sql.insert) are exactly what the ORM gives, on both databases."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Model

from access.roles import APPROVER
from approvals import rows
from approvals.models import ApprovalVote, Checkpoint, Decision
from fieldops import sql
from kernel import clock
from runs.models import Run
from tests.conftest import make_user
from tests.helpers import approve, make_run

pytestmark = pytest.mark.django_db(transaction=True)


def same_fields(a: Model, b: Model) -> None:
    for field in type(a)._meta.concrete_fields:
        assert getattr(a, field.attname) == getattr(b, field.attname), field.attname
        assert type(getattr(a, field.attname)) is type(getattr(b, field.attname)), field.attname


def test_a_checkpoint_with_its_run_reads_as_the_orm_reads_it(world: None, approver: Any) -> None:
    run = make_run()
    checkpoint = rows.checkpoint_with_run(run.waiting_checkpoint)
    expected = Checkpoint.objects.select_related("run").get(pk=run.waiting_checkpoint)
    same_fields(checkpoint, expected)
    same_fields(checkpoint.run, expected.run)
    assert checkpoint._state.adding is False and checkpoint.run._state.adding is False
    with pytest.raises(Checkpoint.DoesNotExist):
        rows.checkpoint_with_run("cp-missing")


def test_inserted_rows_equal_the_rows_the_orm_creates(world: None, approver: Any) -> None:
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    now = clock.now()
    vote = sql.insert(
        ApprovalVote(
            checkpoint=checkpoint,
            user=approver,
            by_ref="user:approver",
            seen_hash="h" * 64,
            reason="é and \u2028",
            created_at=now,
        )
    )
    assert vote.pk is not None and vote._state.adding is False
    same_fields(ApprovalVote.objects.get(pk=vote.pk), vote)
    decision = sql.insert(
        Decision(
            checkpoint=checkpoint,
            verdict=Decision.Verdict.DECLINE,
            decided_by=approver,
            decided_by_ref="user:approver",
            reason="no",
            requested_change={"quantity": 2, "nested": [1.5, None, "x"]},
            created_at=now,
        )
    )
    stored = Decision.objects.get(pk=decision.pk)
    assert stored.requested_change == {"quantity": 2, "nested": [1.5, None, "x"]}
    assert stored.approvers == [] and stored.consumed_at is None
    assert rows.approvers_so_far(checkpoint.pk) == ["user:approver"]


def test_recipients_are_the_orm_query_s(world: None) -> None:
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    users = {}
    for name, roles in (
        ("a1", (APPROVER,)),
        ("a2", (APPROVER, "special")),
        ("a3", (APPROVER, "special")),
        ("op", ("operator",)),
    ):
        Group.objects.get_or_create(name="special")
        user = make_user(name, "north", *roles)
        user.email = f"{name}@example.com"
        user.save()
        users[name] = user
    make_user("south", "south", APPROVER)

    def orm(group: str, usernames: list[str], requester: str) -> list[str]:
        found = (
            get_user_model()
            .objects.filter(membership__tenant="north", groups__name=APPROVER, is_active=True)
            .exclude(email="")
        )
        if group:
            found = found.filter(groups__name=group)
        if usernames:
            found = found.filter(username__in=usernames)
        return sorted(set(found.exclude(username=requester).values_list("email", flat=True)))

    for group, usernames, requester in (
        ("", [], "operator"),
        ("", [], "a1"),
        ("special", [], "operator"),
        ("", ["a1", "a3"], "operator"),
        ("special", ["a1", "a3"], "a3"),
    ):
        got = rows.recipients(
            tenant=checkpoint.tenant,
            role=APPROVER,
            requester=requester,
            group=group,
            usernames=usernames,
        )
        assert got == orm(group, usernames, requester), (group, usernames, requester)


def test_consuming_and_approvers_read_what_the_orm_reads(world: None, approver: Any) -> None:
    run = make_run()
    approve(run, approver)
    run = Run.objects.get(pk=run.pk)
    checkpoint = Checkpoint.objects.get(run=run)
    assert checkpoint.status == Checkpoint.Status.USED
    assert rows.to_consume(run, checkpoint.proposal_hash) == (checkpoint.pk, "USED")
    assert rows.to_consume(run, "other") is None
    assert rows.approval_approvers(checkpoint.pk) == (
        Decision.objects.get(checkpoint=checkpoint).approvers,
        "user:approver",
    )
    assert rows.open_of_runs([run.pk]) == []
