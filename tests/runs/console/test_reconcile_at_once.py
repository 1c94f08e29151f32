"""Two operators reconcile the same unknown effect from the recovery page at the same
moment (or one reconciles what the sweeper just reconciled): the ledger's outcome is
recorded once, and the later operator is told who recorded it and when, not told that
their own reconciliation was made."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from runs.domain.states import EventType
from runs.engine import effects as effect_steps
from runs.models import EffectAttempt, Event
from tests.conftest import make_user
from tests.helpers import at_once
from tests.operations.test_reconcile_incident import outage_run
from tests.runs.console.conftest import client_for


@pytest.mark.postgres  # threads on separate connections (the SQLite test database is shared memory)
@pytest.mark.django_db(transaction=True)
def test_two_operators_reconciling_one_effect_at_once(world: None, operator: Any) -> None:
    run = outage_run()
    attempt = EffectAttempt.objects.get(run=run, status="UNRESOLVED")
    other = make_user("operator-2", "north", "operator")
    people = {"operator": client_for(operator), "operator-2": client_for(other)}
    names = list(people)
    posted = at_once(  # both have read the ledger's answer before either records it
        "effects.before_obligation_record",
        [
            lambda name=name: people[name].post(
                reverse("recovery-reconcile"), {"attempt_id": attempt.pk}
            )
            for name in names
        ],
    )
    answers = dict(zip(names, posted, strict=True))
    (event,) = Event.objects.filter(run=run, type=EventType.EFFECT_RECONCILED)
    winner = event.payload["by"].removeprefix("user:")
    late = "operator-2" if winner == "operator" else "operator"
    assert answers[winner].status_code == 302
    said = " ".join(str(m) for m in get_messages(answers[winner].wsgi_request))
    assert "reconciled" in said
    told = answers[late].content.decode()
    assert answers[late].status_code == 409, told
    assert f"already reconciled by user:{winner} at " in told and "CONFIRMED" in told, told
    assert "nothing was recorded" in told


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_reconciling_what_the_sweeper_reconciled_names_the_sweeper(
    world: None, operator: Any
) -> None:
    run = outage_run()
    attempt = EffectAttempt.objects.get(run=run, status="UNRESOLVED")
    effect_steps.obligation_reconcile(attempt_id=attempt.pk)  # the sweeper's own
    response = client_for(operator).post(reverse("recovery-reconcile"), {"attempt_id": attempt.pk})
    told = response.content.decode()
    assert response.status_code == 409
    assert "already reconciled by harness (the sweeper) at " in told, told
    assert Event.objects.filter(run=run, type=EventType.EFFECT_RECONCILED).count() == 1
