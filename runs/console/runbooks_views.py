"""Incident runbooks with their live data and the actions each step allows."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from access.roles import CATALOG_ADMIN, OPERATOR, has_role, require_role
from catalog import services as catalog_services
from catalog.domain.lifecycle import Refusal
from catalog.models import CapabilityVersion
from catalog.refusals import BAD_REQUEST_CODES, REFUSAL_FIELDS
from fieldops.http import AuthedHtmxRequest
from runs.console import runbook_selectors
from runs.console.http import request_tenant
from runs.runbooks import (
    ACTIONS,
    BLOCK_TITLES,
    BY_SLUG,
    CATALOG_ADMIN_ACTIONS,
    CATALOG_ADMIN_BLOCKS,
    RUNBOOKS,
    Runbook,
)
from runs.services import RunInputError


# -- runbooks --------------------------------------------------------------------------
@require_safe
@login_required
def runbooks(request: AuthedHtmxRequest) -> HttpResponse:
    # Catalog admins read them too: the drift runbook's review step is theirs.
    require_role(request.user, OPERATOR, CATALOG_ADMIN)
    return render(request, "runs/runbooks.html", {"runbooks": RUNBOOKS})


def _runbook_data(request: AuthedHtmxRequest, book: Runbook) -> dict[str, Any]:
    """The live data of the runbook's blocks this user's role works with: every block for
    an operator, the catalog's (CATALOG_ADMIN_BLOCKS) for a catalog admin; a step whose
    blocks are left out says it is an operator's."""
    keys = book.blocks
    if not has_role(request.user, OPERATOR):
        keys = tuple(key for key in keys if key in CATALOG_ADMIN_BLOCKS)
    return runbook_selectors.runbook_blocks(
        tenant=request_tenant(request), keys=keys, fixtures=book.fixtures
    )


