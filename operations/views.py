"""The operations pages: bulk cancel by filter (preview, confirm, start), the operations
list, one operation's live progress and results, pause/resume/cancel, streamed exports."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST, require_safe

from access.roles import OPERATOR, ROLES, principal_ref_of, require_role
from fieldops.fields import refused_back_to, repeated_field
from fieldops.http import AuthedHtmxRequest
from fieldops.middleware import bad_request_page
from kernel import clock
from kernel.text import field_name_shown
from operations import exports, saved_views, selectors, services
from operations.models import Operation, SavedView
from runs.console import runs_selectors
from runs.console.filters import ID_SEARCH_ERROR
from runs.console.http import conflict, request_tenant


def _operator_tenant(request: AuthedHtmxRequest) -> str:
    require_role(request.user, OPERATOR)
    return request_tenant(request)


def _get_operation(request: AuthedHtmxRequest, operation_id: UUID) -> Operation:
    """The operation if it belongs to the user's tenant (404 otherwise); operators only."""
    tenant = _operator_tenant(request)
    operation = Operation.objects.filter(pk=operation_id, tenant=tenant).first()
    if operation is None:
        raise Http404("No such operation")
    return operation


# -- bulk cancel by filter --------------------------------------------------------------
def _query_string(hidden: dict[str, str]) -> str:
    return urlencode(hidden)


@dataclass(frozen=True)
class Flow:
    """One bulk action's preview and start: what it selects and how the page says it."""

    title: str
    noun: str
    note: str
    submit: str
    start_url: str
    back: str
    back_label: str
    keys: tuple[str, ...]
    preview: Callable[..., Any]
    hidden: Callable[[Any], dict[str, str]]


CANCEL = Flow(
    title="Cancel every run this filter selects",
    noun="run",
    note="The operation acts on exactly the runs that match when it starts, each with its own "
    "result (done, refused with a reason, already terminal). Runs that already ended are "
    "reported, not touched.",
    submit="Start the bulk cancel",
    start_url="operations-cancel-start",
    back="runs-list",
    back_label="Back to runs",
    keys=runs_selectors.FILTER_KEYS,
    preview=services.cancel_preview,
    hidden=lambda p: p.filters.as_query() | {"world": p.filters.world},
)
RECONCILE = Flow(
    title="Reconcile every unknown effect this filter selects",
    noun="unknown effect",
    note="Each attempt is reconciled by its own idempotency key against the ledger and recorded "
    "on its run exactly as the single Reconcile action records it (a run still recovering is "
    "re-driven; a run otherwise active owns its attempt and the item is refused).",
    submit="Start the bulk reconcile",
    start_url="operations-reconcile-start",
    back="recovery",
    back_label="Back to recovery",
    keys=("capability", "age"),
    preview=services.reconcile_preview,
    hidden=lambda p: p.filters.as_query(),
)
INCIDENT = Flow(
    title="Close your tenant's effect gate and cancel every run waiting to dispatch this version",
    noun="run",
    note="One audited operation: your tenant's effect gate of the version closes and every "
    "run of your tenant that pins it, has not ended and recorded no dispatch yet is cancelled, "
    "each with its own result. Runs with a recorded dispatch keep their reconciliation "
    "obligation (recovery page).",
    submit="Close your tenant's gate and cancel these runs",
    start_url="operations-incident-start",
    back="runbooks",
    back_label="Back to the runbooks",
    keys=("capability",),
    preview=services.incident_preview,
    hidden=lambda p: {},
)


def _preview_context(
    flow: Flow, tenant: str, query: dict[str, str], **extra: Any
) -> dict[str, Any]:
    preview = flow.preview(tenant=tenant, query=query)
    hidden = flow.hidden(preview) or {k: v for k, v in query.items() if v}
    back = reverse(flow.back)
    if flow.back != "runbooks":
        back += "?" + _query_string(hidden)
    # The runbook step a start form came from rides along with the selection: one dict, so
    # no field is sent twice (a form that did would be refused).
    origin = extra.pop("origin", {})
    return {
        "preview": preview,
        "hidden": {**hidden, **origin},
        "title": flow.title,
        "noun": flow.noun,
        "note": flow.note,
        "submit": flow.submit,
        "action": reverse(flow.start_url),
        "back": back,
        "back_label": "Back",
        **extra,
    }


