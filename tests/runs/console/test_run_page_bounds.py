"""Every list on the run page is bounded: a run with many checkpoints, effect attempts or
follow-ups shows its latest few and links the whole list (paged by keyset), with the same
queries as a run with one; the timeline's kind filters page a history exactly."""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import Checkpoint
from runs import services
from runs.console import runs_selectors as selectors
from runs.domain.states import CONTROL_EVENTS, REJECTION_EVENTS
from runs.models import EffectAttempt, Event, Run
from tests.runs.console.conftest import client_for
from tests.runs.histories import long_run

pytestmark = pytest.mark.django_db

LIMIT = selectors.RELATED_LIMIT


def add_checkpoints(run: Run, count: int, *, first: int = 0) -> list[str]:
    """``count`` used checkpoints of ``run``, one a second from its creation; their ids."""
    rows = [
        Checkpoint(
            id=f"cp-bounds-{run.pk.hex[:8]}-{n:04d}",
            run=run,
            tenant=run.tenant,
            kind="approval",
            status="USED",
            requested_by_ref="user:operator",
            required_role="approver",
            opened_sequence=1,
            expires_at=run.created_at + dt.timedelta(hours=1),
            created_at=run.created_at + dt.timedelta(seconds=n),
        )
        for n in range(first, first + count)
    ]
    Checkpoint.objects.bulk_create(rows)
    return [c.pk for c in rows]


def add_attempts(run: Run, count: int) -> list[str]:
    rows = [
        EffectAttempt(
            id=f"at-bounds-{run.pk.hex[:8]}-{n:04d}",
            run=run,
            idempotency_key=f"key-{run.pk.hex[:8]}-{n:04d}",
            proposal_hash="0" * 64,
            attempt=1,
            owner_epoch=1,
            dispatch_sequence=n + 1,
            status="RECORDED",
            created_at=run.created_at + dt.timedelta(seconds=n),
        )
        for n in range(count)
    ]
    EffectAttempt.objects.bulk_create(rows)
    return [a.pk for a in rows]


def fresh_run() -> Run:
    return services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", start=False
    )


def shown_ids(html: str, prefix: str) -> list[str]:
    return re.findall(rf">({prefix}[\w-]+)</(?:a|span)>", html)  # linked, or only named


def walk(client: Client, url: str, prefix: str) -> list[str]:
    """Every row of a full list, following its "Older" links."""
    seen: list[str] = []
    page = client.get(url)
    for _ in range(100):
        assert page.status_code == 200
        html = page.content.decode()
        seen += shown_ids(html, prefix)
        older = re.search(r'href="\?before=([\w-]+)" rel="next"', html)
        if older is None:
            return seen
        page = client.get(url, {"before": older.group(1)})
    raise AssertionError("the list did not end")


def test_the_run_page_shows_the_latest_checkpoints_and_attempts_and_links_the_rest(
    operator: Any,
) -> None:
    client = client_for(operator)
    run = fresh_run()
    checkpoints = add_checkpoints(run, LIMIT + 7)
    attempts = add_attempts(run, LIMIT + 3)
    html = client.get(reverse("runs-detail", args=[run.pk])).content.decode()
    # The latest LIMIT of each, oldest first; the earlier ones only on the full lists.
    assert shown_ids(html, "cp-bounds-") == checkpoints[-LIMIT:]
    assert shown_ids(html, "at-bounds-") == attempts[-LIMIT:]
    assert reverse("runs-checkpoints", args=[run.pk]) in html
    assert reverse("runs-attempts", args=[run.pk]) in html
    # The full lists: newest first, every row exactly once over their pages.
    assert (
        walk(client, reverse("runs-checkpoints", args=[run.pk]), "cp-bounds-")
        == (checkpoints[::-1])
    )
    assert walk(client, reverse("runs-attempts", args=[run.pk]), "at-bounds-") == attempts[::-1]


def test_a_short_list_has_no_link_to_the_rest(operator: Any) -> None:
    run = fresh_run()
    add_checkpoints(run, LIMIT)
    html = client_for(operator).get(reverse("runs-detail", args=[run.pk])).content.decode()
    assert len(shown_ids(html, "cp-bounds-")) == LIMIT
    assert reverse("runs-checkpoints", args=[run.pk]) not in html


def test_the_full_lists_page_by_keyset_with_ties_on_the_creation_time(world: None) -> None:
    run = fresh_run()
    ids = add_checkpoints(run, 23)
    Checkpoint.objects.filter(run=run).update(created_at=run.created_at)  # all tied
    seen: list[str] = []
    cursor = ""
    while True:
        page = selectors.related_page(run=run, what="checkpoints", cursor=cursor, page_size=5)
        assert page is not None
        seen += [c.pk for c in page.rows]
        if not page.older:
            break
        cursor = page.older
    assert seen == sorted(ids, reverse=True)


