"""The runs list's id search: every prefix length selects exactly the runs whose id starts
with it, newest first, through every keyset page, in any world; the condition takes the
shape the indexes serve (see ``runs_selectors._id_search``)."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import services
from runs.console import runs_selectors as selectors
from runs.models import ID_PREFIX_DIGITS, Run

pytestmark = pytest.mark.django_db

# Ids crowd on a few leading digits so that every prefix length has several matches.
LEADS = ("a", "ab", "abc", "abcd", "abc0", "3f", "3f0", "3f01")


@pytest.fixture
def crowd(world: None) -> list[Run]:
    """150 runs of tenant north (a few in the fault lab, one of south among them) whose ids
    share leading digits, created a second apart with some ties."""
    model = services.run_create(
        scenario="reservation", tenant="north", principal_ref="user:operator", start=False
    )
    row = Run.objects.filter(pk=model.pk).values().get()
    rng = random.Random(21)
    runs = []
    for n in range(150):
        lead = LEADS[n % len(LEADS)]
        digits = lead + "".join(rng.choice("0123456789abcdef") for _ in range(32 - len(lead)))
        runs.append(
            Run(
                **{
                    **row,
                    "id": uuid.UUID(digits),
                    "created_at": row["created_at"] - dt.timedelta(seconds=n // 3),
                    "namespace": "faultlab" if n % 11 == 0 else "live",
                    "tenant": "south" if n % 37 == 0 else "north",
                }
            )
        )
    Run.objects.bulk_create(runs)
    return list(Run.objects.all())


def walk(q: str, world: str, page_size: int) -> list[uuid.UUID]:
    filters = selectors.RunFilters.from_query({"q": q, "world": world})
    seen: list[uuid.UUID] = []
    cursor = ""
    for _ in range(500):
        page = selectors.run_list_for_tenant(
            tenant="north", filters=filters, cursor=cursor, page_size=page_size
        )
        assert not page.search_error
        seen += [r.pk for r in page.runs]
        cursor = page.next_cursor
        if not cursor:
            return seen
    raise AssertionError("the pages did not end")


def expected(runs: list[Run], q: str, world: str) -> list[uuid.UUID]:
    digits = q.replace("-", "").lower()
    worlds = {"live": {"live"}, "faultlab": {"faultlab"}, "all": {"live", "faultlab"}}[world]
    matching = [
        r
        for r in runs
        if r.tenant == "north" and r.namespace in worlds and r.pk.hex.startswith(digits)
    ]
    return [r.pk for r in sorted(matching, key=lambda r: (r.created_at, r.pk), reverse=True)]


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lead=st.sampled_from(LEADS),
    extra=st.text(alphabet="0123456789abcdef", max_size=3),
    world=st.sampled_from(["live", "faultlab", "all"]),
    page_size=st.integers(min_value=1, max_value=7),
    upper=st.booleans(),
)
def test_a_search_selects_exactly_the_runs_with_that_prefix_on_every_page(
    crowd: list[Run], lead: str, extra: str, world: str, page_size: int, upper: bool
) -> None:
    q = (lead + extra)[:32]
    q = q.upper() if upper else q
    assert walk(q, world, page_size) == expected(crowd, q, world)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 8, 12, 32])
def test_a_full_id_or_any_prefix_of_it_finds_it(crowd: list[Run], length: int) -> None:
    target = next(r for r in crowd if r.tenant == "north" and r.namespace == "live")
    dashed = str(target.pk)
    q = dashed[: length + dashed[: length + 4].count("-")]  # as typed: with the dashes
    found = walk(q, "live", 50)
    assert target.pk in found
    assert found == expected(crowd, q, "live")


def test_the_search_condition_has_the_shape_the_indexes_serve(crowd: list[Run]) -> None:
    """Live world: three digits are the indexed id-prefix expression alone (no id range
    whose one-row estimate would send the plan to the primary key); fewer are the range
    alone; more are both. Another world keeps the range (the expression index is the live
    world's)."""

    def sql(q: str, world: str = "live") -> str:
        filters = selectors.RunFilters.from_query({"q": q, "world": world})
        with CaptureQueriesContext(connection) as captured:
            selectors.run_list_for_tenant(tenant="north", filters=filters)
        return captured.captured_queries[-1]["sql"].upper()

    prefix = "abc"[:ID_PREFIX_DIGITS]
    assert ">=" not in sql(prefix) and ("LEFT(" in sql(prefix) or "SUBSTR(" in sql(prefix))
    assert ">=" in sql("ab") and "LEFT(" not in sql("ab") and "SUBSTR(" not in sql("ab")
    both = sql("abcd")
    assert ">=" in both and ("LEFT(" in both or "SUBSTR(" in both)
    assert ">=" in sql(prefix, "all")


def test_a_search_is_one_query_at_any_prefix_length(
    crowd: list[Run], django_assert_num_queries: Any
) -> None:
    for q in ("a", "ab", "abc", "abcd", str(crowd[0].pk)):
        with django_assert_num_queries(1):
            selectors.run_list_for_tenant(
                tenant="north", filters=selectors.RunFilters.from_query({"q": q})
            )