def _selection_refused(flow: Flow, exc: services.OperationInputError) -> HttpResponse:
    """The 400 page for a selection the flow cannot preview (nothing was started)."""
    return bad_request_page(
        f"{capfirst(str(exc)).rstrip('.')}.",
        hint="The selection comes from the page that links here: choose it there again.",
        back=reverse(flow.back),
        back_label=flow.back_label,
    )


def _from_runbook(request: AuthedHtmxRequest, flow: Flow, source: Any) -> dict[str, Any]:
    """For a flow a runbook's gate step links (the incident): its Back leads to that step,
    and the start form carries it on (a refused start comes back with the same Back)."""
    from runs.console import runbooks_views

    origin = (
        runbooks_views.step_back(request, "effect_gates", source=source)
        if flow.back == "runbooks"
        else None
    )
    if origin is None:
        return {}
    return {
        "back": origin["url"],
        "back_label": f"Back to the runbook: {origin['title']}",
        "origin": {"runbook": source.get("runbook"), "step": source.get("step")},
    }


def _preview(request: AuthedHtmxRequest, flow: Flow) -> HttpResponse:
    tenant = _operator_tenant(request)
    query = {k: request.GET.get(k, "") for k in flow.keys}
    try:
        context = _preview_context(flow, tenant, query, **_from_runbook(request, flow, request.GET))
    except services.OperationInputError as exc:
        return _selection_refused(flow, exc)
    return render(request, "operations/preview.html", context)


def _start(request: AuthedHtmxRequest, flow: Flow, start: Callable[..., Operation]) -> HttpResponse:
    tenant = _operator_tenant(request)
    query = {k: request.POST.get(k, "") for k in flow.keys}
    try:
        operation = start(
            tenant=tenant,
            by_ref=principal_ref_of(request.user),
            query=query,
            reason=request.POST.get("reason", ""),
            confirm=request.POST.get("confirm", ""),
            previewed=request.POST.get("previewed"),
        )
    except services.OperationInputError as exc:
        try:
            context = _preview_context(
                flow,
                tenant,
                query,
                error=str(exc),
                error_field=exc.field,
                reason=request.POST.get("reason", ""),
                **_from_runbook(request, flow, request.POST),
            )
        except services.OperationInputError:
            return _selection_refused(flow, exc)
        return render(request, "operations/preview.html", context, status=400)
    return redirect("operations-detail", operation.pk)


@refused_back_to(RECONCILE.back, RECONCILE.back_label)
@require_safe
@login_required
def operations_reconcile_preview(request: AuthedHtmxRequest) -> HttpResponse:
    return _preview(request, RECONCILE)


@refused_back_to(RECONCILE.back, RECONCILE.back_label)
@require_POST
@login_required
def operations_reconcile_start(request: AuthedHtmxRequest) -> HttpResponse:
    return _start(request, RECONCILE, services.operation_start_reconcile)


@refused_back_to(INCIDENT.back, INCIDENT.back_label)
@require_safe
@login_required
def operations_incident_preview(request: AuthedHtmxRequest) -> HttpResponse:
    return _preview(request, INCIDENT)


@refused_back_to(INCIDENT.back, INCIDENT.back_label)
@require_POST
@login_required
def operations_incident_start(request: AuthedHtmxRequest) -> HttpResponse:
    return _start(
        request, INCIDENT, functools.partial(services.operation_start_incident, user=request.user)
    )


@refused_back_to(CANCEL.back, CANCEL.back_label)
@require_safe
@login_required
def operations_cancel_preview(request: AuthedHtmxRequest) -> HttpResponse:
    return _preview(request, CANCEL)


@refused_back_to(CANCEL.back, CANCEL.back_label)
@require_POST
@login_required
def operations_cancel_start(request: AuthedHtmxRequest) -> HttpResponse:
    return _start(request, CANCEL, services.operation_start_cancel)


# -- list and one operation -------------------------------------------------------------
@require_safe
@login_required
def operations_list(request: AuthedHtmxRequest) -> HttpResponse:
    tenant = _operator_tenant(request)
    rows = [selectors.operation_progress(op) for op in selectors.operation_list(tenant=tenant)]
    context = {"rows": rows, "any_running": any(p.operation.status == "running" for p in rows)}
    if request.htmx.target == "op-table":
        return render(request, "operations/list.html#op-table", context)
    return render(request, "operations/list.html", context)