def _runbook_page(
    request: AuthedHtmxRequest,
    book: Runbook,
    data: dict[str, Any],
    *,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    context = {
        "book": book,
        "data": data,
        "actions": ACTIONS,
        "titles": BLOCK_TITLES,
        "catalog_admin_actions": CATALOG_ADMIN_ACTIONS,
        **extra,
    }
    return render(request, "runs/runbook_detail.html", context, status=status)


@require_safe
@login_required
def runbooks_detail(request: AuthedHtmxRequest, slug: str) -> HttpResponse:
    require_role(request.user, OPERATOR, CATALOG_ADMIN)
    book = BY_SLUG.get(slug)
    if book is None:
        raise Http404("No such runbook")
    return _runbook_page(request, book, _runbook_data(request, book))


@require_POST
@login_required
def runbooks_gate(request: AuthedHtmxRequest, slug: str) -> HttpResponse:
    require_role(request.user, OPERATOR)
    book = BY_SLUG.get(slug)
    if book is None:
        raise Http404("No such runbook")
    back = step_url(request, "effect_gates") or reverse("runbooks-detail", args=[slug])
    # An operator's gate is their own tenant's (issue 16); the deployment gate is a
    # catalog admin's decision on the contract page.
    tenant = request_tenant(request)
    capability_id = request.POST.get("capability_id", "")
    version = request.POST.get("version", "")
    try:
        gate, change = catalog_services.tenant_gate_change(
            capability_id=capability_id,
            version=version,
            tenant=tenant,
            open_gate=request.POST.get("open") == "1",
            reviewer=request.user,
            reason=request.POST.get("reason", ""),
        )
    except CapabilityVersion.DoesNotExist as exc:
        raise Http404("No such capability version") from exc
    except Refusal as exc:
        return _gate_refused(request, book, exc, capability_id, version)
    except ValueError as exc:  # a version without an approval-gated effect
        refusal = Refusal("gate_refused", str(exc))
        return _gate_refused(request, book, refusal, capability_id, version)
    if not change.changed:
        messages.info(
            request,
            change.already(f"The effect gate of {capability_id}@{version} for tenant {tenant}"),
        )
        return redirect(back)
    state = "open: new dispatch allowed" if gate.open else "closed: new dispatch stopped"
    messages.success(
        request, f"Effect gate of {capability_id}@{version} for tenant {tenant} is {state}."
    )
    return redirect(back)


def step_url(request: AuthedHtmxRequest, block: str, *, source: Any = None) -> str:
    """The runbook step a console action was posted from (hidden ``runbook`` and ``step``,
    or in ``source``: a GET's query), when that runbook shows ``block`` at that step: its
    answer goes back there. "" when it came from no runbook, or from one that shows no
    such step."""
    source = request.POST if source is None else source
    book = BY_SLUG.get(source.get("runbook", ""))
    number = _step_of(source)
    if book is None:
        return ""
    if not 1 <= number <= len(book.steps) or block not in book.steps[number - 1].data:
        return reverse("runbooks-detail", args=[book.slug]) if block in book.blocks else ""
    return f"{reverse('runbooks-detail', args=[book.slug])}#step-{number}"


def step_back(
    request: AuthedHtmxRequest, block: str, *, source: Any = None
) -> dict[str, str] | None:
    """``step_url`` with the runbook's title, for a page that leads back to it."""
    source = request.POST if source is None else source
    url = step_url(request, block, source=source)
    if not url:
        return None
    return {"url": url, "title": BY_SLUG[source.get("runbook", "")].title}


def _step_of(source: Any) -> int:
    """The step number a runbook form or link was sent from (0 when none or not a number)."""
    step = source.get("step", "")
    return int(step) if step.isascii() and step.isdigit() and len(step) < 4 else 0


def _step(request: AuthedHtmxRequest) -> int:
    return _step_of(request.POST)


def cancel_refused(request: AuthedHtmxRequest, exc: RunInputError) -> HttpResponse | None:
    """The runbook the operator was following again, after its "owning runs" cancel form
    (posted to runs-bulk-cancel with the hidden ``runbook``) was refused, nothing
    cancelled: the refusal beside the field at fault, the selection and reason as typed.
    None when the post came from no runbook that shows that form (the runs list answers)."""
    book = BY_SLUG.get(request.POST.get("runbook", ""))
    if book is None or "owning_runs" not in book.blocks:
        return None
    return _runbook_page(
        request,
        book,
        _runbook_data(request, book),
        status=400,
        bulk_error=str(exc),
        bulk_error_field=exc.field,
        bulk_selected=set(request.POST.getlist("run")),
        bulk_reason=request.POST.get("reason", ""),
    )


def drift_refused(
    request: AuthedHtmxRequest, back: str, extra: dict[str, Any]
) -> HttpResponse | None:
    """The runbook a drift review was posted from (``back``, its address) again after a
    refusal, nothing changed: ``extra`` puts the refusal beside that drift's reason. None
    when ``back`` is no runbook that shows the drift (the catalog answers)."""
    for book in RUNBOOKS:
        if "tool_drift" in book.blocks and back.startswith(
            reverse("runbooks-detail", args=[book.slug])
        ):
            return _runbook_page(request, book, _runbook_data(request, book), status=400, **extra)
    return None


def _gate_refused(
    request: AuthedHtmxRequest, book: Runbook, exc: Refusal, capability_id: str, version: str
) -> HttpResponse:
    """The runbook again after a refused gate change, nothing changed: the refused row's
    form as typed, a refusal about its reason beside that field (marked aria-invalid), any
    other refusal at the top of the page."""
    status = 400 if exc.code in BAD_REQUEST_CODES else 409
    data = _runbook_data(request, book)
    ref = f"{capability_id}@{version}"
    # Beside the row's reason only when the page shows that row (a posted version it does
    # not list has its refusal at the top).
    shown = {row.ref for row in data.get("effect_gates") or ()}
    about_reason = exc.code in REFUSAL_FIELDS["gate"] and ref in shown
    # The step whose row was sent (a runbook may show the gates at two steps: close, open
    # again); a post that names none answers at the first step that shows them.
    gate_steps = [n for n, s in enumerate(book.steps, 1) if "effect_gates" in s.data]
    step = _step(request) if _step(request) in gate_steps else (gate_steps or [0])[0]
    return _runbook_page(
        request,
        book,
        data,
        status=status,
        refusal=exc,
        refusal_at=ref if about_reason else "",
        gate_form={"ref": ref, "reason": request.POST.get("reason", ""), "step": step},
    )
