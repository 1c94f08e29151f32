"""Runs list and run page: access, filters, keyset pages, actions and their refusals."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import Checkpoint, Decision
from runs import services
from runs.console import runs_selectors as run_selectors
from runs.models import Event, Evidence, Run
from tests.helpers import make_run, types
from tests.runs.console.conftest import client_for

pytestmark = pytest.mark.django_db


def _bulk_runs(n: int, tenant: str = "north", scenario: str = "reservation") -> list[Run]:
    return [
        services.run_create(
            scenario=scenario, tenant=tenant, principal_ref="user:operator", start=False
        )
        for _ in range(n)
    ]


# -- access ------------------------------------------------------------------------------
def test_it_sends_anonymous_visitors_to_the_login_page(world: None) -> None:
    run = make_run(advance=False)
    urls = [
        reverse("runs-list"),
        reverse("runs-detail", args=[run.pk]),
        reverse("runs-export", args=[run.pk]),
        reverse("runs-replay-audit", args=[run.pk]),
        reverse("recovery"),
        reverse("runbooks"),
        reverse("faultlab"),
        reverse("review-packet"),
        reverse("approvals-queue"),
        reverse("approvals-history"),
    ]
    for url in urls:
        response = Client().get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


def test_another_tenants_run_is_not_found_on_every_run_page(
    as_outsider: Client, waiting_run: Run
) -> None:
    evidence_id = Evidence.objects.filter(run=waiting_run).values_list("id", flat=True)[0]
    for url in (
        reverse("runs-detail", args=[waiting_run.pk]),
        reverse("runs-export", args=[waiting_run.pk]),
        reverse("runs-replay-audit", args=[waiting_run.pk]),
        reverse("runs-evidence", args=[waiting_run.pk, evidence_id]),
    ):
        response = as_outsider.get(url)
        assert response.status_code == 404, url
        assert str(waiting_run.pk) not in response.content.decode()


def test_the_list_shows_only_the_users_tenant(as_operator: Client, world: None) -> None:
    north = _bulk_runs(2)
    south = _bulk_runs(1, tenant="south")
    body = as_operator.get(reverse("runs-list")).content.decode()
    for run in north:
        assert str(run.pk) in body
    assert str(south[0].pk) not in body


# -- filters, search, keyset pages --------------------------------------------------------
def test_filters_narrow_the_list(as_operator: Client, world: None) -> None:
    waiting = make_run(namespace="live")
    failed = make_run("unavailable_tool", namespace="live")
    created = _bulk_runs(1, scenario="abstain")[0]

    def listed(**query: str) -> str:
        return as_operator.get(reverse("runs-list"), query).content.decode()

    body = listed(state="WAITING_HUMAN")
    assert str(waiting.pk) in body and str(failed.pk) not in body
    body = listed(disposition="FAILED")
    assert str(failed.pk) in body and str(waiting.pk) not in body
    body = listed(scenario="abstain")
    assert str(created.pk) in body and str(waiting.pk) not in body
    body = listed(age="older-7d")
    assert str(waiting.pk) not in body and "No runs match these filters" in body
    body = listed(age="1h")
    assert all(str(r.pk) in body for r in (waiting, failed, created))


def test_search_by_full_id_and_by_prefix(as_operator: Client, world: None) -> None:
    runs = _bulk_runs(3)
    target = runs[1]
    body = as_operator.get(reverse("runs-list"), {"q": str(target.pk)}).content.decode()
    assert str(target.pk) in body
    assert all(str(r.pk) not in body for r in runs if r.pk != target.pk)
    prefix = str(target.pk)[:8]
    body = as_operator.get(reverse("runs-list"), {"q": prefix}).content.decode()
    assert str(target.pk) in body


def test_a_search_that_is_not_an_id_says_so(as_operator: Client, world: None) -> None:
    body = as_operator.get(reverse("runs-list"), {"q": "not-hex!"}).content.decode()
    assert "A run id is hexadecimal" in body


def test_keyset_pages_cover_every_run_exactly_once(world: None) -> None:
    made = {str(r.pk) for r in _bulk_runs(7)}
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        page = run_selectors.run_list_for_tenant(
            tenant="north", filters=run_selectors.RunFilters(), cursor=cursor, page_size=3
        )
        seen += [str(r.pk) for r in page.runs]
        cursor = page.next_cursor
        if not cursor:
            break
    assert len(seen) == len(made) == len(set(seen))
    assert set(seen) == made


def _walk_back(filters: Any, page_size: int) -> tuple[list[str], list[str]]:
    """The runs in list order read forward page by page, then the same read backward
    from the last page with each page's ``prev_cursor``."""
    pages: list[list[str]] = []
    page = run_selectors.run_list_for_tenant(tenant="north", filters=filters, page_size=page_size)
    assert page.prev_cursor == ""  # the first page has nothing newer
    pages.append([str(r.pk) for r in page.runs])
    while page.next_cursor:
        page = run_selectors.run_list_for_tenant(
            tenant="north", filters=filters, cursor=page.next_cursor, page_size=page_size
        )
        pages.append([str(r.pk) for r in page.runs])
    back: list[list[str]] = [pages[-1]]
    while page.prev_cursor:
        page = run_selectors.run_list_for_tenant(
            tenant="north", filters=filters, before=page.prev_cursor, page_size=page_size
        )
        back.insert(0, [str(r.pk) for r in page.runs])
        assert page.next_cursor, "a page reached going back has older runs after it"
    forward = [pk for p in pages for pk in p]
    return forward, [pk for p in back for pk in p]


