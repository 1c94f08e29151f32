"""The run page's timeline pages through a history of any length by keyset (sequence):
older/newer links, one query per page, the same queries at 100 and at 5,000 events."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.console import runs_selectors as selectors
from tests.runs.console.conftest import client_for
from tests.runs.histories import long_run


def page_queries(client, run, **query) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("runs-detail", args=[run.pk]), query)
    assert response.status_code == 200
    return len(captured), response.content.decode()


def sequences(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<tr id="ev-(\d+)"', html)]


def test_the_run_page_costs_the_same_queries_at_100_and_5000_events(world, operator):
    client = client_for(operator)
    small, big = long_run(100), long_run(5000)
    page_queries(client, small)  # session, caches: not counted
    count_small, html_small = page_queries(client, small)
    count_big, html_big = page_queries(client, big)
    assert count_small == count_big
    assert sequences(html_small) == list(range(1, 101))
    assert sequences(html_big) == list(range(4001, 5001))
    assert "older events" in html_big and "older events" not in html_small
    older, html_older = page_queries(client, big, before=4001)
    assert older == count_big
    assert sequences(html_older) == list(range(3001, 4001))
    assert "newer events" in html_older


def test_older_and_newer_walk_the_whole_history_exactly_once(world):
    run = long_run(1234)
    seen: list[int] = []
    page = selectors.run_timeline(run=run, limit=100)
    assert page.newer is None
    while True:
        seen[:0] = [e.event.sequence for e in page]
        if page.older is None:
            break
        page = selectors.run_timeline(run=run, limit=100, before=page.older)
    assert seen == list(range(1, 1235))
    forward: list[int] = []
    page = selectors.run_timeline(run=run, limit=100, after=0)
    while True:
        forward += [e.event.sequence for e in page]
        if page.newer is None:
            break
        page = selectors.run_timeline(run=run, limit=100, after=page.newer)
    assert forward == seen


def test_a_filtered_timeline_pages_by_the_same_cursor(world):
    run = long_run(900)
    page = selectors.run_timeline(run=run, kind="transitions", limit=50, before=500)
    assert [e.event.sequence for e in page] == list(range(450, 500))
    assert selectors.run_timeline(run=run, kind="rejected", limit=50).entries == []


@pytest.mark.parametrize(
    "query",
    [
        {"before": "x"},
        {"after": "-3"},
        {"before": "5", "after": "9"},
        # Digits str.isdigit() accepts but int() does not (a 500 before).
        {"before": "\u00b2"},
        {"after": "1\u00b3"},
    ],
)
def test_a_bad_timeline_cursor_is_400(world, operator, query):
    run = long_run(10)
    response = client_for(operator).get(reverse("runs-detail", args=[run.pk]), query)
    assert response.status_code == 400
    assert b"Bad timeline page" in response.content


def test_a_bad_timeline_cursor_is_the_consoles_400_page_with_the_way_back(world, operator):
    run = long_run(10)
    url = reverse("runs-detail", args=[run.pk])
    response = client_for(operator).get(url, {"kind": "transitions", "before": "x"})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "400 · Bad request" in page
    assert "Bad timeline page: before must be an event sequence number." in page
    assert "UTF-8" not in page  # the form-body advice is not about a link
    # The way back: the run's latest timeline page, with the same filter.
    assert f'<a href="{url}?kind=transitions">Open the latest page of this run' in page


def test_a_bad_timeline_cursor_for_htmx_is_the_same_400_page(world, operator):
    """No error fragment exists: the older/newer links (hx-target #run-live) get the 400
    page with its status, as every HTMX error is answered (htmx swaps no 4xx)."""
    run = long_run(10)
    response = client_for(operator).get(
        reverse("runs-detail", args=[run.pk]),
        {"after": "5", "before": "9"},
        headers={"HX-Request": "true", "HX-Target": "run-live"},
    )
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "400 · Bad request" in page
    assert "give either before or after, not both" in page


def test_another_tenants_run_page_is_404_whatever_the_cursor(world, operator_south):
    run = long_run(10)
    response = client_for(operator_south).get(
        reverse("runs-detail", args=[run.pk]), {"before": "5"}
    )
    assert response.status_code == 404
