"""The runs pages: the list (filters, search, keyset pages, start, bulk cancel) and the run
page (timeline, gauges, cancel, budget change, follow-up, export, evidence, audit replay).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from access.objects import get_run_for_user
from access.roles import OPERATOR, principal_ref_of, require_role
from capabilities import ports
from fieldops.fields import repeatable
from fieldops.http import AuthedHtmxRequest
from fieldops.middleware import bad_request_page
from runs import services
from runs.console import operations, runbooks_views, stalls
from runs.console import runs_selectors as run_selectors
from runs.console.http import conflict, request_tenant
from runs.domain import render as diagram
from runs.domain.budgets import Budget
from runs.policies import DEFAULT_SCENARIO
from runs.policies import registry as policy_registry
from runs.replay.audit import audit_replay


# -- runs list, start, bulk cancel ---------------------------------------------------------
class StartRunForm(forms.Form):
    scenario = forms.ChoiceField(label="Scenario")
    equipment_id = forms.ChoiceField(label="Equipment")
    location_id = forms.ChoiceField(label="Location")
    # One key per rendered form: submitting it twice (a double click, a resent POST)
    # starts one run (services.run_start_once). A post without it starts a run each time.
    start_key = forms.CharField(
        widget=forms.HiddenInput, max_length=services.START_KEY_MAX, required=False
    )

    def __init__(self, *args: Any, tenant: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["start_key"].initial = uuid.uuid4().hex
        reference = ports.world().reference
        # The product's own flow first and chosen (the API's default too), then the rest.
        scenarios = sorted(
            policy_registry.scenarios().items(),
            key=lambda item: (item[0] != DEFAULT_SCENARIO, item[0]),
        )
        # The name alone: a closed select shows one line, and "name — description" (up to
        # 200+ characters) was cut off mid-word at any width, a phone's first. What each
        # scenario does is listed under the field (``scenario_help``, list.html).
        self.fields["scenario"].choices = [(name, name) for name, _ in scenarios]
        self.fields["scenario"].widget.attrs["aria-describedby"] = "scenario-help"
        self.scenario_help = [(name, s.description) for name, s in scenarios]
        self.fields["scenario"].initial = DEFAULT_SCENARIO
        equipment = reference.equipment
        self.fields["equipment_id"].choices = [
            (k, "{} ({family} {revision}, {site})".format(k, **equipment[k]))
            for k in reference.equipment_of(tenant)  # the run's default first
        ]
        self.fields["location_id"].choices = [
            (k, f"{k} ({reference.locations[k]['name']})") for k in reference.locations_of(tenant)
        ]


def _list_context(request: AuthedHtmxRequest, tenant: str, **extra: Any) -> dict[str, Any]:
    filters = run_selectors.RunFilters.from_query(request.GET)
    page = run_selectors.run_list_for_tenant(
        tenant=tenant,
        filters=filters,
        cursor=request.GET.get("after", ""),
        before=request.GET.get("before", ""),
    )
    query = filters.as_query()
    return {
        "page": page,
        "filters": filters,
        "filter_query": urlencode(query),
        "is_first_page": not (request.GET.get("after") or request.GET.get("before")),
        "choices": run_selectors.run_filter_choices(),
        "start_form": extra.pop("start_form", None) or StartRunForm(tenant=tenant),
        **extra,
    }


@require_safe
@login_required
def runs_list(request: AuthedHtmxRequest) -> HttpResponse:
    tenant = request_tenant(request)
    context = _list_context(request, tenant)
    if request.htmx.target == "run-table":
        return render(request, "runs/list.html#run-table", context)
    return render(request, "runs/list.html", context)


@require_POST
@login_required
def runs_start(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, OPERATOR)
    tenant = request_tenant(request)
    form = StartRunForm(request.POST, tenant=tenant)
    if form.is_valid():
        create = {
            "scenario": form.cleaned_data["scenario"],
            "tenant": tenant,
            "principal_ref": principal_ref_of(request.user),
            "requested_by": request.user,
            "equipment_id": form.cleaned_data["equipment_id"],
            "location_id": form.cleaned_data["location_id"],
        }
        key = form.cleaned_data["start_key"]
        try:
            if key:
                started = services.run_start_once(key=key, **create)
            else:
                started = services.StartResult(services.run_create(**create), created=True)
        except services.RunInputError as exc:
            if exc.field == "start_key_reused":
                # A copy of the form that already started a run (a page kept from before that
                # start): the choices come back with a new key, so Start run starts this one.
                renewed = request.POST.copy()
                renewed["start_key"] = uuid.uuid4().hex
                form = StartRunForm(renewed, tenant=tenant)
                form.is_valid()
                form.add_error(
                    None,
                    "This copy of the form had already started a run, so nothing was started. "
                    "It is ready again with your choices: press Start run to start a new run.",
                )
            else:
                form.add_error(None, f"{exc.field}: {exc}")
        else:
            run = started.run
            if started.created:
                messages.success(request, f"Run {run.short_id} started ({run.scenario}).")
            else:
                messages.info(
                    request,
                    f"This form already started run {run.short_id}; it was not started again.",
                )
            return redirect("runs-detail", run.pk)
    context = _list_context(request, tenant, start_form=form)
    return render(request, "runs/list.html", context, status=400)


@repeatable("run")  # the selected runs' checkboxes; every other field is sent once
@require_POST
@login_required
def runs_bulk_cancel(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, OPERATOR)
    tenant = request_tenant(request)
    try:
        rows = operations.run_cancel_many(
            tenant=tenant,
            run_ids=request.POST.getlist("run"),
            by_ref=principal_ref_of(request.user),
            reason=request.POST.get("reason", ""),
        )
    except services.RunInputError as exc:
        # The form comes back as typed (selection and reason), the field at fault marked:
        # on the runbook it was sent from, or else on the runs list.
        on_runbook = runbooks_views.cancel_refused(request, exc)
        if on_runbook is not None:
            return on_runbook
        context = _list_context(
            request,
            tenant,
            bulk_error=str(exc),
            bulk_error_field=exc.field,
            bulk_selected=set(request.POST.getlist("run")),
            bulk_reason=request.POST.get("reason", ""),
        )
        return render(request, "runs/list.html", context, status=400)
    # Post/redirect/get: the result is kept in the session and shown by a GET, so reloading
    # it (or back and forward) shows it again instead of sending the cancellation again.
    token = uuid.uuid4().hex
    kept = dict(list(request.session.get(BULK_RESULTS_KEY, {}).items())[-(BULK_RESULTS_KEPT - 1) :])
    kept[token] = {
        "rows": [dataclasses.asdict(row) for row in rows],
        "reason": request.POST.get("reason", "").strip(),
        # Sent from a runbook's step: the result page leads back there (its next step).
        "runbook": runbooks_views.step_back(request, "owning_runs"),
    }
    request.session[BULK_RESULTS_KEY] = kept
    return redirect(f"{reverse('runs-bulk-cancel-result')}?{urlencode({'r': token})}")


# A person's latest bulk-cancel results (their session's, by token): enough for a few tabs.
BULK_RESULTS_KEY = "fieldops_bulk_cancel_results"
BULK_RESULTS_KEPT = 5


@require_safe
@login_required
def runs_bulk_cancel_result(request: AuthedHtmxRequest) -> HttpResponse:
    """A bulk cancel's per-run result, as it was when the cancellation was sent (the runs'
    current states are on their pages); one of this session's last few, or an empty state."""
    require_role(request.user, OPERATOR)
    result = request.session.get(BULK_RESULTS_KEY, {}).get(request.GET.get("r", ""))
    return render(request, "runs/bulk_cancel.html", result or {"missing": True})