# The page an operation's filter was set on, as its audit record names it.
FILTER_PAGES = {"runs": "runs list", "recovery": "recovery page", "runbook": "runbook"}


@require_safe
@login_required
def operations_detail(request: AuthedHtmxRequest, operation_id: UUID) -> HttpResponse:
    operation = _get_operation(request, operation_id)
    result = selectors.result_from_query(request.GET.get("result"))
    context = {
        "operation": operation,
        "progress": selectors.operation_progress(operation),
        "result": result,
        "result_filters": selectors.RESULT_FILTERS,
        "items": list(
            selectors.operation_items(operation=operation, result=result)
            .select_related("run")
            .only("position", "run_id", "run__state", "target", "result", "detail", "processed_at")[
                : selectors.RESULTS_PAGE
            ]
        ),
        "events": list(operation.events.all()),
        "filter_page": FILTER_PAGES.get(operation.filter.get("page"), operation.filter.get("page")),
        "filter_terms": [
            (key, value)
            for key, value in (operation.filter.get("query") or {}).items()
            if value not in ("", None)
        ],
        "moves": [a for a, (allowed, _) in services.MOVES.items() if operation.status in allowed],
    }
    if request.htmx.target == "op-progress":
        # The poll that finds the operation stopped also swaps its controls and results.
        return render(
            request, "operations/detail.html#op-progress", context | {"live_update": True}
        )
    return render(request, "operations/detail.html", context)


MOVED = {
    "pause": "paused: it stops before its next batch; items already processed keep their results.",
    "resume": "resumed: it goes on with the items not yet processed.",
    "cancel": (
        "cancelled: it stops before its next batch and cannot be resumed; "
        "items already processed keep their results."
    ),
}


@require_POST
@login_required
def operations_move(request: AuthedHtmxRequest, operation_id: UUID, action: str) -> HttpResponse:
    operation = _get_operation(request, operation_id)
    try:
        services.operation_move(
            operation_id=operation.pk,
            tenant=operation.tenant,
            action=action,
            by_ref=principal_ref_of(request.user),
        )
    except services.OperationInputError as exc:
        return conflict(request, str(exc), back=reverse("operations-detail", args=[operation.pk]))
    # Said on the page the operator comes back to (and by its live region, fieldops.js):
    # only the status badge changed, which someone at the top of the page did not hear.
    messages.success(request, f"Operation {operation.short_id} {MOVED[action]}")
    return redirect("operations-detail", operation.pk)


# -- exports ---------------------------------------------------------------------------
def _format(fmt: str) -> str:
    if fmt not in exports.FORMATS:
        raise Http404("Unknown export format")
    return fmt


@require_safe
@login_required
def operations_results_export(
    request: AuthedHtmxRequest, operation_id: UUID, fmt: str
) -> HttpResponse:
    operation = _get_operation(request, operation_id)
    result = selectors.result_from_query(request.GET.get("result"))
    rows = (
        selectors.item_row(row)
        for row in selectors.operation_items(operation=operation, result=result)
        .values(*exports.ITEM_COLUMNS)
        .iterator(chunk_size=exports.CHUNK)
    )
    header = {
        "format": "fieldops-operation-results@1",
        "operation": str(operation.pk),
        "kind": operation.kind,
        "status": operation.status,
        "reason": operation.reason,
        "created_by": operation.created_by,
        "created_at": clock.iso(operation.created_at),
        "filter": operation.filter,
        "result_filter": result,
    }
    return exports.streamed(
        fmt=_format(fmt),
        filename=f"operation-{operation.pk}",
        columns=exports.ITEM_COLUMNS,
        rows=rows,
        header=header,
        key="items",
    )