def test_keyset_pages_read_backward_give_the_same_runs_in_the_same_order(world: None) -> None:
    """The list paged only forward ("Older", then "Newest" back to the start): someone on
    page 5 who wanted page 4 started again from page 1. Each page after the first links
    its newer neighbour; reading back from the last page gives every run once, in order."""
    made = {str(r.pk) for r in _bulk_runs(7)}
    forward, backward = _walk_back(run_selectors.RunFilters(), page_size=3)
    assert backward == forward and set(forward) == made and len(forward) == 7


def test_the_list_links_the_newer_page_and_it_is_the_page_before(
    as_operator: Client, world: None
) -> None:
    _bulk_runs(run_selectors.PAGE_SIZE * 2 + 2)
    first = as_operator.get(reverse("runs-list"))
    assert "before=" not in first.content.decode()
    second = as_operator.get(reverse("runs-list"), {"after": first.context["page"].next_cursor})
    third = as_operator.get(reverse("runs-list"), {"after": second.context["page"].next_cursor})
    prev = third.context["page"].prev_cursor
    assert f"before={prev}" in third.content.decode() and 'rel="prev"' in third.content.decode()
    back = as_operator.get(reverse("runs-list"), {"before": prev})
    assert [r.pk for r in back.context["page"].runs] == [r.pk for r in second.context["page"].runs]
    assert "« Newest" in back.content.decode()
    assert f"after={back.context['page'].next_cursor}" in back.content.decode()


def test_the_list_links_the_next_page_with_its_cursor(as_operator: Client, world: None) -> None:
    _bulk_runs(run_selectors.PAGE_SIZE + 2)
    first = as_operator.get(reverse("runs-list"))
    page = first.context["page"]
    assert len(page.runs) == run_selectors.PAGE_SIZE and page.next_cursor
    assert f"after={page.next_cursor}" in first.content.decode()
    second = as_operator.get(reverse("runs-list"), {"after": page.next_cursor})
    rest = second.context["page"].runs
    assert len(rest) == 2
    assert not {r.pk for r in rest} & {r.pk for r in page.runs}


def test_the_list_renders_with_the_same_number_of_queries_at_any_size(
    as_operator: Client, world: None, django_assert_num_queries: Any
) -> None:
    _bulk_runs(3)
    with CaptureQueriesContext(connection) as small:
        assert as_operator.get(reverse("runs-list")).status_code == 200
    _bulk_runs(80)
    with django_assert_num_queries(len(small.captured_queries)) as large:
        assert as_operator.get(reverse("runs-list")).status_code == 200
    assert not any("COUNT(" in q["sql"].upper() for q in large.captured_queries)
    assert not any("OFFSET" in q["sql"].upper() for q in large.captured_queries)