# -- one run ---------------------------------------------------------------------------
class BadCursor(ValueError):
    pass


def _timeline_cursor(request: AuthedHtmxRequest) -> dict[str, int]:
    """The timeline's keyset cursor from the query (``before`` or ``after`` a sequence)."""
    cursor: dict[str, int] = {}
    for name in ("before", "after"):
        raw = request.GET.get(name, "")
        if raw == "":
            continue
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
            raise BadCursor(f"{name} must be an event sequence number")
        cursor[name] = int(raw)
    if len(cursor) > 1:
        raise BadCursor("give either before or after, not both")
    return cursor


def _detail_context(request: AuthedHtmxRequest, run: Any, **extra: Any) -> dict[str, Any]:
    kind = request.GET.get("kind", "all")
    kind = kind if kind in run_selectors.TIMELINE_KINDS else "all"
    try:
        cursor = _timeline_cursor(request)
    except BadCursor:  # the GET view answers 400; a form post re-renders the latest page
        cursor = {}
    return {
        "run": run,
        "detail": run_selectors.run_detail(run),
        "timeline": run_selectors.run_timeline(run=run, kind=kind, **cursor),
        "cursor": cursor,
        "kind": kind,
        "kinds": run_selectors.TIMELINE_KINDS,
        "diagram": diagram.state_diagram_svg(run.state, title=diagram.state_description(run.state)),
        "budgets": [b.value for b in Budget],
        # Each budget's limit as this page shows it: the form sends them back (shown_*).
        "budget_shown": [(b.value, int(run.budget_limits.get(b.value, 0))) for b in Budget],
        "budget_limit_max": services.BUDGET_LIMIT_MAX,
        # One key per rendered follow-up form: submitted twice, it starts one run.
        "follow_up_key": uuid.uuid4().hex,
        **extra,
    }


