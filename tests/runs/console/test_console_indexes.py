"""The console's reads use the indexes made for them, on both backends: a query whose
condition drifts from its partial index's (a reordered type list, a range next to the
id-prefix expression) would read a whole history or every run at scale, and nothing else
would notice. PostgreSQL is asked with sequential and bitmap scans off (the tables here
are tiny, so it would rightly scan them); SQLite plans a partial index only when the
query's condition is the index's, term for term."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import services
from runs.console import runs_selectors as selectors
from runs.models import Run
from runs.terminal import effect_account_with

pytestmark = pytest.mark.django_db


def plan_of(read: Callable[[], Any], *, last: int = 1) -> str:
    """The plan of the ``last``-th query from the end that ``read`` issues."""
    with CaptureQueriesContext(connection) as captured:
        read()
    sql = captured.captured_queries[-last]["sql"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute("EXPLAIN " + sql)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.fixture
def run(world: None) -> Run:
    return services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", start=False
    )


@pytest.mark.parametrize(
    ("kind", "index"),
    [
        ("transitions", "event_run_transition"),
        ("control", "event_run_control"),
        ("rejected", "event_run_rejected"),
    ],
)
def test_each_timeline_kind_reads_its_own_index(run: Run, kind: str, index: str) -> None:
    for cursor in ({}, {"before": 50}, {"after": 50}):
        read = functools.partial(selectors.run_timeline, run=run, kind=kind, **cursor)
        assert index in plan_of(read)


@pytest.mark.parametrize(
    ("what", "index"),
    [
        ("checkpoints", "checkpoint_run_created"),
        ("attempts", "attempt_run_created"),
        ("follow-ups", "run_follows_created"),
    ],
)
def test_the_run_pages_lists_read_their_indexes(run: Run, what: str, index: str) -> None:
    assert index in plan_of(lambda: selectors.related_page(run=run, what=what))


def test_the_effect_account_reads_partial_indexes(run: Run) -> None:
    assert "event_run_reconciled" in plan_of(lambda: effect_account_with(run, None), last=2)
    assert "attempt_run_unresolved" in plan_of(lambda: effect_account_with(run, None))


@pytest.mark.parametrize("q", ["abc", "3f0"])
def test_a_three_digit_search_seeks_the_id_prefix_index(run: Run, q: str) -> None:
    filters = selectors.RunFilters.from_query({"q": q})
    plan = plan_of(lambda: selectors.run_list_for_tenant(tenant="north", filters=filters))
    assert "run_tenant_live_id_prefix" in plan


@pytest.mark.parametrize(
    "query", [{}, {"state": "WAITING_HUMAN"}, {"capability": "read_equipment"}]
)
def test_a_newer_page_reads_the_lists_index_backwards_without_sorting(
    run: Run, query: dict[str, str]
) -> None:
    """ "Newer" reads the runs before a position oldest first from the index the list's
    own pages read: a seek, never a sort of every run newer than the position."""
    filters = selectors.RunFilters.from_query(query)
    position = selectors.encode_cursor(run)
    newer = plan_of(
        lambda: selectors.run_list_for_tenant(tenant="north", filters=filters, before=position)
    )
    older = plan_of(
        lambda: selectors.run_list_for_tenant(tenant="north", filters=filters, cursor=position)
    )
    if connection.vendor == "postgresql":
        assert "Sort" not in newer, newer
        assert "Index" in newer and "Index" in older
    else:
        assert "TEMP B-TREE" not in newer, newer


def test_the_run_pages_runbook_links_read_a_partial_index_not_the_history(run: Run) -> None:
    """The run page links the runbooks whose incident its events show. Read from the run's
    events by type and reason, the query read every event of the run on every page view
    (a million for a long history, and nearly always to find none); the signs now have a
    partial index of their own few rows."""
    assert "event_run_runbook_sign" in plan_of(lambda: selectors.run_runbooks(run))


def test_the_runbook_signs_index_holds_every_runbooks_signs() -> None:
    from runs import runbooks
    from runs.models import RUNBOOK_SIGNS

    assert set(RUNBOOK_SIGNS) == runbooks.ALL_SIGNS