def test_the_htmx_filter_returns_only_the_table(as_operator: Client, world: None) -> None:
    _bulk_runs(1)
    response = as_operator.get(
        reverse("runs-list"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="run-table"
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="run-table">')
    assert "<html" not in body


# -- start a run ---------------------------------------------------------------------------
def test_an_operator_starts_a_run_from_the_console(as_operator: Client, operator: Any) -> None:
    response = as_operator.post(
        reverse("runs-start"),
        {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"},
    )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("runs-detail", args=[run.pk])
    assert run.principal_ref == "user:operator" and run.requested_by == operator
    assert run.tenant == "north" and run.scenario == "reservation"


def test_the_start_form_offers_the_reservation_first_and_chosen(as_operator: Client) -> None:
    """The form's defaults start the product's own flow (a reservation that waits for an
    approval), as the API's do, not whichever scenario sorts first."""
    page = as_operator.get(reverse("runs-list")).content.decode()
    select = re.search(r'<select name="scenario".*?</select>', page, re.S)
    assert select is not None
    options = re.findall(r'<option value="([^"]+)"( selected)?', select.group(0))
    assert options[0] == ("reservation", " selected")
    assert [name for name, chosen in options if chosen] == ["reservation"]


def test_starting_a_run_refuses_other_roles_and_bad_input(
    as_approver: Client, as_operator: Client
) -> None:
    form = {"scenario": "reservation", "equipment_id": "EQ-17", "location_id": "LOC-N1"}
    assert as_approver.post(reverse("runs-start"), form).status_code == 403
    bad = as_operator.post(reverse("runs-start"), {**form, "scenario": "nope"})
    assert bad.status_code == 400
    other_tenant = as_operator.post(reverse("runs-start"), {**form, "equipment_id": "EQ-31"})
    assert other_tenant.status_code == 400
    assert not Run.objects.exists()


# -- run page ----------------------------------------------------------------------------
def test_the_run_page_shows_identity_state_budgets_and_timeline(
    as_operator: Client, waiting_run: Run
) -> None:
    response = as_operator.get(reverse("runs-detail", args=[waiting_run.pk]))
    body = response.content.decode()
    for text in (
        str(waiting_run.pk),
        waiting_run.task_id,
        waiting_run.contract_version,
        waiting_run.policy_version,
        waiting_run.model_adapter_version,
        waiting_run.component_set,
        "state-current' data-state='WAITING_HUMAN'",
        'role="meter"',
        "approval.required",
        # The checkpoint it waits on, named (an operator's link would be a 403).
        waiting_run.waiting_checkpoint,
        'hx-trigger="every 2s"',
        reverse("runs-replay-audit", args=[waiting_run.pk]),
    ):
        assert text in body, text
    assert len(response.context["timeline"]) == Event.objects.filter(run=waiting_run).count()


def test_the_timeline_filters_by_kind_and_marks_rejections(
    as_operator: Client, waiting_run: Run
) -> None:
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="again")
    url = reverse("runs-detail", args=[waiting_run.pk])
    rejected = as_operator.get(url, {"kind": "rejected"}).context["timeline"]
    assert [e.event.type for e in rejected] == ["transition.rejected"]
    assert rejected[0].is_rejected
    control = as_operator.get(url, {"kind": "control"}).context["timeline"]
    assert control and all(e.is_control for e in control)
    transitions = as_operator.get(url, {"kind": "transitions"}).context["timeline"]
    assert transitions and not any(e.is_control for e in transitions)
    assert "ev-rejected" in as_operator.get(url).content.decode()


def test_the_live_partial_is_empty_until_the_revision_changes(
    as_operator: Client, waiting_run: Run
) -> None:
    url = reverse("runs-detail", args=[waiting_run.pk])
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-live"}
    same = as_operator.get(url, {"since": waiting_run.revision}, **headers)
    assert same.status_code == 204
    changed = as_operator.get(url, {"since": 0}, **headers)
    body = changed.content.decode()
    assert changed.status_code == 200 and body.lstrip().startswith('<section id="run-live"')
    assert 'hx-trigger="every 2s"' in body
    # The header's state badge and the identity's position move with the run (out of
    # band); the actions stay put while the run is active (a half-typed reason survives).
    assert (
        '<span class="badge WAITING_HUMAN" id="head-state" hx-swap-oob="true">WAITING_HUMAN</span>'
        in body
    )
    assert '<div class="kv-group" id="run-position" hx-swap-oob="true">' in body
    assert f"<dt>Revision</dt><dd>{waiting_run.revision}</dd>" in body
    assert 'id="run-actions"' not in body


def test_polling_stops_once_the_run_has_ended(as_operator: Client, waiting_run: Run) -> None:
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    url = reverse("runs-detail", args=[waiting_run.pk])
    live = as_operator.get(url, {"since": 1}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="run-live")
    body = live.content.decode()
    assert "every 2s" not in body
    # The actions region is swapped out of band: the cancel form gives way to follow-up.
    assert 'id="run-actions" aria-labelledby="actions-h" hx-swap-oob="true"' in body
    assert reverse("runs-follow-up", args=[waiting_run.pk]) in body
    assert 'id="head-state" hx-swap-oob="true">CANCELLED<' in body
    assert reverse("runs-cancel", args=[waiting_run.pk]) not in body
    page = as_operator.get(url).content.decode()
    assert "every 2s" not in page and "Terminal record" in page


def test_the_run_page_uses_the_same_number_of_queries_for_long_histories(
    as_operator: Client, world: None
) -> None:
    short = make_run("abstain")
    long = make_run("never_progress")
    assert Event.objects.filter(run=long).count() > 2 * Event.objects.filter(run=short).count()
    counts = []
    for run in (short, long):
        with CaptureQueriesContext(connection) as queries:
            as_operator.get(reverse("runs-detail", args=[run.pk]))
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1]


def test_evidence_refs_open_and_are_checked_against_the_run(
    as_operator: Client, waiting_run: Run, world: None
) -> None:
    item = Evidence.objects.filter(run=waiting_run, kind="observation").first()
    url = reverse("runs-evidence", args=[waiting_run.pk, item.pk])
    body = as_operator.get(url).content.decode()
    assert item.content_hash in body
    other = make_run(advance=False)
    assert as_operator.get(reverse("runs-evidence", args=[other.pk, item.pk])).status_code == 404
    page = as_operator.get(reverse("runs-detail", args=[waiting_run.pk])).content.decode()
    assert url in page


def test_the_export_carries_every_event_and_evidence_reference(
    as_operator: Client, waiting_run: Run
) -> None:
    response = as_operator.get(reverse("runs-export", args=[waiting_run.pk]))
    assert response["Content-Disposition"] == f'attachment; filename="run-{waiting_run.pk}.json"'
    assert response.streaming and response["Content-Type"] == "application/json"
    data = json.loads(b"".join(response.streaming_content))
    assert data["run"]["run_id"] == str(waiting_run.pk)
    assert [e["sequence"] for e in data["events"]] == list(range(1, waiting_run.revision + 1))
    assert {e["id"] for e in data["evidence_refs"]} == set(
        Evidence.objects.filter(run=waiting_run).values_list("id", flat=True)
    )
    assert "content" not in data["evidence_refs"][0]


def test_audit_replay_shows_findings(as_operator: Client, waiting_run: Run) -> None:
    url = reverse("runs-replay-audit", args=[waiting_run.pk])
    assert "no findings" in as_operator.get(url).content.decode()
    Run.objects.filter(pk=waiting_run.pk).update(revision=waiting_run.revision + 5)
    response = as_operator.get(url)
    assert response.context["findings"]
    assert "finding" in response.content.decode()


# -- cancel --------------------------------------------------------------------------------
def test_an_operator_cancels_a_waiting_run_and_sees_the_qualification(
    as_operator: Client, waiting_run: Run
) -> None:
    url = reverse("runs-cancel", args=[waiting_run.pk])
    response = as_operator.post(url, {"reason": "customer withdrew"}, follow=True)
    waiting_run.refresh_from_db()
    assert waiting_run.state == "CANCELLED"
    assert waiting_run.terminal_reason == "cancelled_no_dispatch"
    assert "Run cancelled: cancelled_no_dispatch." in response.content.decode()
    event = Event.objects.get(run=waiting_run, type="run.cancelled")
    assert event.payload["by"] == "user:operator"
    assert event.payload["reason"] == "customer withdrew"


def test_cancel_needs_a_reason(as_operator: Client, waiting_run: Run) -> None:
    response = as_operator.post(reverse("runs-cancel", args=[waiting_run.pk]), {"reason": "  "})
    assert response.status_code == 400
    assert "a cancellation needs a reason" in response.content.decode()
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"


def test_cancel_refusals_role_tenant_method_and_csrf(
    as_approver: Client, operator_south: Any, operator: Any, waiting_run: Run
) -> None:
    url = reverse("runs-cancel", args=[waiting_run.pk])
    assert as_approver.post(url, {"reason": "x"}).status_code == 403
    assert client_for(operator_south).post(url, {"reason": "x"}).status_code == 404
    assert client_for(operator).get(url).status_code == 405
    strict = client_for(operator, enforce_csrf_checks=True)
    assert strict.post(url, {"reason": "x"}).status_code == 403
    waiting_run.refresh_from_db()
    assert waiting_run.state == "WAITING_HUMAN"


def test_cancelling_an_ended_run_is_a_recorded_conflict(
    as_operator: Client, waiting_run: Run
) -> None:
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="first")
    response = as_operator.post(reverse("runs-cancel", args=[waiting_run.pk]), {"reason": "2"})
    assert response.status_code == 409
    assert "Reload to review the current revision" in response.content.decode()
    assert types(waiting_run)[-1] == "transition.rejected"


