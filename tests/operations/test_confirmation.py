"""The typed confirmation of a bulk action says which of two things went wrong: the number
typed is not the count the preview showed, or the filter's set changed since the preview.
Either way nothing is done."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from operations import services
from operations.models import Kind, Operation
from runs.models import Run
from tests.operations.conftest import client_for, waiting_runs

pytestmark = pytest.mark.django_db

PREVIEW = reverse("operations-cancel-preview")
START = reverse("operations-cancel-start")


def _preview_form(client: Client) -> dict[str, str]:
    """The hidden fields of the preview page's start form, as a browser would send them."""
    page = client.get(PREVIEW, {"world": "faultlab"}).content.decode()
    form = page[page.index('id="start-operation"') :]
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form))


def _nothing_cancelled() -> None:
    assert not Operation.objects.exists()
    assert set(Run.objects.values_list("state", flat=True)) == {"CREATED"}


def test_a_mistyped_count_says_it_does_not_match_and_nothing_was_cancelled(operator: Any) -> None:
    waiting_runs(3)
    client = client_for(operator)
    form = _preview_form(client)
    assert form["previewed"] == "3"
    response = client.post(START, {**form, "reason": "gate closed", "confirm": "4"})
    assert response.status_code == 400
    page = response.content.decode()
    assert (
        "The number you typed (4) does not match the 3 runs this filter matches: nothing was "
        "cancelled. Type 3 to confirm." in page
    )
    assert "now matches" not in page and "preview again" not in page
    _nothing_cancelled()


def test_a_set_that_changed_since_the_preview_says_so_and_nothing_was_cancelled(
    operator: Any,
) -> None:
    waiting_runs(3)
    client = client_for(operator)
    form = _preview_form(client)
    waiting_runs(1)  # a run joins the filter's set after the operator looked
    response = client.post(START, {**form, "reason": "gate closed", "confirm": "3"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "the filter now matches 4 item(s), not 3: preview again and confirm the new count" in (
        page
    )
    assert "does not match" not in page
    assert "Type <strong>4</strong> to confirm" in page  # the page previews the new count
    _nothing_cancelled()


def test_the_right_count_starts_the_operation(operator: Any) -> None:
    waiting_runs(3)
    client = client_for(operator)
    form = _preview_form(client)
    response = client.post(START, {**form, "reason": "gate closed", "confirm": "3"})
    assert response.status_code == 302
    assert Operation.objects.get().total == 3


@pytest.mark.parametrize(
    ("kind", "total", "message"),
    [
        (
            Kind.CANCEL,
            1,
            "The number you typed (2) does not match the 1 run this filter matches: "
            "nothing was cancelled. Type 1 to confirm.",
        ),
        (
            Kind.RECONCILE,
            3,
            "The number you typed (2) does not match the 3 unknown effects this filter "
            "matches: nothing was reconciled. Type 3 to confirm.",
        ),
        (
            Kind.INCIDENT,
            0,
            "The number you typed (2) does not match the 0 runs this filter matches: "
            "nothing was cancelled and the gate was not closed.",
        ),
    ],
)
def test_the_mismatch_message_names_what_each_kind_did_not_do(
    kind: str, total: int, message: str
) -> None:
    for previewed in (None, 5):  # unknown, or not what was typed: the typed number is wrong
        assert (
            services.count_mismatch(kind=kind, total=total, confirmed=2, previewed=previewed)
            == message
        )
    changed = services.count_mismatch(kind=kind, total=total, confirmed=2, previewed=2)
    assert changed.startswith(f"the filter now matches {total} item(s), not 2")
