"""The recovery page: unknown effects, runs not moving, the ledger lookup and reconciliation
by key."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from access.roles import OPERATOR, principal_ref_of, require_role
from fieldops.http import AuthedHtmxRequest
from fieldops.middleware import bad_request_page
from operations import reviews
from operations import services as operation_services
from runs.authority import IntegrityConflict
from runs.console import operations, recovery_selectors, runbook_selectors, runbooks_views
from runs.console.filters import AGES
from runs.console.http import conflict, request_tenant
from runs.models import EffectAttempt


# -- recovery --------------------------------------------------------------------------
@require_safe
@login_required
def recovery(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, OPERATOR)
    tenant = request_tenant(request)
    query = request.GET.get("q", "").strip()
    return render(
        request,
        "runs/recovery.html",
        {
            "attempts": recovery_selectors.recovery_attempts(tenant=tenant),
            "stalled": recovery_selectors.stalled_runs(tenant=tenant),
            "stalled_operations": recovery_selectors.stalled_operations(tenant=tenant),
            "sweeper": recovery_selectors.sweeper_report(),
            "query": query,
            "lookup": recovery_selectors.ledger_lookup(tenant=tenant, query=query)
            if query
            else None,
            "capability_versions": runbook_selectors.effect_capability_versions(tenant=tenant),
            "reviewed": reviews.reviewed_conflicts(tenant=tenant),
            "ages": [(key, label) for key, (label, _, _) in AGES.items()],
        },
    )


@require_POST
@login_required
def recovery_reconcile(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, OPERATOR)
    tenant = request_tenant(request)
    on_runbook = runbooks_views.step_url(request, "unresolved_attempts")
    try:
        outcome = operations.effect_attempt_reconcile(
            attempt_id=request.POST.get("attempt_id", ""),
            tenant=tenant,
            by_ref=principal_ref_of(request.user),
        )
    except EffectAttempt.DoesNotExist as exc:
        raise Http404("No such attempt") from exc
    except IntegrityConflict as exc:
        return conflict(request, str(exc), back=on_runbook or reverse("recovery"))
    attempt = outcome.attempt
    text = f"{attempt.pk}: {outcome.action} — {attempt.status}. {outcome.detail}"
    if outcome.action == "refused":
        return conflict(request, text, back=on_runbook or reverse("recovery"))
    messages.success(request, text)
    # Back on the runbook step it was sent from (the operator follows the next step there),
    # or else the ledger lookup of its key.
    return redirect(on_runbook or f"{reverse('recovery')}?q={attempt.idempotency_key}")


@require_POST
@login_required
def recovery_conflict_review(request: AuthedHtmxRequest) -> HttpResponse:
    """Mark a conflicting effect of the operator's tenant reviewed, with a reason (it leaves
    the open obligations; the recovery page and the run keep it in their history)."""
    require_role(request.user, OPERATOR)
    tenant = request_tenant(request)
    back = runbooks_views.step_url(request, "unresolved_attempts") or reverse("recovery")
    attempt_id = request.POST.get("attempt_id", "")
    try:
        operation_services.conflict_review(
            attempt_id=attempt_id,
            tenant=tenant,
            by_ref=principal_ref_of(request.user),
            reason=request.POST.get("reason", ""),
        )
    except EffectAttempt.DoesNotExist as exc:
        raise Http404("No such attempt") from exc
    except operation_services.OperationInputError as exc:
        return bad_request_page(f"{exc}.", hint="Nothing was recorded: go back and give a reason.")
    except operation_services.ReviewRefused as exc:
        return conflict(request, str(exc), back=back)
    messages.success(request, f"{attempt_id}: conflict marked reviewed.")
    return redirect(back)
