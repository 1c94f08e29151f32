"""Benchmark 4: the console at 1,000 / 100,000 / 1,000,000 runs (with their events).

Pages, each requested in-process through Django's test client as a logged-in approver
(who is also an operator), so the figure is server time (middleware, view, queries,
template) without a network: the runs list filtered by state (first, middle and last
page, reached through the keyset cursor the page itself links), the approval queue, and
the page of a run with a 5,000-event timeline.

Each size has its own database, loaded by COPY (runs with their events and approval
checkpoints), then VACUUM ANALYZE and CHECKPOINT (autovacuum's and the checkpointer's work
in production). Requests go round-robin over the sizes, so a machine that gets busier
during the benchmark slows every size alike. 250 runs wait for approval at every size; the
5,000-event run is a valid, hash-linked history. Targets: each page's median server time
at the largest size <= 1.3x its time at 1,000 runs, and the same query count at every size.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import common
from common import (
    Summary,
    banner,
    django_setup,
    drop_database,
    emit,
    make_user,
    parse_args,
    recreate_database,
    say,
)

DB = "fieldops_bench_console"  # one database per size: fieldops_bench_console_<runs>
WAITING = 250
EVENTS_PER_RUN = 4
TIMELINE_EVENTS = 5000
FILTER_STATE = "COMPLETED"


def db_name(size: int) -> str:
    return f"{DB}_{size}"


def main() -> None:
    args = parse_args(__doc__ or "")
    sizes = (1_000, 5_000, 20_000) if args.quick else (1_000, 100_000, 1_000_000)
    reps = 7 if args.quick else 15
    banner(f"4. console at {', '.join(f'{s:,}' for s in sizes)} runs ({reps} requests each)")
    for size in sizes:
        recreate_database(db_name(size))
    django_setup(db_name(sizes[0]), DJANGO_DEBUG="false")
    try:
        run_console(sizes, reps)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            for size in sizes:
                drop_database(db_name(size))


def use_database(name: str) -> None:
    """Point Django's default connection at another benchmark database."""
    from django.db import connections

    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = common.db_name(name)


@dataclass
class Site:
    """One database of a given size, its logged-in client and the pages to time."""

    size: int
    client: Any
    pages: dict[str, str]


def build(size: int) -> Site:
    """Load ``size`` runs (with their events and checkpoints) into the size's database."""
    import loader
    from django.db import connection
    from django.test import Client

    from kernel import clock
    from runs import services

    use_database(db_name(size))
    started = time.perf_counter()
    template = loader.real_template()  # one real run: the shape every bulk row copies
    user = make_user("bench-approver", "north", "approver", "operator")
    client = Client()
    client.force_login(user)
    long_run = services.run_create(
        scenario="reservation",
        tenant="north",
        principal_ref="user:bench",
        limits={"turns": 10**6, "proposals": 10**6, "actions": 10**6},
        start=False,
    )
    loader.long_history(long_run, TIMELINE_EVENTS, template)
    plan = loader.BulkPlan(
        count=size - 2,  # the real run and the long run are there already
        waiting=WAITING,
        events_per_run=EVENTS_PER_RUN,
        newest=clock.now() - dt.timedelta(minutes=5),
        spacing=dt.timedelta(seconds=7),
    )
    with loader.bulk_load_mode(
        ("runs_run", "runs_event", "approvals_checkpoint"), rebuild_indexes=size >= 50_000
    ):
        counts = loader.bulk_runs(plan, template, seed=size)
    copied = time.perf_counter() - started
    with connection.cursor() as cursor:
        # Autovacuum's and the checkpointer's work, done before measuring, not during it.
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")
    say(
        f"{size:,} runs: {counts['runs']:,} runs, {counts['events'] + TIMELINE_EVENTS:,} "
        f"events, {counts['checkpoints']:,} checkpoints loaded (COPY) in {copied:.1f} s "
        f"({counts['runs'] / copied:,.0f} runs/s), ready after "
        f"{time.perf_counter() - started:.1f} s"
    )
    return Site(size, client, page_urls(str(long_run.pk)))


