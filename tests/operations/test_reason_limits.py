"""An operation's reason over its limit is refused with the limit and its length, never cut
(nothing is started); one at the limit is recorded whole, on the operation and on every
cancelled run. The operations' other refusals answer the 400 page with a fitting hint."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from operations import services
from operations.models import REASON_MAX, Operation, SavedView
from runs.domain.states import State
from runs.models import Event, Run
from tests.operations.conftest import client_for, waiting_runs

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

OVER = "x" * (REASON_MAX + 1)
AT_LIMIT = "y" * REASON_MAX
FORM_BODY_HINT = "Forms are sent as UTF-8"


def test_an_operation_over_the_limit_is_refused_and_starts_nothing(world) -> None:
    runs = waiting_runs(2)
    with pytest.raises(services.OperationInputError) as refused:
        services.operation_start_cancel(
            tenant="north",
            by_ref="user:operator",
            query={"world": "faultlab"},
            reason=OVER,
            confirm=2,
        )
    assert refused.value.field == "reason"
    assert f"at most {REASON_MAX} characters and this one has {REASON_MAX + 1}" in str(
        refused.value
    )
    assert not Operation.objects.exists()
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", flat=True)) == {
        State.CREATED.value
    }


def test_an_operation_at_the_limit_records_its_reason_whole_on_every_run(world) -> None:
    runs = waiting_runs(2)
    operation = services.operation_start_cancel(
        tenant="north",
        by_ref="user:operator",
        query={"world": "faultlab"},
        reason=AT_LIMIT,
        confirm=2,
    )
    assert operation.reason == AT_LIMIT
    services.operation_drain(operation_id=operation.pk)
    for run in runs:
        event = Event.objects.get(run=run, type="run.cancelled")
        assert event.payload["reason"] == f"{AT_LIMIT} (operation {operation.short_id})"


def test_the_reconcile_start_refuses_a_reason_over_the_limit(world) -> None:
    with pytest.raises(services.OperationInputError) as refused:
        services.operation_start_reconcile(
            tenant="north", by_ref="user:operator", query={}, reason=OVER, confirm=0
        )
    assert refused.value.field == "reason"
    assert not Operation.objects.exists()


def test_the_form_comes_back_as_typed_with_the_refusal_beside_the_reason(operator) -> None:
    waiting_runs(2)
    response = client_for(operator).post(
        reverse("operations-cancel-start"),
        {"world": "faultlab", "reason": OVER, "confirm": "2", "previewed": "2"},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert f"at most {REASON_MAX} characters and this one has {REASON_MAX + 1}" in body
    assert "nothing was changed" in body
    field = re.search(r'<input[^>]*id="op-reason"[^>]*>', body)
    assert field is not None
    assert 'aria-invalid="true"' in field.group(0) and f'value="{OVER}"' in field.group(0)
    assert not Operation.objects.exists()


def test_a_selection_it_cannot_preview_answers_a_400_with_its_own_hint(operator) -> None:
    response = client_for(operator).get(reverse("operations-incident-preview"), {"capability": ""})
    assert response.status_code == 400
    body = response.content.decode()
    assert FORM_BODY_HINT not in body
    assert "choose it there again" in body
    assert f'href="{reverse("runbooks")}"' in body and "Back to the runbooks" in body


def test_a_view_name_over_its_limit_is_refused_with_its_length(operator) -> None:
    name = "n" * 81
    response = client_for(operator).post(
        reverse("saved-views-create"), {"page": "runs", "name": name, "query": "world=faultlab"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "at most 80 characters and this one has 81" in body
    # Back to the page with the filter that was being saved.
    assert FORM_BODY_HINT not in body and f'href="{reverse("runs-list")}?world=faultlab"' in body
    assert not SavedView.objects.exists()
