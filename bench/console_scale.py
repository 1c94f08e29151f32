"""Benchmark 4: the console at 1,000 / 1,000,000 / 10,000,000 runs and a 1,000,000-event run.

Pages, each requested in-process through Django's test client as a logged-in approver
(who is also an operator), so the figure is server time (middleware, view, queries,
template) without a network:

- the runs list unfiltered, filtered by state, by scenario and by a capability the runs
  called (``CapabilityUse``: the completed bulk runs called ``reserve_part``), and searched
  by a short id prefix (one hex digit), each at its first, middle and last page (middle and last
  reached through the keyset cursor the page itself links), and searched by a long
  prefix (the 1,000,000-event run's id, 12 hex digits: one match) and by three digits
  (reported without a target: ~one match at 1,000 runs, a full page at 10M);
- the list's live counts per state (the fragment the list loads and polls);
- the approval queue (250 runs wait at every size; the queue shows its 200 rows);
- the run page of a run with a 1,000,000-event history (quick: 100,000): the latest
  timeline page, a page in the middle of the history and the oldest page (the ``before``
  cursors the pager links), the ``control`` and ``rejected`` kind filters, and the page
  of a 1,000-event run for comparison. Both runs have one control event in 500 (half of
  them "rejected"), one used checkpoint and one effect attempt per 100 events, and ended
  (cancelled by an operator), so the page shows a terminal record and bounded lists.

Every size's database is a copy of one base database holding those two runs (built once:
the long history is a valid, hash-linked one made with the domain's ``build_event``), to
which the size's runs are added by COPY: the column values of a real run, 90% tenant
north, scenarios mixed, 250 waiting for approval with their pending checkpoints, and the
used approval checkpoint of every completed run (indexed and scalar columns; its JSON
bodies, which only that checkpoint's own page shows, are left empty). The bulk runs carry
no events: no page measured here reads another run's events. For big loads the secondary
indexes are dropped and rebuilt once, as a restore does; then VACUUM ANALYZE and
CHECKPOINT (autovacuum's and the checkpointer's work, done before measuring).

Requests go round-robin over the sizes, forward and backward on alternate rounds, so a
machine that gets busier during the benchmark (or the position in a round) weighs on
every size alike; the first request after switching databases is not timed.
Targets: each page's median server time at the largest size <= 1.3x its time at 1,000
runs, and the same query count at every size; also reported: the 1,000,000-event run's
page against the 1,000-event run's in the same database (the same target).
"""

from __future__ import annotations

import datetime as dt
import gc
import re
import time
from dataclasses import dataclass
from typing import Any

import common
from common import (
    Summary,
    banner,
    copy_database,
    django_setup,
    drop_database,
    emit,
    make_user,
    parse_args,
    recreate_database,
    say,
)

DB = "fieldops_bench_console"  # one database per size: fieldops_bench_console_<runs>
BASE = f"{DB}_base"  # the runs every size shares (copied as a template)
WAITING = 250
CONTROL_EVERY = 500  # one control event in 500 (alternately rejected / deduplicated)
RECORDS_EVERY = 100  # one used checkpoint and one effect attempt per 100 events
SHORT_EVENTS = 1_000
FILTER_STATE = "COMPLETED"
FILTER_SCENARIO = "abstain"
FILTER_CAPABILITY = "reserve_part"  # the completed runs called it (loader.COMPLETED_CALLS)
SCENARIOS = (("reservation", 14), ("abstain", 4), ("clarify", 1), ("wait_external", 1))
USER = "bench-approver"
UNTARGETED = frozenset({"runs_search_3_digits"})  # see page_urls


def db_name(size: int) -> str:
    return f"{DB}_{size}"


def options(parser: Any) -> None:
    parser.add_argument(
        "--sizes",
        help="comma-separated run counts instead of the defaults (the first is the baseline)",
    )
    parser.add_argument("--events", type=int, help="the long run's events instead of the default")
    parser.add_argument("--reps", type=int, help="rounds instead of the default")


def main() -> None:
    args = parse_args(__doc__ or "", options)
    sizes = (1_000, 5_000, 20_000) if args.quick else (1_000, 1_000_000, 10_000_000)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    long_events = args.events or (100_000 if args.quick else 1_000_000)
    reps = args.reps or (5 if args.quick else 15)
    banner(
        f"4. console at {', '.join(f'{s:,}' for s in sizes)} runs, a {long_events:,}-event "
        f"run ({reps} requests each)"
    )
    recreate_database(BASE)
    django_setup(BASE, DJANGO_DEBUG="false", FIELDOPS_HISTORY_MAX_EVENTS=str(10 * long_events))
    try:
        run_console(sizes, reps, long_events)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            for size in sizes:
                drop_database(db_name(size))
        drop_database(BASE)