def run_console(sizes: tuple[int, ...], reps: int) -> None:
    sites = [build(size) for size in sizes]
    queries = {}
    for site in sites:
        use_database(db_name(site.size))
        queries[site.size] = count_queries(site)
    samples: dict[int, dict[str, list[float]]] = {
        site.size: {name: [] for name in site.pages} for site in sites
    }
    for _ in range(reps):
        # Round-robin over the sizes (and pages), so drift on a shared machine hits every
        # size alike; the first request after switching databases is not timed.
        for site in sites:
            use_database(db_name(site.size))
            for url in site.pages.values():
                assert site.client.get(url).status_code == 200
            for name, url in site.pages.items():
                started = time.perf_counter()
                response = site.client.get(url)
                samples[site.size][name].append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200
    times = {
        size: {name: Summary.of(v) for name, v in pages.items()} for size, pages in samples.items()
    }
    for size in sizes:
        say(
            f"{size:,} runs: "
            + ", ".join(
                f"{name} {times[size][name].median:.1f} ms/{queries[size][name]} q"
                for name in times[size]
            )
        )
    report(sizes, times, queries)


def page_urls(long_run_id: str) -> dict[str, str]:
    """The pages to time; list cursors are the ones the list itself would link."""
    from django.urls import reverse

    from runs.console.runs_selectors import encode_cursor
    from runs.models import Run

    rows = Run.objects.filter(tenant="north", state=FILTER_STATE).order_by("-created_at", "-id")
    total = rows.count()
    middle = rows.only("id", "created_at")[total // 2 - 1]
    last = rows.only("id", "created_at")[max(total - 51, 0)]
    base = reverse("runs-list") + f"?state={FILTER_STATE}"
    return {
        "runs_list_first": base,
        "runs_list_middle": f"{base}&after={encode_cursor(middle)}",
        "runs_list_last": f"{base}&after={encode_cursor(last)}",
        "approvals_queue": reverse("approvals-queue"),
        "run_page_5000_events": reverse("runs-detail", args=[long_run_id]),
    }


def count_queries(site: Site) -> dict[str, int]:
    """Queries per page (after a warm-up request), and a check that each page shows what
    it claims."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for name, url in site.pages.items():
        assert site.client.get(url).status_code == 200
        with CaptureQueriesContext(connection) as captured:
            response = site.client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        counts[name] = len(captured)
        _check_page(name, url)
    return counts


def _check_page(name: str, url: str) -> None:
    """The pages must show what they claim: full list pages, the last page, 200 approvals,
    a timeline (checked through the selectors the views call, with the same arguments)."""
    from urllib.parse import parse_qs, urlparse

    from approvals import selectors as approval_selectors
    from runs.console import runs_selectors as selectors
    from runs.models import Run

    if name.startswith("runs_list"):
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        page = selectors.run_list_for_tenant(
            tenant="north",
            filters=selectors.RunFilters.from_query(query),
            cursor=query.get("after", ""),
        )
        shown = len(page.runs)
        if name != "runs_list_last" and shown != selectors.PAGE_SIZE:
            raise RuntimeError(f"{name} shows {shown} runs, not a full page")
        if name == "runs_list_last" and (shown == 0 or page.next_cursor):
            raise RuntimeError(f"{name} is not the last page")
    elif name == "approvals_queue":
        shown = len(approval_selectors.checkpoint_queue(tenant="north"))
        if shown != 200:
            raise RuntimeError(f"the approval queue shows {shown} rows, not 200")
    elif name.startswith("run_page"):
        run = Run.objects.get(pk=url.rstrip("/").rsplit("/", 1)[-1])
        if len(selectors.run_timeline(run=run)) != selectors.TIMELINE_LIMIT:
            raise RuntimeError("the run page does not show a full timeline")


def report(
    sizes: tuple[int, ...],
    times: dict[int, dict[str, Summary]],
    queries: dict[int, dict[str, int]],
) -> None:
    small, large = sizes[0], sizes[-1]
    label: Callable[[int], str] = lambda n: f"{n // 1000}k" if n < 1_000_000 else f"{n // 10**6}M"  # noqa: E731
    for name in times[small]:
        for size in sizes[1:]:
            final = size == large
            ratio = times[size][name].median / times[small][name].median
            emit(
                f"console.{name}.server_ms.{label(size)}_vs_{label(small)}",
                times[size][name],
                "ms",
                times[small][name],
                target="<= 1.3x the time at 1k runs" if final else None,
                passed=ratio <= 1.3 if final else None,
                baseline_label=label(small),
            )
        counts = [queries[size][name] for size in sizes]
        emit(
            f"console.{name}.queries.{label(large)}_vs_{label(small)}",
            queries[large][name],
            "queries",
            queries[small][name],
            target="same query count at every size ("
            + ", ".join(f"{label(s)}: {queries[s][name]}" for s in sizes)
            + ")",
            passed=len(set(counts)) == 1,
            baseline_label=label(small),
        )


if __name__ == "__main__":
    main()
