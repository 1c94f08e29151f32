"""Saved views (named filters shared within the tenant, listed in the navigation) and the
runs list's live counts per state."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from operations import selectors as op_selectors
from operations.models import SavedView
from runs import services as run_services
from tests.operations.conftest import client_for, waiting_runs

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _save(client, name="Fault lab waiting", page="runs", query="world=faultlab&state=CREATED"):
    return client.post(reverse("saved-views-create"), {"page": page, "name": name, "query": query})


def test_a_saved_view_opens_its_page_with_its_filter_for_the_whole_tenant(
    operator, approver, operator_south
):
    response = _save(client_for(operator), query="world=faultlab&state=CREATED&after=abc&evil=1")
    view = SavedView.objects.get()
    assert view.query == {"world": "faultlab", "state": "CREATED"}  # no cursor, no unknown key
    assert response["Location"] == reverse("saved-views-open", args=[view.pk])

    colleague = client_for(approver)  # same tenant, another role
    opened = colleague.get(reverse("saved-views-open", args=[view.pk]))
    assert opened.status_code == 302
    assert opened["Location"] == reverse("runs-list") + "?state=CREATED&world=faultlab"
    nav = colleague.get(reverse("runs-list")).content.decode()
    assert "Runs: Fault lab waiting" in nav

    south = client_for(operator_south)
    assert south.get(reverse("saved-views-open", args=[view.pk])).status_code == 404
    assert "Fault lab waiting" not in south.get(reverse("runs-list")).content.decode()
    assert south.post(reverse("saved-views-delete", args=[view.pk])).status_code == 404
    assert colleague.post(reverse("saved-views-delete", args=[view.pk])).status_code == 403
    assert SavedView.objects.exists()


def test_saving_refuses_an_unknown_page_an_empty_or_taken_name(operator):
    client = client_for(operator)
    assert _save(client).status_code == 302
    assert _save(client).status_code == 400  # taken
    assert _save(client, name="  ").status_code == 400
    assert _save(client, page="admin").status_code == 400
    assert SavedView.objects.count() == 1
    assert _save(client, page="approvals", query="kind=reservation").status_code == 302
    assert _save(client, page="recovery", query="q=key-1").status_code == 302


def test_a_refused_name_leads_back_to_the_page_with_the_filter_it_was_saving(operator):
    """A taken name is refused on a page of its own: its way back reopens the filtered page,
    not the page without the filter the user was about to save."""
    client = client_for(operator)
    assert _save(client).status_code == 302
    refused = _save(client, query="world=faultlab&state=CREATED&after=abc")
    assert refused.status_code == 400
    back = reverse("runs-list") + "?state=CREATED&amp;world=faultlab"
    assert f'href="{back}"' in refused.content.decode()


@pytest.mark.parametrize("query", ["state=%00", "q=ab%00cd&world=faultlab"])
def test_a_filter_with_an_encoded_nul_is_refused_and_nothing_is_saved(operator, query):
    """The NUL hides percent-encoded in the query field (a 500 on PostgreSQL before)."""
    response = _save(client_for(operator), query=query)
    assert response.status_code == 400
    assert "NUL" in response.content.decode()
    assert not SavedView.objects.exists()


def test_the_creator_deletes_a_view(operator):
    client = client_for(operator)
    _save(client)
    view = SavedView.objects.get()
    assert client.post(reverse("saved-views-delete", args=[view.pk])).status_code == 302
    assert not SavedView.objects.exists()


def test_live_counts_per_state_follow_the_filter_but_not_its_state(operator):
    runs = waiting_runs(3)
    waiting_runs(2, tenant="south")
    run_services.run_cancel(run_id=str(runs[0].pk), by_ref="user:operator", reason="r")
    client = client_for(operator)
    body = client.get(
        reverse("operations-state-counts"), {"world": "faultlab", "state": "CREATED"}
    ).content.decode()
    assert "CREATED: 2" in body and "CANCELLED: 1" in body
    assert 'hx-trigger="every 5s"' in body
    assert "CREATED: 0" not in client.get(reverse("operations-state-counts")).content.decode()
    page = client.get(reverse("runs-list"), {"world": "faultlab"}).content.decode()
    assert 'id="state-counts"' in page and 'form="save-view"' in page


def test_live_counts_cover_the_newest_runs_up_to_the_cap_in_one_query(
    operator, monkeypatch, django_assert_num_queries
):
    """At most COUNT_CAP runs are counted, the newest the filter selects, and the fragment
    says so when the filter selects more; the same single read at any size."""
    monkeypatch.setattr(op_selectors, "COUNT_CAP", 3)
    client = client_for(operator)
    older = waiting_runs(2)
    run_services.run_cancel(run_id=str(older[0].pk), by_ref="user:operator", reason="r")
    url = reverse("operations-state-counts")
    client.get(url, {"world": "faultlab"})
    with CaptureQueriesContext(connection) as small:
        body = client.get(url, {"world": "faultlab"}).content.decode()
    assert "CREATED: 1<" in body and "CANCELLED: 1<" in body and "newest" not in body
    queries = len(small.captured_queries)  # read now: the next request clears the log
    waiting_runs(3)  # newer than the cancelled one, which drops out of the newest 3
    with django_assert_num_queries(queries):
        body = client.get(url, {"world": "faultlab"}).content.decode()
    assert "CREATED: 3<" in body and "CANCELLED" not in body
    assert "among the newest 3 runs of this filter" in body


@pytest.mark.parametrize(
    "name",
    [
        "Failed\r\nSet-Cookie: a=b",  # shown in every colleague's nav as two lines
        "evil\u202etxt.exe",  # a right-to-left override turns the name around on screen
        "tab\there",
    ],
)
def test_a_view_name_with_a_control_character_is_refused(operator, name):
    response = _save(client_for(operator), name=name)
    assert response.status_code == 400
    # A bidirectional control is named (kernel/text.py); any other by its kind.
    told = "U+202E RIGHT-TO-LEFT OVERRIDE" if "\u202e" in name else "control characters"
    assert told in response.content.decode()
    assert not SavedView.objects.exists()
