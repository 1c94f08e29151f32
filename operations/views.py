"""The operations pages: bulk cancel by filter (preview, confirm, start), the operations
list, one operation's live progress and results, pause/resume/cancel, streamed exports."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from access.roles import OPERATOR, principal_ref_of, require_role
from fieldops.http import AuthedHtmxRequest
from kernel import clock
from operations import exports, selectors, services
from operations.models import Operation
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


def _filter_query(data: QueryDict) -> dict[str, str]:
    """The runs-list filter a request carries (only the list's own keys)."""
    return {k: data.get(k, "") for k in ("state", "disposition", "scenario", "age", "world", "q")}


# -- bulk cancel by filter --------------------------------------------------------------
def _preview_context(tenant: str, query: dict[str, str], **extra: Any) -> dict[str, Any]:
    preview = services.cancel_preview(tenant=tenant, query=query)
    return {
        "preview": preview,
        "hidden": preview.filters.as_query() | {"world": preview.filters.world},
        **extra,
    }


@require_GET
@login_required
def operations_cancel_preview(request: AuthedHtmxRequest) -> HttpResponse:
    tenant = _operator_tenant(request)
    try:
        context = _preview_context(tenant, _filter_query(request.GET))
    except services.OperationInputError as exc:
        return render(request, "400.html", {"message": str(exc)}, status=400)
    return render(request, "operations/preview.html", context)


@require_POST
@login_required
def operations_cancel_start(request: AuthedHtmxRequest) -> HttpResponse:
    tenant = _operator_tenant(request)
    query = _filter_query(request.POST)
    try:
        operation = services.operation_start_cancel(
            tenant=tenant,
            by_ref=principal_ref_of(request.user),
            query=query,
            reason=request.POST.get("reason", ""),
            confirm=request.POST.get("confirm", ""),
        )
    except services.OperationInputError as exc:
        try:
            context = _preview_context(
                tenant, query, error=str(exc), reason=request.POST.get("reason", "")
            )
        except services.OperationInputError:
            return render(request, "400.html", {"message": str(exc)}, status=400)
        return render(request, "operations/preview.html", context, status=400)
    return redirect("operations-detail", operation.pk)


# -- list and one operation -------------------------------------------------------------
@require_GET
@login_required
def operations_list(request: AuthedHtmxRequest) -> HttpResponse:
    tenant = _operator_tenant(request)
    rows = [selectors.operation_progress(op) for op in selectors.operation_list(tenant=tenant)]
    return render(request, "operations/list.html", {"rows": rows})


@require_GET
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
        "moves": [a for a, (allowed, _) in services.MOVES.items() if operation.status in allowed],
    }
    if request.htmx.target == "op-progress":
        return render(request, "operations/detail.html#op-progress", context)
    return render(request, "operations/detail.html", context)


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
        return conflict(request, str(exc), back=f"/operations/{operation.pk}/")
    return redirect("operations-detail", operation.pk)


# -- exports ---------------------------------------------------------------------------
def _format(fmt: str) -> str:
    if fmt not in exports.FORMATS:
        raise Http404("Unknown export format")
    return fmt


@require_GET
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


@require_GET
@login_required
def runs_export(request: AuthedHtmxRequest, fmt: str) -> HttpResponse:
    """The runs list's current filter, every matching run (not one page), streamed."""
    tenant = request_tenant(request)
    filters = runs_selectors.RunFilters.from_query(request.GET)
    qs = runs_selectors.runs_matching(tenant=tenant, filters=filters)
    if qs is None:
        return render(request, "400.html", {"message": ID_SEARCH_ERROR}, status=400)
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