@require_safe
@login_required
def runs_detail(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    try:
        _timeline_cursor(request)
    except BadCursor as exc:
        # The console's 400 page for a plain or an HTMX request alike (htmx swaps no 4xx).
        kind = request.GET.get("kind", "all")
        latest = urlencode({"kind": kind if kind in run_selectors.TIMELINE_KINDS else "all"})
        return bad_request_page(
            f"Bad timeline page: {exc}.",
            hint="This link is not one of the timeline's older or newer links.",
            back=f"{reverse('runs-detail', args=[run.pk])}?{latest}",
            back_label="Open the latest page of this run's timeline",
        )
    if request.htmx.target == "run-live":
        # The poller says which revision it shows, and whether it says the run is not
        # moving (a stall changes no revision): nothing changed, nothing to swap.
        shown_stalled = request.GET.get("stalled") == "1"
        if request.GET.get("since") == str(run.revision) and shown_stalled == (
            stalls.run_stalled(run) is not None
        ):
            return HttpResponse(status=204)
        # The header's state and the identity's attempt/epoch/revision are swapped out of
        # band; once the run has ended, the actions too (cancel gives way to follow-up).
        context = _detail_context(request, run, live_update=True)
        return render(request, "runs/detail.html#run-live", context)
    return render(request, "runs/detail.html", _detail_context(request, run))


@require_safe
@login_required
def runs_short(request: AuthedHtmxRequest, short_id: str) -> HttpResponse:
    """``/runs/<short id>/``: the short id every list shows (or any prefix of an id) opens
    its run's page when it names one run of the reader's tenant (in any world), the runs
    list searched by it when several share it; otherwise the console's 404."""
    found = run_selectors.runs_by_short_id(request_tenant(request), short_id)
    if not found:
        raise Http404("No run of yours has an id starting with this.")
    if len(found) == 1:
        return redirect("runs-detail", run_id=found[0])
    query = urlencode({"q": short_id.replace("-", "").lower(), "world": "all"})
    return redirect(f"{reverse('runs-list')}?{query}")


@require_POST
@login_required
def runs_cancel(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, OPERATOR)
    back = reverse("runs-detail", args=[run.pk])
    try:
        result = services.run_cancel(
            run_id=str(run.pk),
            by_ref=principal_ref_of(request.user),
            reason=request.POST.get("reason", ""),
        )
    except services.RunInputError as exc:
        context = _detail_context(request, run, cancel_error=str(exc))
        return render(request, "runs/detail.html", context, status=400)
    if result.refusal == "busy":
        return conflict(
            request,
            "The run is busy (another transaction holds it); nothing was changed. "
            "Try again in a few seconds.",
            back=back,
        )
    cancelled = services.cancelled_by(run.pk) if not result.applied else ""
    if cancelled:
        # Another cancellation came first (a colleague's, a bulk cancel): say whose.
        return conflict(
            request,
            f"The run was already cancelled by {cancelled}; your cancellation was not "
            "recorded (the attempt is on the run's record as rejected).",
            back=back,
        )
    if not result.applied:
        return conflict(
            request,
            f"The run is {result.run.state} and cannot be cancelled now "
            f"({result.refusal}); the attempt was recorded as rejected.",
            back=back,
        )
    messages.success(request, f"Run cancelled: {result.qualification}.")
    return redirect("runs-detail", run.pk)


@require_POST
@login_required
def runs_follow_up(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, OPERATOR)
    try:
        started = services.run_follow_up(
            run=run,
            by_ref=principal_ref_of(request.user),
            requested_by=request.user,
            key=request.POST.get("start_key", ""),
        )
    except services.RunInputError as exc:
        return conflict(request, str(exc), back=reverse("runs-detail", args=[run.pk]))
    new = started.run
    if started.created:
        messages.success(
            request, f"Follow-up run {new.short_id} started; it needs its own approvals."
        )
    else:
        messages.info(
            request, f"This form already started run {new.short_id}; it was not started again."
        )
    return redirect("runs-detail", new.pk)


@require_POST
@login_required
def runs_budget(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id, OPERATOR)
    back = reverse("runs-detail", args=[run.pk])
    raw_limit = request.POST.get("limit", "").strip()
    # Plain ASCII digits only: int() also reads "+8", "1_000" and other scripts' digits,
    # and a limit longer than the ceiling's digits is refused before it is converted.
    plain = raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 12
    limit = int(raw_limit) if plain else -1
    budget = request.POST.get("budget", "")
    # The limit the page showed for that budget (its form carries each one): a change
    # decided on a limit that moved since (a colleague's, this form sent twice) is refused.
    raw_shown = request.POST.get(f"shown_{budget}", "") if budget.isidentifier() else ""
    plain_shown = raw_shown.isascii() and raw_shown.isdigit() and len(raw_shown) <= 12
    shown = int(raw_shown) if plain_shown else None
    try:
        services.run_budget_change(
            run_id=str(run.pk),
            by_ref=principal_ref_of(request.user),
            budget=budget,
            limit=limit,
            reason=request.POST.get("reason", ""),
            shown_limit=shown,
        )
    except services.RunInputError as exc:
        if exc.field == "run":
            return conflict(request, str(exc), back=back)
        # The form comes back as typed; only this form's fields (both forms post "reason").
        typed = {name: request.POST.get(name, "") for name in ("budget", "limit", "reason")}
        context = _detail_context(
            request,
            run,
            budget_error=str(exc),
            budget_error_field=exc.field,
            budget_typed=typed,
        )
        return render(request, "runs/detail.html", context, status=400)
    messages.success(request, "Budget change recorded as budget.changed.")
    return redirect("runs-detail", run.pk)


@require_safe
@login_required
def runs_related(request: AuthedHtmxRequest, run_id: UUID, what: str) -> HttpResponse:
    """A run's whole list of checkpoints, effect attempts or follow-ups, newest first, a
    page at a time (the run page shows the latest few of each)."""
    run = get_run_for_user(request.user, run_id)
    cursor = request.GET.get("before", "")
    page = run_selectors.related_page(run=run, what=what, cursor=cursor)
    if page is None:
        return bad_request_page(
            "Bad page cursor: this page link is not valid.",
            hint="This link is not one of the list's own page links.",
            back=request.path,
            back_label="Open the first page of the list",
        )
    return render(
        request,
        "runs/related.html",
        {
            "run": run,
            "what": what,
            "page": page,
            "is_first_page": not cursor,
            "reviews": run_selectors.attempt_reviews(page.rows) if what == "attempts" else {},
        },
    )


@require_safe
@login_required
def runs_export(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    # Streamed: a long history's document is written as its events are read.
    response = StreamingHttpResponse(run_selectors.run_export(run), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.json"'
    return response


@require_safe
@login_required
def runs_all(request: AuthedHtmxRequest) -> HttpResponse:
    """``/runs/``, the parent a person trims a run's address to: the runs list."""
    return redirect("runs-list")


@require_safe
@login_required
def runs_evidence_list(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    """``/runs/<id>/evidence/``, trimmed from an evidence page: the run's timeline, whose
    events link each evidence item (another tenant's or an unknown run is the 404)."""
    run = get_run_for_user(request.user, run_id)
    return redirect(f"{reverse('runs-detail', args=[run.pk])}#run-timeline")


@require_safe
@login_required
def runs_evidence(request: AuthedHtmxRequest, run_id: UUID, evidence_id: str) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    item = run_selectors.run_evidence(run=run, evidence_id=evidence_id)
    if item is None:
        raise Http404("No such evidence for this run")
    return render(request, "runs/evidence.html", {"run": run, "item": item})


@require_safe
@login_required
def runs_replay_audit(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    result, findings = audit_replay(run)
    return render(
        request,
        "runs/audit.html",
        {"run": run, "result": result, "findings": findings},
    )