@require_safe
@login_required
def runs_export(request: AuthedHtmxRequest, fmt: str) -> HttpResponse:
    """The runs list's current filter, every matching run (not one page), streamed."""
    tenant = request_tenant(request)
    filters = runs_selectors.RunFilters.from_query(request.GET)
    qs = runs_selectors.runs_matching(tenant=tenant, filters=filters)
    if qs is None:
        return bad_request_page(
            ID_SEARCH_ERROR,
            hint="Search the runs list by a run id, then export what it shows.",
            back=reverse("runs-list"),
            back_label="Back to runs",
        )
    header = {
        "format": "fieldops-runs@1",
        "tenant": tenant,
        "filter": vars(filters),
        "exported_at": clock.iso(clock.now()),
    }
    return exports.streamed(
        fmt=_format(fmt),
        filename="runs",
        columns=exports.RUN_COLUMNS,
        rows=exports.run_rows(qs),
        header=header,
        key="runs",
    )


# -- saved views ---------------------------------------------------------------------------
@require_POST
@login_required
def saved_views_create(request: AuthedHtmxRequest) -> HttpResponse:
    """Save the filter the page shows (its query string, sent back as ``query``); any role
    of the tenant may (each page checks its own role when the view is opened)."""
    require_role(request.user, *ROLES)
    tenant = request_tenant(request)
    page = request.POST.get("page", "")
    query = QueryDict(request.POST.get("query", "")[:2000])
    repeated = repeated_field(query)
    if repeated is not None:
        # A filter given twice selects neither: nothing is saved that would open as one.
        return bad_request_page(
            f"The view was not saved: its filter gives the parameter "
            f"{field_name_shown(repeated)} more than once, so it selects neither value.",
            hint="Save a view with the form on the page it filters.",
            back=saved_views.page_url(page, None),
            back_label="Back to the page",
        )
    try:
        view = saved_views.saved_view_create(
            tenant=tenant,
            by_ref=principal_ref_of(request.user),
            page=page,
            name=request.POST.get("name", ""),
            query={k: query.get(k, "") for k in query},
        )
    except services.OperationInputError as exc:
        return bad_request_page(
            f"The view was not saved: {exc}.",
            hint="Go back and save the view under another name."
            if exc.field == "name"
            else "Save a view with the form on the page it filters.",
            # Back to the filter being saved (a refused filter itself is left out).
            back=saved_views.page_url(
                page, {k: query.get(k, "") for k in query} if exc.field == "name" else None
            ),
            back_label="Back to the page",
        )
    messages.success(request, f"View “{view.name}” saved; share its link within your tenant.")
    return redirect("saved-views-open", view.pk)


@require_safe
@login_required
def saved_views_index(request: AuthedHtmxRequest) -> HttpResponse:
    """``/operations/views/``, trimmed from a saved view's address: the runs list, whose
    header menu (Saved views) lists them on every page."""
    return redirect("runs-list")


@require_safe
@login_required
def saved_views_open(request: AuthedHtmxRequest, view_id: UUID) -> HttpResponse:
    view = SavedView.objects.filter(pk=view_id, tenant=request_tenant(request)).first()
    if view is None:
        raise Http404("No such view")
    return redirect(saved_views.saved_view_url(view))


@require_POST
@login_required
def saved_views_delete(request: AuthedHtmxRequest, view_id: UUID) -> HttpResponse:
    view = SavedView.objects.filter(pk=view_id, tenant=request_tenant(request)).first()
    if view is None:
        raise Http404("No such view")
    if view.created_by != principal_ref_of(request.user):
        raise PermissionDenied("only who saved a view deletes it")
    saved_views.saved_view_delete(view_id=view.pk)
    messages.success(request, f"View “{view.name}” deleted.")
    return redirect(saved_views.saved_view_url(view))


# -- live counts ---------------------------------------------------------------------------
@require_safe
@login_required
def runs_state_counts(request: AuthedHtmxRequest) -> HttpResponse:
    """Counts per state of the runs the list's filter selects (any state), as a partial."""
    tenant = request_tenant(request)
    filters = runs_selectors.RunFilters.from_query(request.GET)
    counts = selectors.state_counts(tenant=tenant, filters=filters)
    query = filters.as_query()
    return render(
        request,
        "operations/_state_counts.html",
        {
            "counts": counts.counts,
            "capped": counts.capped,
            "cap": selectors.COUNT_CAP,
            "filter_query": urlencode(query),
            # Each count links to its own state: the list's state filter is left out (the
            # counts ignore it, and a state given twice is the repeated-parameter 400).
            "others_query": urlencode({k: v for k, v in query.items() if k != "state"}),
            "filters": filters,
        },
    )