def use_database(name: str) -> None:
    """Point Django's default connection at another benchmark database."""
    from django.db import connections

    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = common.db_name(name)


@dataclass(frozen=True)
class Base:
    """What every size's database starts with: the template run's shape, the long run and
    the short run (ids are the same in every copy)."""

    template: Any
    long_run: str
    short_run: str
    long_events: int
    runs: int


@dataclass
class Site:
    """One database of a given size, its logged-in client and the pages to time."""

    size: int
    client: Any
    pages: dict[str, str]


def build_base(long_events: int) -> Base:
    """The base database: a real run (the template of every bulk row), the long run and
    the short run with their checkpoints and attempts, both ended by an operator."""
    import loader
    from django.db import connection

    from runs import services
    from runs.models import Run

    started = time.perf_counter()
    template = loader.real_template()  # one real run: the shape every bulk row copies
    make_user(USER, "north", "approver", "operator")
    ids = []
    for events in (long_events, SHORT_EVENTS):
        run = services.run_create(
            scenario="reservation",
            tenant="north",
            principal_ref="user:bench",
            limits={"turns": 10**7, "proposals": 10**7, "actions": 10**7},
            start=False,
        )
        loader.long_history(run, events, template, control_every=CONTROL_EVERY)
        loader.run_records(
            run, template, checkpoints=events // RECORDS_EVERY, attempts=events // RECORDS_EVERY
        )
        result = services.run_cancel(
            run_id=str(run.pk), by_ref="user:bench-operator", reason="benchmark history"
        )
        assert result.applied, result
        ids.append(str(run.pk))
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # once here rather than in every copy
    say(
        f"base: a {long_events:,}-event and a {SHORT_EVENTS:,}-event run built in "
        f"{time.perf_counter() - started:.1f} s"
    )
    return Base(template, ids[0], ids[1], long_events + 1, Run.objects.count())


def build(size: int, base: Base) -> Site:
    """Copy the base database and add ``size`` runs in all (with checkpoints) by COPY."""
    import loader
    from django.contrib.auth import get_user_model
    from django.db import connection, connections
    from django.test import Client

    from kernel import clock

    connections.close_all()
    started = time.perf_counter()
    copy_database(BASE, db_name(size))
    use_database(db_name(size))
    copied = time.perf_counter()
    plan = loader.BulkPlan(
        count=size - base.runs,
        waiting=WAITING,
        events_per_run=0,
        newest=clock.now() - dt.timedelta(minutes=5),
        spacing=dt.timedelta(seconds=7),
        checkpoint_bodies=False,
        scenarios=SCENARIOS,
    )
    with loader.bulk_load_mode(
        ("runs_run", "approvals_checkpoint", "runs_capabilityuse"), rebuild_indexes=size >= 50_000
    ):
        counts = loader.bulk_runs(plan, base.template, seed=size)
        loaded = time.perf_counter()
    indexed = time.perf_counter()
    with connection.cursor() as cursor:
        # Autovacuum's and the checkpointer's work, done before measuring, not during it.
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")
        cursor.execute("SELECT pg_database_size(current_database())")
        (disk,) = cursor.fetchone()
    done = time.perf_counter()
    say(
        f"{size:,} runs: {counts['runs']:,} runs, {counts['checkpoints']:,} checkpoints and "
        f"{counts['uses']:,} capability uses "
        f"added by COPY in {loaded - copied:.1f} s ({counts['runs'] / (loaded - copied):,.0f} "
        f"runs/s); base copy {copied - started:.1f} s, indexes {indexed - loaded:.1f} s, "
        f"VACUUM ANALYZE + CHECKPOINT {done - indexed:.1f} s; ready after "
        f"{done - started:.1f} s, {disk / 2**30:.2f} GiB"
    )
    client = Client()
    client.force_login(get_user_model().objects.get(username=USER))
    return Site(size, client, page_urls(base))


