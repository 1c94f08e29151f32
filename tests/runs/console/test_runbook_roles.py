"""Each runbook step is possible for who follows it: a step an operator cannot carry out
says whose it is and what the operator can do instead."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Checkpoint
from kernel import clock
from runs.domain.states import State
from tests.conftest import make_user
from tests.helpers import make_run
from tests.runs.console.conftest import client_for

pytestmark = pytest.mark.django_db

RUNBOOK = "stale-availability"


def test_the_stale_approval_step_says_an_approver_decides_and_what_an_operator_can_do(
    as_operator: Client, world: Any
) -> None:
    run = make_run(namespace="live")  # the approvals queue shows the live world's
    assert run.state == State.WAITING_HUMAN.value
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    url = reverse("runbooks-detail", args=[RUNBOOK])
    with clock.at_least(clock.now() + dt.timedelta(minutes=7)):  # the evidence aged (5 min)
        page = as_operator.get(url).content.decode()
        step = page.split('id="step-2"')[1].split('id="step-3"')[0]
        assert checkpoint.pk in step
        # The operator cannot open the decision (no link), and cannot post one either ...
        assert reverse("approvals-detail", args=[checkpoint.pk]) not in step
        refused = as_operator.post(
            reverse("approvals-decide", args=[checkpoint.pk]),
            {"verdict": "decline", "reason": "stale", "seen_hash": checkpoint.proposal_hash},
        )
        assert refused.status_code == 403, refused.content.decode()[-1500:]
        # ... so the step says whose decision it is and what is the operator's.
        assert "An approver of your tenant decides these, not an operator" in step
        assert "An operator may cancel the run from its page" in step

        # Someone who is both sees the checkpoint linked, to decide it.
        lead = client_for(make_user("lead-both", "north", "operator", "approver"))
        both = lead.get(url).content.decode().split('id="step-2"')[1]
        assert reverse("approvals-detail", args=[checkpoint.pk]) in both.split('id="step-3"')[0]
