"""The operations pages: preview, typed confirmation, start, progress, pause/cancel and
exports, with role (403) and tenant (404) refusals that change nothing."""

from __future__ import annotations

import csv
import io
import json
import re
from html import escape

import pytest
from django.urls import reverse

from operations import services
from operations.models import Operation, Status
from runs.domain.states import State
from runs.models import Run
from tests.operations.conftest import client_for, waiting_runs

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PREVIEW = reverse("operations-cancel-preview")
START = reverse("operations-cancel-start")


def _start(client, count, **extra):
    data = {"world": "faultlab", "reason": "gate closed", "confirm": str(count), **extra}
    return client.post(START, data)


def test_the_preview_shows_the_count_and_a_sample(operator):
    runs = waiting_runs(3)
    waiting_runs(2, tenant="south")
    page = client_for(operator).get(PREVIEW, {"world": "faultlab"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "3 runs match" in html
    assert all(r.short_id in html for r in runs)
    assert 'name="confirm"' in html


def test_starting_redirects_to_the_operation_and_the_drain_finishes_it(operator):
    runs = waiting_runs(3)
    client = client_for(operator)
    response = _start(client, 3)
    operation = Operation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("operations-detail", args=[operation.pk])
    services.operation_drain(operation_id=operation.pk)
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("state", flat=True)) == {
        State.CANCELLED.value
    }
    page = client.get(reverse("operations-detail", args=[operation.pk]))
    assert 'data-percent="100"' in page.content.decode()
    poll = client.get(
        reverse("operations-detail", args=[operation.pk]),
        headers={"HX-Request": "true", "HX-Target": "op-progress"},
    )
    assert poll.content.decode().lstrip().startswith('<section id="op-progress"')
    assert "hx-trigger" not in poll.content.decode()  # finished: the poll stops
    listing = client.get(reverse("operations-list")).content.decode()
    assert operation.short_id in listing and "100 %" in listing
    assert 'hx-trigger="every 2s"' not in listing  # nothing running: the list stops polling


def test_the_operations_list_polls_while_one_runs(operator):
    waiting_runs(2)
    client = client_for(operator)
    _start(client, 2)
    listing = client.get(reverse("operations-list")).content.decode()
    assert 'hx-trigger="every 2s"' in listing and "0 %" in listing
    poll = client.get(
        reverse("operations-list"), headers={"HX-Request": "true", "HX-Target": "op-table"}
    )
    assert poll.content.decode().lstrip().startswith('<div id="op-table"')


def test_a_wrong_confirmation_is_a_400_and_starts_nothing(operator):
    waiting_runs(3)
    response = _start(client_for(operator), 4)
    assert response.status_code == 400
    assert "does not match the 3 runs this filter matches" in response.content.decode()
    assert not Operation.objects.exists()


def test_an_approver_may_not_preview_or_start(approver):
    waiting_runs(2)
    client = client_for(approver)
    assert client.get(PREVIEW, {"world": "faultlab"}).status_code == 403
    assert _start(client, 2).status_code == 403
    assert client.get(reverse("operations-list")).status_code == 403
    assert not Operation.objects.exists()
    assert set(Run.objects.values_list("state", flat=True)) == {State.CREATED.value}


def test_another_tenant_gets_404_and_changes_nothing(operator, operator_south):
    waiting_runs(2)
    operation = services.operation_start_cancel(
        tenant="north", by_ref="user:operator", query={"world": "faultlab"}, reason="r", confirm=2
    )
    south = client_for(operator_south)
    assert south.get(reverse("operations-detail", args=[operation.pk])).status_code == 404
    for action in ("pause", "cancel"):
        url = reverse("operations-move", args=[operation.pk, action])
        assert south.post(url).status_code == 404
    url = reverse("operations-results-export", args=[operation.pk, "csv"])
    assert south.get(url).status_code == 404
    operation.refresh_from_db()
    assert operation.status == Status.RUNNING
    # The south operator's own bulk cancel never sees north's runs.
    assert "0 runs match" in south.get(PREVIEW, {"world": "faultlab"}).content.decode()


def test_pause_and_cancel_from_the_page(operator):
    waiting_runs(2)
    client = client_for(operator)
    _start(client, 2)
    operation = Operation.objects.get()
    client.post(reverse("operations-move", args=[operation.pk, "pause"]))
    operation.refresh_from_db()
    assert operation.status == Status.PAUSED
    assert client.post(reverse("operations-move", args=[operation.pk, "pause"])).status_code == 409
    assert client.get(reverse("operations-move", args=[operation.pk, "cancel"])).status_code == 405
    client.post(reverse("operations-move", args=[operation.pk, "cancel"]))
    operation.refresh_from_db()
    assert operation.status == Status.CANCELLED


def test_results_and_runs_export_as_csv_and_json(operator):
    runs = waiting_runs(3)
    client = client_for(operator)
    _start(client, 3)
    operation = Operation.objects.get()
    services.operation_drain(operation_id=operation.pk)

    body = b"".join(
        client.get(
            reverse("operations-results-export", args=[operation.pk, "csv"])
        ).streaming_content
    ).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert sorted(r["run_id"] for r in rows) == sorted(str(r.pk) for r in runs)
    assert {r["result"] for r in rows} == {"done"}

    response = client.get(
        reverse("operations-results-export", args=[operation.pk, "json"]), {"result": "refused"}
    )
    document = json.loads(b"".join(response.streaming_content))
    assert document["operation"] == str(operation.pk) and document["items"] == []

    response = client.get(reverse("operations-runs-export", args=["json"]), {"world": "faultlab"})
    assert response["Content-Disposition"] == 'attachment; filename="runs.json"'
    document = json.loads(b"".join(response.streaming_content))
    assert sorted(r["id"] for r in document["runs"]) == sorted(str(r.pk) for r in runs)
    assert document["filter"]["world"] == "faultlab"

    response = client.get(reverse("operations-runs-export", args=["csv"]), {"world": "live"})
    assert b"".join(response.streaming_content).decode().strip() == ",".join(
        (
            "id",
            "scenario",
            "namespace",
            "state",
            "disposition",
            "terminal_reason",
            "revision",
            "principal_ref",
            "created_at",
        )
    )
    assert client.get(reverse("operations-runs-export", args=["xml"])).status_code == 404
    assert (
        client.get(reverse("operations-runs-export", args=["csv"]), {"q": "zz"}).status_code == 400
    )


def test_the_audit_record_shows_the_filter_as_terms_not_a_python_dict(operator):
    """The operation's page names the filter it acted on as the preview did (``scenario =
    …``), leaving out the empty fields, never the stored record's Python repr."""
    waiting_runs(2)
    client = client_for(operator)
    assert _start(client, 2).status_code == 302
    operation = Operation.objects.get()
    html = client.get(reverse("operations-detail", args=[operation.pk])).content.decode()
    audit = html[html.index('id="audit-h"') :]
    assert "{&#x27;" not in audit and "&#x27;query&#x27;" not in audit
    assert "Filter as it was: runs list · world = <code>faultlab</code>" in audit
    assert "state =" not in audit  # an empty field is not a term of the filter


def test_the_operations_page_names_every_place_an_operation_starts(operator):
    """Three kinds of bulk operation start elsewhere: a bulk cancel on the runs list, a
    bulk reconcile on the recovery page, an incident on a runbook. The page (empty too)
    links to each, not only to the first."""
    html = client_for(operator).get(reverse("operations-list")).content.decode()
    head = html[html.index("<h1>Operations</h1>") : html.index('id="op-table"')]
    for name in ("runs-list", "recovery", "runbooks"):
        assert f'href="{reverse(name)}"' in head, name


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("state", "WAITNG_HUMAN"),  # a typo of WAITING_HUMAN
        ("scenario", "clarfy"),
        ("disposition", "CANCELED"),
        ("age", "week"),
        ("capability", "reserve-part"),
        ("world", "faultlabs"),
    ],
)
def test_a_filter_value_the_runs_list_does_not_know_widens_no_bulk_cancel(operator, key, value):
    """The runs list ignores a value it does not know, so the preview counted, and the
    start cancelled, every run of the world: a mistyped state in a link cancelled all."""
    runs = waiting_runs(3)
    client = client_for(operator)
    page = client.get(PREVIEW, {"world": "faultlab", key: value})
    assert page.status_code == 400
    assert escape(f"nknown {key} {value!r}") in page.content.decode()
    response = _start(client, 3, **{key: value})
    assert response.status_code == 400
    assert escape(f"nknown {key} {value!r}") in response.content.decode()
    assert not Operation.objects.exists()
    assert all(Run.objects.get(pk=r.pk).state == r.state for r in runs)


def test_the_result_table_numbers_its_items_from_one(operator):
    waiting_runs(3)
    client = client_for(operator)
    _start(client, 3)
    operation = Operation.objects.get()
    services.operation_drain(operation_id=operation.pk)
    html = client.get(reverse("operations-detail", args=[operation.pk])).content.decode()
    table = html[html.index('<table id="op-results">') :]
    table = table[: table.index("</table>")]
    numbers = re.findall(r"<tr><td>(\d+)</td>", table)
    assert numbers == ["1", "2", "3"]