def test_a_bad_cursor_on_a_full_list_is_400(operator: Any) -> None:
    run = fresh_run()
    response = client_for(operator).get(reverse("runs-attempts", args=[run.pk]), {"before": "x"})
    assert response.status_code == 400
    # The console's 400 page, with the way back to the list's first page.
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "400 · Bad request" in page and "this page link is not valid" in page
    first_page = reverse("runs-attempts", args=[run.pk])
    assert f'<a href="{first_page}">Open the first page of the list</a>' in page


def forged_cursor(stamp: str, pk: str) -> str:
    return base64.urlsafe_b64encode(f"{stamp}|{pk}".encode()).decode().rstrip("=")


# Moments with no UTC equivalent (the database adapter's conversion overflowed: a 500
# before) and one without an offset (never one of ours).
FORGED_STAMPS = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "2026-01-01T00:00:00"]


@pytest.mark.parametrize("stamp", FORGED_STAMPS)
@pytest.mark.parametrize("name", ["runs-checkpoints", "runs-attempts", "runs-follow-ups"])
def test_a_forged_cursor_on_a_full_list_is_400(operator: Any, name: str, stamp: str) -> None:
    run = fresh_run()
    cursor = forged_cursor(stamp, str(run.pk))
    response = client_for(operator).get(reverse(name, args=[run.pk]), {"before": cursor})
    assert response.status_code == 400


@pytest.mark.parametrize("name", ["runs-checkpoints", "runs-attempts", "runs-follow-ups"])
def test_a_cursor_whose_id_carries_a_nul_is_400(operator: Any, name: str) -> None:
    """Hidden in the base64, the NUL passes the request's own check (a 500 on PostgreSQL)."""
    run = fresh_run()
    cursor = forged_cursor("2026-01-01T00:00:00+00:00", "cp-\x00")
    response = client_for(operator).get(reverse(name, args=[run.pk]), {"before": cursor})
    assert response.status_code == 400


@pytest.mark.parametrize("stamp", FORGED_STAMPS)
@pytest.mark.parametrize("query", [{}, {"capability": "reserve_part"}])
def test_a_forged_cursor_on_the_runs_list_is_its_first_page(
    operator: Any, query: dict[str, str], stamp: str
) -> None:
    run = fresh_run()
    cursor = forged_cursor(stamp, str(run.pk))
    response = client_for(operator).get(reverse("runs-list"), {**query, "after": cursor})
    assert response.status_code == 200  # a cursor that is not ours is ignored
    if not query:
        assert run.pk in {r.pk for r in response.context["page"].runs}


def test_another_tenants_full_lists_are_404(operator_south: Any) -> None:
    run = fresh_run()
    client = client_for(operator_south)
    for name in ("runs-checkpoints", "runs-attempts", "runs-follow-ups"):
        assert client.get(reverse(name, args=[run.pk])).status_code == 404


def test_follow_ups_are_bounded_and_listed_in_full(operator: Any) -> None:
    client = client_for(operator)
    run = fresh_run()
    follow_ups = [fresh_run() for _ in range(LIMIT + 2)]
    for n, f in enumerate(follow_ups):
        Run.objects.filter(pk=f.pk).update(
            follows_run=run, created_at=run.created_at + dt.timedelta(seconds=n + 1)
        )
    html = client.get(reverse("runs-detail", args=[run.pk])).content.decode()
    short = [str(f.pk)[:8] for f in follow_ups]
    assert all(s in html for s in short[-LIMIT:])
    assert not any(s in html for s in short[:2])
    assert reverse("runs-follow-ups", args=[run.pk]) in html
    full = client.get(reverse("runs-follow-ups", args=[run.pk])).content.decode()
    listed = re.findall(r'href="/runs/([0-9a-f-]{36})/"', full)
    assert [m for m in listed if m != str(run.pk)] == [str(f.pk) for f in reversed(follow_ups)]


def test_the_waiting_checkpoint_is_linked_even_behind_newer_ones(
    approver: Any, waiting_run: Run
) -> None:
    waiting = waiting_run.waiting_checkpoint
    add_checkpoints(waiting_run, LIMIT + 1, first=3600)  # all newer than the waiting one
    html = client_for(approver).get(reverse("runs-detail", args=[waiting_run.pk])).content
    assert waiting not in shown_ids(html.decode(), "cp-")
    assert f'href="{reverse("approvals-detail", args=[waiting])}">open checkpoint' in (
        html.decode()
    )


