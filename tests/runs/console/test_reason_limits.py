"""A person's reason (cancellation, budget change, bulk cancel) over its limit is refused
with the limit and its length, never cut: nothing is recorded, and the form comes back as
typed with the refusal beside the reason."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.console import operations
from runs.models import Event, Run
from tests.helpers import types

pytestmark = pytest.mark.django_db

LIMIT = services.REASON_MAX
OVER = "x" * (LIMIT + 1)
AT_LIMIT = "y" * LIMIT


def _field(body: str, field_id: str) -> str:
    """The opening tag of the input or textarea ``field_id`` in ``body``."""
    match = re.search(rf'<(?:input|textarea)[^>]*id="{field_id}"[^>]*>', body)
    assert match is not None, field_id
    return match.group(0)


def _refused_on_page(response, field_id: str) -> str:
    assert response.status_code == 400
    body = response.content.decode()
    assert f"at most {LIMIT} characters and this one has {LIMIT + 1}" in body
    assert "nothing was changed" in body
    assert 'aria-invalid="true"' in _field(body, field_id)
    return body


# -- services ----------------------------------------------------------------------------
def test_a_cancellation_over_the_limit_is_refused_and_one_at_it_is_recorded_whole(
    waiting_run: Run,
) -> None:
    before = types(waiting_run)
    with pytest.raises(services.RunInputError) as refused:
        services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason=OVER)
    assert refused.value.field == "reason"
    assert f"at most {LIMIT} characters and this one has {LIMIT + 1}" in str(refused.value)
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN" and types(waiting_run) == before
    result = services.run_cancel(
        run_id=str(waiting_run.pk), by_ref="user:operator", reason=AT_LIMIT
    )
    assert result.applied
    assert Event.objects.get(run=waiting_run, type="run.cancelled").payload["reason"] == AT_LIMIT


def test_a_budget_change_over_the_limit_is_refused_and_one_at_it_is_recorded_whole(
    waiting_run: Run,
) -> None:
    change = {"run_id": str(waiting_run.pk), "by_ref": "user:operator", "budget": "actions"}
    with pytest.raises(services.RunInputError) as refused:
        services.run_budget_change(**change, limit=20, reason=OVER)
    assert refused.value.field == "reason"
    assert "budget.changed" not in types(waiting_run)
    services.run_budget_change(**change, limit=20, reason=AT_LIMIT)
    event = Event.objects.get(run=waiting_run, type="budget.changed")
    assert event.payload["reason"] == AT_LIMIT


def test_a_bulk_cancel_over_the_limit_cancels_no_run(waiting_run: Run) -> None:
    with pytest.raises(services.RunInputError) as refused:
        operations.run_cancel_many(
            tenant="north", run_ids=[str(waiting_run.pk)], by_ref="user:operator", reason=OVER
        )
    assert refused.value.field == "reason"
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"
    rows = operations.run_cancel_many(
        tenant="north", run_ids=[str(waiting_run.pk)], by_ref="user:operator", reason=AT_LIMIT
    )
    assert [r.applied for r in rows] == [True]
    assert Event.objects.get(run=waiting_run, type="run.cancelled").payload["reason"] == AT_LIMIT


def test_line_breaks_count_once_as_the_textarea_counts_them(waiting_run: Run) -> None:
    typed = "\n".join(["z" * 49] * 10)  # 499 characters in the textarea, 508 sent as CRLF
    services.run_cancel(
        run_id=str(waiting_run.pk), by_ref="user:operator", reason=typed.replace("\n", "\r\n")
    )
    assert Event.objects.get(run=waiting_run, type="run.cancelled").payload["reason"] == typed


# -- console forms ---------------------------------------------------------------------------
def test_the_cancel_form_comes_back_as_typed_with_the_refusal(
    as_operator: Client, waiting_run: Run
) -> None:
    response = as_operator.post(reverse("runs-cancel", args=[waiting_run.pk]), {"reason": OVER})
    body = _refused_on_page(response, "cancel-reason")
    assert f">{OVER}</textarea>" in body
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN" and "run.cancelled" not in types(waiting_run)


def test_the_budget_form_comes_back_as_typed_with_the_refusal(
    as_operator: Client, waiting_run: Run
) -> None:
    limits = dict(waiting_run.budget_limits)
    url = reverse("runs-budget", args=[waiting_run.pk])
    response = as_operator.post(url, {"budget": "actions", "limit": "20", "reason": OVER})
    body = _refused_on_page(response, "budget-reason")
    assert f'value="{OVER}"' in _field(body, "budget-reason")
    waiting_run.refresh_from_db()
    assert waiting_run.budget_limits == limits
    assert "budget.changed" not in types(waiting_run)


def test_the_bulk_cancel_form_comes_back_as_typed_with_the_refusal(
    as_operator: Client, waiting_run: Run
) -> None:
    response = as_operator.post(
        reverse("runs-bulk-cancel"), {"run": [str(waiting_run.pk)], "reason": OVER}
    )
    body = _refused_on_page(response, "bulk-reason")
    assert f'value="{OVER}"' in _field(body, "bulk-reason")
    assert f'id="sel-{waiting_run.pk}"' in body
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"