# -- bulk cancel -----------------------------------------------------------------------------
def test_bulk_cancel_reports_each_run(as_operator: Client, world: None) -> None:
    waiting = make_run()
    ended = make_run("unavailable_tool")
    created = _bulk_runs(1)[0]
    south = _bulk_runs(1, tenant="south")[0]
    response = as_operator.post(
        reverse("runs-bulk-cancel"),
        {"run": [str(waiting.pk), str(ended.pk), str(created.pk), str(south.pk)], "reason": "x"},
        follow=True,
    )
    rows = {r["run_id"]: r for r in response.context["rows"]}
    assert rows[str(waiting.pk)]["applied"]
    assert rows[str(waiting.pk)]["qualification"] == "cancelled_no_dispatch"
    assert rows[str(created.pk)]["applied"]
    assert not rows[str(ended.pk)]["applied"] and rows[str(ended.pk)]["refusal"]
    assert rows[str(south.pk)]["refusal"] == "not_found"
    south.refresh_from_db()
    assert south.state == "CREATED"
    assert "refused" in response.content.decode() and "applied" in response.content.decode()


def test_bulk_cancel_reads_any_spelling_of_a_run_id_once(as_operator: Client, world: None):
    """An id in upper case or without dashes is the run's (it was reported not_found)."""
    run = _bulk_runs(1)[0]
    spellings = [str(run.pk).upper(), run.pk.hex, str(run.pk)]
    response = as_operator.post(
        reverse("runs-bulk-cancel"), {"run": spellings, "reason": "x"}, follow=True
    )
    rows = response.context["rows"]
    assert [(r["run_id"], r["applied"]) for r in rows] == [(str(run.pk), True)]
    run.refresh_from_db()
    assert run.state == "CANCELLED"