def run_console(sizes: tuple[int, ...], reps: int, long_events: int) -> None:
    base = build_base(long_events)
    sites = [build(size, base) for size in sizes]
    drop_database(BASE)
    started = time.perf_counter()
    queries = {}
    for site in sites:
        use_database(db_name(site.size))
        queries[site.size] = count_queries(site, base)
    # What set-up left alive (the histories' builders, caches) is frozen out of the
    # collector's view: a collection then costs what the requests' own garbage does.
    gc.collect()
    gc.freeze()
    checked = time.perf_counter()
    samples: dict[int, dict[str, list[float]]] = {
        site.size: {name: [] for name in site.pages} for site in sites
    }
    gc_seconds = 0.0
    for round_ in range(reps):
        # Round-robin over the sizes (and pages), forward and backward on alternate rounds,
        # so drift on a shared machine hits every size alike; the first request after
        # switching databases (a new connection) is not timed.
        for site in sites if round_ % 2 == 0 else sites[::-1]:
            use_database(db_name(site.size))
            assert site.client.get(next(iter(site.pages.values()))).status_code == 200
            for name, url in site.pages.items():
                # A collection that earlier requests' garbage triggers is not billed to
                # whichever page happens to cross the threshold (the same one each round).
                collecting = time.perf_counter()
                gc.collect()
                begun = time.perf_counter()
                gc_seconds += begun - collecting
                response = site.client.get(url)
                samples[site.size][name].append((time.perf_counter() - begun) * 1000)
                assert response.status_code == 200
    say(
        f"pages checked and their queries counted in {checked - started:.1f} s; "
        f"{reps} rounds in {time.perf_counter() - checked:.1f} s (gc {gc_seconds:.1f} s)"
    )
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
    report(sizes, times, queries, long_events)


def _cursor_at(rows: Any, index: int) -> str:
    """The list's keyset cursor after the ``index``-th row (0-based) of ``rows``: what the
    "Older" link of the page ending at that row carries."""
    from runs.console.runs_selectors import encode_cursor

    return encode_cursor(rows.only("id", "created_at")[index])