def test_the_run_page_costs_the_same_queries_with_one_or_many_records(
    operator: Any, django_assert_num_queries: Any
) -> None:
    client = client_for(operator)
    small, big = fresh_run(), fresh_run()
    add_checkpoints(small, 1)
    add_attempts(small, 1)
    add_checkpoints(big, selectors.RELATED_PAGE + 5)  # more than a page of the full lists
    add_attempts(big, selectors.RELATED_PAGE + 5)
    client.get(reverse("runs-detail", args=[small.pk]))  # session, caches: not counted
    with CaptureQueriesContext(connection) as counted:
        client.get(reverse("runs-detail", args=[small.pk]))
    with django_assert_num_queries(len(counted.captured_queries)):
        client.get(reverse("runs-detail", args=[big.pk]))
    for what, row in (("checkpoints", "cp-"), ("attempts", "at-")):
        url = reverse(f"runs-{what}", args=[big.pk])
        client.get(url)
        with CaptureQueriesContext(connection) as first:
            html = client.get(url).content.decode()
        queries = len(first.captured_queries)  # read now: the next request clears the log
        older = re.search(r'before=([\w-]+)" rel="next"', html)
        assert older is not None, row
        with django_assert_num_queries(queries):
            client.get(url, {"before": older.group(1)})


# -- timeline kinds ------------------------------------------------------------------------
KINDS = {
    "all": lambda t: True,
    "transitions": lambda t: t not in {e.value for e in CONTROL_EVENTS},
    "control": lambda t: t in {e.value for e in CONTROL_EVENTS},
    "rejected": lambda t: t in {e.value for e in REJECTION_EVENTS},
}


@pytest.fixture
def mixed_history(world: None) -> tuple[Run, list[tuple[int, str]]]:
    """A 120-event history with control events at the edges and in runs: the first event
    after the start, consecutive ones, the very last one."""
    control_at = frozenset({2, 3, 4, 17, 50, 51, 99, 100, 101, 119, 120})
    run = long_run(120, control_at=control_at)
    stored = list(
        Event.objects.filter(run=run).order_by("sequence").values_list("sequence", "type")
    )
    assert sum(KINDS["control"](t) for _, t in stored) == len(control_at)
    return run, stored


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    limit=st.integers(min_value=1, max_value=12),
    cursor=st.one_of(
        st.none(),
        st.tuples(st.sampled_from(["before", "after"]), st.integers(min_value=0, max_value=122)),
    ),
)
def test_a_timeline_page_of_any_kind_is_the_slice_of_that_kind(
    mixed_history: tuple[Run, list[tuple[int, str]]],
    kind: str,
    limit: int,
    cursor: tuple[str, int] | None,
) -> None:
    """Each page equals the same slice of the history filtered in Python, and its cursors
    point at the neighbouring pages (None exactly at the ends)."""
    run, stored = mixed_history
    matching = [s for s, t in stored if KINDS[kind](t)]
    args: dict[str, Any] = {cursor[0]: cursor[1]} if cursor else {}
    page = selectors.run_timeline(run=run, kind=kind, limit=limit, **args)
    got = [e.event.sequence for e in page]
    if cursor and cursor[0] == "after":
        expected = [s for s in matching if s > cursor[1]][:limit]
        more_newer = len([s for s in matching if s > cursor[1]]) > limit
        assert page.newer == (expected[-1] if more_newer else None)
    else:
        below = [s for s in matching if cursor is None or s < cursor[1]]
        expected = below[-limit:]
        assert page.older == (expected[0] if len(below) > limit else None)
    assert got == expected


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_walking_a_kind_backwards_and_forwards_sees_each_event_once(
    mixed_history: tuple[Run, list[tuple[int, str]]], kind: str
) -> None:
    run, stored = mixed_history
    matching = [s for s, t in stored if KINDS[kind](t)]
    back: list[int] = []
    page = selectors.run_timeline(run=run, kind=kind, limit=4)
    while True:
        back[:0] = [e.event.sequence for e in page]
        if page.older is None:
            break
        page = selectors.run_timeline(run=run, kind=kind, limit=4, before=page.older)
    forward: list[int] = []
    page = selectors.run_timeline(run=run, kind=kind, limit=4, after=0)
    while True:
        forward += [e.event.sequence for e in page]
        if page.newer is None:
            break
        page = selectors.run_timeline(run=run, kind=kind, limit=4, after=page.newer)
    assert back == forward == matching


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_timeline_page_is_one_query_of_any_kind(
    mixed_history: tuple[Run, list[tuple[int, str]]], kind: str, django_assert_num_queries: Any
) -> None:
    run, _ = mixed_history
    with django_assert_num_queries(1):
        selectors.run_timeline(run=run, kind=kind, limit=5, before=60)