def test_a_bulk_cancel_result_is_a_page_to_reload_without_cancelling_again(
    as_operator: Client, as_approver: Client, operator: Any, world: None
) -> None:
    """The cancellation is a post answered by a redirect to its result: reloading the
    result (or back, then forward) sends nothing and records nothing again. The result is
    the session's own: another session, or a token never issued, gets the empty state."""
    ended = make_run("unavailable_tool")
    run = _bulk_runs(1)[0]
    posted = as_operator.post(
        reverse("runs-bulk-cancel"), {"run": [str(run.pk), str(ended.pk)], "reason": "x"}
    )
    assert posted.status_code == 302
    result = posted["Location"]
    assert result.startswith(reverse("runs-bulk-cancel-result") + "?r=")
    events = Event.objects.count()

    for _ in range(2):
        page = as_operator.get(result)
        assert page.status_code == 200
        body = page.content.decode()
        assert "applied" in body and "refused" in body and "cancelled_no_dispatch" in body
    assert Event.objects.count() == events
    run.refresh_from_db()
    assert run.state == "CANCELLED"

    other = client_for(operator)  # the same person in another browser: another session
    assert "No bulk cancel result to show" in other.get(result).content.decode()
    unknown = as_operator.get(reverse("runs-bulk-cancel-result"), {"r": "0" * 32})
    assert (
        unknown.status_code == 200 and "No bulk cancel result to show" in unknown.content.decode()
    )
    assert as_approver.get(result).status_code == 403


def test_bulk_cancel_refusals(as_operator: Client, as_approver: Client, world: None) -> None:
    run = _bulk_runs(1)[0]
    url = reverse("runs-bulk-cancel")
    assert as_operator.post(url, {"run": [str(run.pk)], "reason": ""}).status_code == 400
    assert as_operator.post(url, {"reason": "no runs"}).status_code == 400
    assert as_approver.post(url, {"run": [str(run.pk)], "reason": "x"}).status_code == 403
    run.refresh_from_db()
    assert run.state == "CREATED"


def test_a_refused_bulk_cancel_comes_back_on_the_list_as_it_was_filtered(
    as_operator: Client, world: None
) -> None:
    reservation = _bulk_runs(1)[0]
    abstain = _bulk_runs(1, scenario="abstain")[0]
    page = as_operator.get(reverse("runs-list"), {"scenario": "abstain"}).content.decode()
    action = re.search(r'<form method="post" action="([^"]+)" id="bulk-cancel"[^>]*>', page)
    assert action is not None and "scenario=abstain" in action.group(1)

    refused = as_operator.post(action.group(1).replace("&amp;", "&"), {"run": [str(abstain.pk)]})
    assert refused.status_code == 400
    body = refused.content.decode()
    assert f'id="sel-{abstain.pk}"' in body and f'id="sel-{reservation.pk}"' not in body
    for run in (reservation, abstain):
        run.refresh_from_db()
        assert run.state == "CREATED"


def test_the_filter_links_carry_a_search_as_typed(as_operator: Client, world: None) -> None:
    """A search holding ``&`` or ``#`` stays one search in every link built from it (such
    a search is no run id: the export and cancel-by-filter links are left out, the bulk
    cancel's address and the saved view's query keep it)."""
    page = as_operator.get(reverse("runs-list"), {"q": "ab&world=sim#x"}).content.decode()
    page = page.replace("&amp;", "&")
    assert f'action="{reverse("runs-bulk-cancel")}?q=ab%26world%3Dsim%23x"' in page
    assert 'value="q=ab%26world%3Dsim%23x"' in page
    assert reverse("operations-runs-export", args=["csv"]) not in page
    assert "q=ab&world=sim" not in page


# -- budget change and follow-up -------------------------------------------------------------
def test_an_operator_records_a_budget_change(as_operator: Client, waiting_run: Run) -> None:
    url = reverse("runs-budget", args=[waiting_run.pk])
    response = as_operator.post(url, {"budget": "actions", "limit": "20", "reason": "long task"})
    assert response.status_code == 302
    waiting_run.refresh_from_db()
    assert waiting_run.budget_limits["actions"] == 20
    event = Event.objects.get(run=waiting_run, type="budget.changed")
    assert event.payload["reason"] == "long task" and event.payload["by"] == "user:operator"