def _list_pages(name: str, query: str) -> dict[str, str]:
    """First, middle and last page of the runs list for ``query``, each a full page: the
    middle page starts half-way through the matching runs (earlier when fewer than two
    pages' worth follow), the last page shows the last 50, each through the same keyset
    cursor the pager's "Older" link carries."""
    from django.urls import reverse

    from runs.console import runs_selectors as selectors

    params = dict(p.split("=", 1) for p in query.split("&") if p)
    filters = selectors.RunFilters.from_query(params)
    rows = selectors.runs_matching(tenant="north", filters=filters)
    assert rows is not None
    rows = rows.order_by("-created_at", "-id")
    total = rows.count()
    size = selectors.PAGE_SIZE
    if total < size + 2:
        raise RuntimeError(f"{name}: {total} runs match, too few for a page after the first")
    base = reverse("runs-list") + (f"?{query}&" if query else "?")
    middle = _cursor_at(rows, min(total // 2, total - size - 1) - 1)
    last = _cursor_at(rows, total - size - 1)
    return {
        f"{name}_first": base.rstrip("?&"),
        f"{name}_middle": f"{base}after={middle}",
        f"{name}_last": f"{base}after={last}",
    }


def page_urls(base: Base) -> dict[str, str]:
    """The pages to time; list cursors are the ones the list itself would link."""
    from django.urls import reverse

    from runs.console import runs_selectors as selectors

    long_page = reverse("runs-detail", args=[base.long_run])
    limit = selectors.TIMELINE_LIMIT
    return {
        **_list_pages("runs_list", ""),
        **_list_pages("runs_list_state", f"state={FILTER_STATE}"),
        **_list_pages("runs_list_scenario", f"scenario={FILTER_SCENARIO}"),
        **_list_pages("runs_list_capability", f"capability={FILTER_CAPABILITY}"),
        **_list_pages("runs_search_short", "q=a"),
        "runs_search_long": reverse("runs-list") + f"?q={base.long_run.replace('-', '')[:12]}",
        # Three digits: the prefix length whose matches are too many for the primary key
        # and too rare for the creation order at 10M runs (the id-prefix index serves it).
        # Reported without a target: it matches ~one run at 1,000 runs, a full page at
        # 10M, so the page renders 1 row against 50.
        "runs_search_3_digits": reverse("runs-list") + f"?q={base.long_run[:3]}",
        # The runs list's live counts per state (loaded with the list, then every 5 s).
        "state_counts": reverse("operations-state-counts"),
        "approvals_queue": reverse("approvals-queue"),
        "run_page": long_page,
        "run_page_middle": f"{long_page}?kind=all&before={base.long_events // 2}",
        "run_page_oldest": f"{long_page}?kind=all&before={limit + 1}",
        "run_page_control": f"{long_page}?kind=control",
        "run_page_rejected": f"{long_page}?kind=rejected",
        "run_page_1k_events": reverse("runs-detail", args=[base.short_run]),
    }


def count_queries(site: Site, base: Base) -> dict[str, int]:
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
        _check_page(name, url, response.content.decode(), base)
    return counts


SEQUENCE = re.compile(r'<tr id="ev-(\d+)"[^>]*data-type="([^"]+)"')


def _check_page(name: str, url: str, html: str, base: Base) -> None:
    """The pages must show what they claim: full list pages, the last page, the search's
    matches, 200 approvals, full timeline pages of the right events and kinds."""
    from urllib.parse import parse_qs, urlparse

    from django.urls import reverse

    from approvals import selectors as approval_selectors
    from runs.console import runs_selectors as selectors
    from runs.domain.states import CONTROL_EVENTS, REJECTION_EVENTS
    from runs.models import Event

    if name.startswith("runs_"):
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        page = selectors.run_list_for_tenant(
            tenant="north",
            filters=selectors.RunFilters.from_query(query),
            cursor=query.get("after", ""),
        )
        shown = len(page.runs)
        if name == "runs_search_3_digits":
            if base.long_run not in {str(r.pk) for r in page.runs} and shown < selectors.PAGE_SIZE:
                raise RuntimeError(f"{name} does not show the long run among fewer than a page")
        elif name == "runs_search_long":
            if [str(r.pk) for r in page.runs] != [base.long_run]:
                raise RuntimeError(f"{name} does not show exactly the long run")
        elif name.endswith("_last"):
            if shown != selectors.PAGE_SIZE or page.next_cursor:
                raise RuntimeError(f"{name} is not a full last page")
        elif shown != selectors.PAGE_SIZE or not page.next_cursor:
            raise RuntimeError(f"{name} shows {shown} runs, not a full page with a next one")
        if "q" in query and not all(
            r.pk.hex.startswith(query["q"]) for r in page.runs
        ):  # pragma: no cover - a check of the benchmark itself
            raise RuntimeError(f"{name} shows a run that does not match {query['q']!r}")
    elif name == "state_counts":
        if "COMPLETED: " not in html:
            raise RuntimeError("the live counts do not show the completed runs")
    elif name == "approvals_queue":
        shown = len(approval_selectors.checkpoint_queue(tenant="north"))
        if shown != 200:
            raise RuntimeError(f"the approval queue shows {shown} rows, not 200")
    elif name.startswith("run_page"):
        rows = [(int(s), t) for s, t in SEQUENCE.findall(html)]
        limit = selectors.TIMELINE_LIMIT
        last = base.long_events if name != "run_page_1k_events" else SHORT_EVENTS + 1
        kinds = {
            "run_page_control": {e.value for e in CONTROL_EVENTS},
            "run_page_rejected": {e.value for e in REJECTION_EVENTS},
        }
        expected_last = {
            "run_page_middle": base.long_events // 2 - 1,
            "run_page_oldest": limit,
        }.get(name, last)
        if name in kinds:
            stored = Event.objects.filter(run_id=base.long_run, type__in=kinds[name]).count()
            if len(rows) != min(limit, stored) or not all(t in kinds[name] for _, t in rows):
                raise RuntimeError(f"{name} does not show the latest {kind_of(name)} events")
        elif len(rows) != limit:
            raise RuntimeError(f"{name} shows {len(rows)} events, not a full timeline page")
        if name not in kinds and [s for s, _ in rows] != list(
            range(expected_last - limit + 1, expected_last + 1)
        ):
            raise RuntimeError(f"{name} does not show events up to #{expected_last}")
        full_list = reverse("runs-checkpoints", args=[base.long_run])
        if name != "run_page_1k_events" and full_list not in html:
            raise RuntimeError(f"{name} does not link the long run's full checkpoint list")


def kind_of(name: str) -> str:
    return name.rsplit("_", 1)[-1]


def label(n: int) -> str:
    return f"{n // 1000}k" if n < 1_000_000 else f"{n // 10**6}M"


def report(
    sizes: tuple[int, ...],
    times: dict[int, dict[str, Summary]],
    queries: dict[int, dict[str, int]],
    long_events: int,
) -> None:
    small, large = sizes[0], sizes[-1]
    for name in times[small]:
        for size in sizes[1:]:
            final = size == large and name not in UNTARGETED
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
    # The history's length: the long run's page against the 1,000-event run's, same database.
    for size in sizes:
        final = size == large
        ratio = times[size]["run_page"].median / times[size]["run_page_1k_events"].median
        emit(
            f"console.run_page.{label(long_events)}_events_vs_1k_events.at_{label(size)}_runs",
            times[size]["run_page"],
            "ms",
            times[size]["run_page_1k_events"],
            target="<= 1.3x the 1,000-event run's page, same queries" if final else None,
            passed=(
                ratio <= 1.3 and queries[size]["run_page"] == queries[size]["run_page_1k_events"]
            )
            if final
            else None,
            baseline_label="1k ev",
        )


if __name__ == "__main__":
    main()