def test_budget_change_refusals(as_operator: Client, as_approver: Client, waiting_run: Run) -> None:
    url = reverse("runs-budget", args=[waiting_run.pk])
    assert as_operator.post(url, {"budget": "actions", "limit": "20"}).status_code == 400
    assert (
        as_operator.post(url, {"budget": "actions", "limit": "x", "reason": "r"}).status_code == 400
    )
    below = as_operator.post(url, {"budget": "actions", "limit": "0", "reason": "r"})
    assert below.status_code == 400
    assert (
        as_approver.post(url, {"budget": "actions", "limit": "20", "reason": "r"}).status_code
        == 403
    )
    assert "budget.changed" not in types(waiting_run)
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    ended = as_operator.post(url, {"budget": "actions", "limit": "20", "reason": "r"})
    assert ended.status_code == 409


def test_a_budget_change_of_an_ended_run_is_refused_and_recorded(
    as_operator: Client, waiting_run: Run
) -> None:
    """A late budget change (the run ended while the operator looked at it) is refused with
    its cause and recorded as transition.rejected, as a late cancellation is (SPEC §1)."""
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    waiting_run.refresh_from_db()
    revision, limits = waiting_run.revision, dict(waiting_run.budget_limits)
    url = reverse("runs-budget", args=[waiting_run.pk])
    # Below what is used, too: an ended run's refusal is that it ended.
    for limit in ("20", "0"):
        response = as_operator.post(url, {"budget": "actions", "limit": limit, "reason": "late"})
        assert response.status_code == 409
        assert "CANCELLED and its budgets cannot change" in response.content.decode()
    waiting_run.refresh_from_db()
    assert waiting_run.budget_limits == limits and waiting_run.state == "CANCELLED"
    rejected = list(
        Event.objects.filter(run=waiting_run, sequence__gt=revision).order_by("sequence")
    )
    assert [(e.type, e.reason_code) for e in rejected] == [
        ("transition.rejected", "run_terminal"),
        ("transition.rejected", "run_terminal"),
    ]
    assert rejected[0].payload["attempted"] == "budget.changed"
    assert rejected[0].payload["detail"]["by"] == "user:operator"
    assert "budget.changed" not in types(waiting_run)


def test_a_follow_up_starts_a_new_run_only_for_ended_runs(
    as_operator: Client, waiting_run: Run
) -> None:
    url = reverse("runs-follow-up", args=[waiting_run.pk])
    assert as_operator.post(url).status_code == 409
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    response = as_operator.post(url)
    new = Run.objects.get(follows_run=waiting_run)
    assert response["Location"] == reverse("runs-detail", args=[new.pk])
    assert new.principal_ref == "user:operator"


def test_the_same_follow_up_form_submitted_twice_starts_one_follow_up(
    as_operator: Client, waiting_run: Run
) -> None:
    # Before, a double click (or a resent POST) on "Start a follow-up run" started two
    # follow-up runs, each heading for its own approval and reservation.
    services.run_cancel(run_id=str(waiting_run.pk), by_ref="user:operator", reason="stop")
    page = as_operator.get(reverse("runs-detail", args=[waiting_run.pk])).content.decode()
    match = re.search(r'name="start_key" value="([0-9a-f]{32})"', page)
    assert match, "the follow-up form carries no one-time key"
    url = reverse("runs-follow-up", args=[waiting_run.pk])
    first = as_operator.post(url, {"start_key": match.group(1)})
    second = as_operator.post(url, {"start_key": match.group(1)})
    new = Run.objects.get(follows_run=waiting_run)
    assert first["Location"] == second["Location"] == reverse("runs-detail", args=[new.pk])
    # The same key for another request (a plain start) is refused, not taken for this one.
    other = as_operator.post(
        reverse("runs-start"),
        {
            "scenario": "reservation",
            "equipment_id": "EQ-17",
            "location_id": "LOC-N1",
            "start_key": match.group(1),
        },
    )
    assert other.status_code == 400 and "already started run" in other.content.decode()
    assert as_operator.post(url, {"start_key": "k\u00e9y"}).status_code == 409
    assert Run.objects.filter(follows_run=waiting_run).count() == 1


# -- GET never writes ------------------------------------------------------------------------
def test_get_requests_never_change_anything(
    as_operator: Client, as_approver: Client, waiting_run: Run
) -> None:
    def snapshot() -> tuple[Any, ...]:
        return (
            list(Run.objects.values_list("pk", "revision", "state")),
            Event.objects.count(),
            Evidence.objects.count(),
            Decision.objects.count(),
            list(Checkpoint.objects.values_list("pk", "status")),
        )

    before = snapshot()
    checkpoint = waiting_run.waiting_checkpoint
    for client, url in (
        (as_operator, reverse("runs-list")),
        (as_operator, reverse("runs-detail", args=[waiting_run.pk])),
        (as_operator, reverse("runs-export", args=[waiting_run.pk])),
        (as_operator, reverse("runs-replay-audit", args=[waiting_run.pk])),
        (as_operator, reverse("recovery")),
        (as_operator, reverse("runbooks-detail", args=["ambiguous-effect"])),
        (as_operator, reverse("faultlab")),
        (as_operator, reverse("review-packet")),
        (as_approver, reverse("approvals-queue")),
        (as_approver, reverse("approvals-detail", args=[checkpoint])),
        (as_approver, reverse("approvals-history")),
        # Action URLs answer GET with 405 and do nothing.
        (as_operator, reverse("runs-cancel", args=[waiting_run.pk])),
        (as_approver, reverse("approvals-decide", args=[checkpoint])),
        (as_operator, reverse("faultlab-run")),
        (as_operator, reverse("recovery-reconcile")),
    ):
        assert client.get(url).status_code in (200, 405), url
    assert snapshot() == before


def test_the_world_filter_separates_live_runs_from_fault_lab_and_simulations(as_operator):
    from tests.helpers import make_run

    live = make_run("abstain", namespace="live")
    lab = make_run("abstain", namespace="faultlab")
    page = as_operator.get("/", {"world": "faultlab"}).content.decode()
    assert str(lab.pk)[:8] in page and str(live.pk)[:8] not in page
    page = as_operator.get("/", {"world": "live"}).content.decode()
    assert str(live.pk)[:8] in page and str(lab.pk)[:8] not in page
    # The live world by default: fault-lab runs and simulations only when asked for.
    default = as_operator.get("/").content.decode()
    assert str(live.pk)[:8] in default and str(lab.pk)[:8] not in default
    assert as_operator.get("/").context["filters"].as_query() == {}
    everything = as_operator.get("/", {"world": "all"}).content.decode()
    assert str(live.pk)[:8] in everything and str(lab.pk)[:8] in everything
    assert "fault lab</span>" in everything
    # An unknown world is the default, not an error.
    assert as_operator.get("/", {"world": "mars"}).context["filters"].world == "live"


# -- console polish (issue 20) -----------------------------------------------------------
def _gauge(run: Run, budget: str) -> run_selectors.Gauge:
    run.refresh_from_db()
    return next(g for g in run_selectors.run_gauges(run) if g.budget == budget)


def test_the_effects_gauge_of_a_successful_run_is_not_an_alarm(
    as_operator: Client, approver: Any
) -> None:
    from tests.helpers import approve

    run = make_run()
    approve(run, approver)
    assert run.state == "COMPLETED"
    effects = _gauge(run, "effects")
    assert (effects.used, effects.limit) == (1, 1)
    assert effects.level == "done" and effects.meaning == "the run's effect happened"
    assert all(g.level != "alarm" for g in run_selectors.run_gauges(run))
    page = as_operator.get(reverse("runs-detail", args=[run.pk])).content.decode()
    assert 'aria-label="effects used"' in page and 'data-level="done"' in page
    assert 'data-level="alarm"' not in page
    assert 'aria-valuetext="1 of 1: the run&#x27;s effect happened"' in page


def test_the_gauge_of_the_budget_that_ended_a_run_is_the_alarm(as_operator: Client) -> None:
    run = make_run("unavailable_tool")
    assert run.terminal_reason == "action_budget_exhausted"
    levels = {g.budget: g.level for g in run_selectors.run_gauges(run)}
    assert levels["actions"] == "alarm"
    assert [b for b, level in levels.items() if level == "alarm"] == ["actions"]
    page = as_operator.get(reverse("runs-detail", args=[run.pk])).content.decode()
    assert page.count('data-level="alarm"') == 1
    assert "exhausted: this ended the run" in page


@pytest.mark.parametrize(
    ("budget", "used", "limit", "exhausted", "active", "level"),
    [
        ("effects", 1, 1, False, False, "done"),
        ("effects", 0, 1, False, True, ""),
        ("effects", 1, 1, True, False, "alarm"),
        ("actions", 9, 12, False, True, "near"),
        ("actions", 12, 12, False, False, ""),  # ended for another reason: no warning left
        ("actions", 12, 12, True, False, "alarm"),
        ("turns", 2, 24, False, True, ""),
    ],
)
def test_a_gauge_is_coloured_by_what_it_means(budget, used, limit, exhausted, active, level):
    gauge = run_selectors.Gauge(budget, used, limit, limit, exhausted=exhausted, active=active)
    assert gauge.level == level


def test_the_start_form_describes_what_the_reservation_scenario_reserves(
    as_operator: Client, approver: Any
) -> None:
    from sim.double import SCENARIOS
    from sim.world.fixtures import PARTS
    from sim.world.models import LedgerEntry
    from tests.helpers import approve

    run = make_run()
    approve(run, approver)
    [entry] = LedgerEntry.objects.filter(run_id=str(run.pk))
    description = SCENARIOS["reservation"].description
    assert f"reserves {entry.quantity} x part {entry.part_id}" in description
    assert PARTS[entry.part_id]["name"].lower() in description
    assert "R-401" not in description  # a walkthrough's name says nothing about the effect
    page = as_operator.get(reverse("runs-list")).content.decode()
    assert f"reserves {entry.quantity} x part {entry.part_id}" in page


def test_the_ledger_lookup_box_takes_a_whole_idempotency_key(as_operator: Client) -> None:
    page = as_operator.get(reverse("recovery")).content.decode()
    assert 'id="lookup-q" name="q" value="" maxlength="100" size="64"' in page
    assert 'class="key-input"' in page  # 64ch wide in the monospace font (fieldops.css)


@pytest.mark.parametrize(
    "limit",
    [
        "9" * 4000,  # was recorded whole: a 4000-digit limit on every event and the page
        "1000000001",
        "٣٣",  # Arabic-Indic digits: int() read 33
        "1_000",  # int() read 1000
        "+8",
        "-0",
    ],
)
def test_a_budget_limit_that_is_not_plain_digits_or_over_the_ceiling_is_refused(
    as_operator: Client, waiting_run: Run, limit: str
) -> None:
    url = reverse("runs-budget", args=[waiting_run.pk])
    response = as_operator.post(url, {"budget": "actions", "limit": limit, "reason": "r"})
    assert response.status_code == 400
    assert "limit must be a whole number from 0 to 1000000000" in response.content.decode()
    assert "budget.changed" not in types(waiting_run)


def test_a_budget_limit_at_the_ceiling_is_recorded(as_operator: Client, waiting_run: Run) -> None:
    url = reverse("runs-budget", args=[waiting_run.pk])
    response = as_operator.post(url, {"budget": "turns", "limit": "1000000000", "reason": "r"})
    assert response.status_code == 302
    waiting_run.refresh_from_db()
    assert waiting_run.budget_limits["turns"] == 1_000_000_000


def test_the_budget_form_says_the_ceiling(as_operator: Client, waiting_run: Run) -> None:
    page = as_operator.get(reverse("runs-detail", args=[waiting_run.pk])).content.decode()
    assert 'name="limit" min="0" max="1000000000" required' in page


def test_the_stalled_runs_table_says_its_times_are_utc(as_operator: Client) -> None:
    # The "Runs that should be moving and are not" table's "Since" column showed a bare
    # time where the rest of the page (the sweeper's last sweep) and the console's other
    # tables ("Created (UTC)") say the zone.
    import datetime as dt

    from kernel import clock

    run = make_run(advance=False)
    expired = clock.now() - dt.timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=expired, lease_owner="gone")
    page = as_operator.get(reverse("recovery")).content.decode()
    table = page[page.index('id="stalled-h"') :]
    table = table[: table.index("</table>")]
    assert run.short_id in table
    assert '<th scope="col">Since (UTC)</th>' in table
    assert f"{expired:%Y-%m-%d %H:%M:%S}" in table


def test_the_recovery_page_says_a_freshly_started_sweeper_is_starting(
    as_operator: Client,
) -> None:
    """Right after a start the page said "The sweeper has never reported" (an alert) when
    its first sweep was not even due; it says it started and has not finished a sweep yet,
    and alerts again once that sweep is overdue."""
    from kernel import clock
    from runs.engine import sweeper

    sweeper.sweeper_started()
    page = as_operator.get(reverse("recovery")).content.decode()
    assert 'id="sweeper-starting"' in page and 'id="sweeper-late"' not in page
    assert "has not finished its first sweep yet" in page
    clock.advance(120)
    page = as_operator.get(reverse("recovery")).content.decode()
    assert 'id="sweeper-late"' in page and "The sweeper has never reported" in page


def test_the_live_partial_says_when_a_run_stops_moving_though_its_revision_did_not(
    as_operator: Client, settings: Any
) -> None:
    """A run no worker claims keeps its revision: the poll's 'nothing changed' (204) hid
    that it is not moving. The poll says whether it shows the notice; the answer changes
    when the stall does."""
    from kernel import clock

    settings.FIELDOPS_STUCK_AFTER_SECONDS = 5
    run = make_run(advance=False)
    url = reverse("runs-detail", args=[run.pk])
    headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-live"}
    fresh = {"since": run.revision, "stalled": "0"}
    assert as_operator.get(url, fresh, **headers).status_code == 204
    assert 'id="run-stalled"' not in as_operator.get(url).content.decode()

    clock.advance(11)  # no owner, no change for twice "stuck after"
    stalled = as_operator.get(url, fresh, **headers)
    body = stalled.content.decode()
    assert stalled.status_code == 200
    assert 'id="run-stalled"' in body and "no worker has claimed it" in body
    assert "stalled=1" in body  # the next poll says it shows the notice
    assert as_operator.get(url, {**fresh, "stalled": "1"}, **headers).status_code == 204
