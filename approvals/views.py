"""Approval views: the queue, the exact proposal, decisions, clarifications, history.

Access goes through ``access.objects`` (another tenant's checkpoint is 404). Decisions go
through ``approvals.services``, which records every refusal; the view only maps a refusal
to its status: 403 for authority (role, self-approval), 409 for a conflict with the
checkpoint's current state (changed hash, expired, used, run no longer waiting).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from access.objects import checkpoint_readable_by, get_checkpoint_for_user
from access.roles import APPROVER, OPERATOR, has_role, principal_ref_of, require_role, tenant_of
from approvals import selectors, services
from approvals.domain import (
    CHANGEABLE_FIELDS,
    INPUT_REFUSALS,
    MAX_CHANGE_VALUE_CHARS,
    MAX_REASON_CHARS,
    REFUSALS,
    approval_with_change,
)
from approvals.models import Checkpoint, Decision
from fieldops.fields import repeated_field, repeated_fields_checked_by_view
from fieldops.http import AuthedHtmxRequest
from kernel import clock
from kernel.canonical import digest
from runs.console import filters
from runs.domain.validation import delegated_locations

FORBIDDEN_REFUSALS = frozenset(
    {"not_an_approver", "self_approval", "not_eligible", "not_requester"}
)
CONFLICT_REFUSALS = frozenset(
    {
        "hash_mismatch",
        "proposal_changed",
        "checkpoint_expired",
        "already_decided",
        "quorum_complete",
        "already_approved",
        "run_cancelled",
        "run_not_waiting",
        "busy",
    }
)

APPROVE_WITH_CHANGE = (
    "A requested change is filled in, and an approval approves the proposal exactly as it "
    "stands; nothing was decided. Choose Decline to ask for the change, or clear the change "
    "to approve."
)


def _tenant(request: AuthedHtmxRequest) -> str:
    tenant = tenant_of(request.user)
    if not tenant:
        raise Http404("No tenant")
    return tenant


def _readable_checkpoint(request: AuthedHtmxRequest, checkpoint_id: str) -> Checkpoint:
    """Approvers read approval checkpoints; a clarification is also the requester's."""
    checkpoint = get_checkpoint_for_user(request.user, checkpoint_id)
    if not checkpoint_readable_by(request.user, checkpoint):
        require_role(request.user, APPROVER)  # the 403 naming the role
    return checkpoint


def _detail_context(
    request: AuthedHtmxRequest, checkpoint: Checkpoint, **extra: Any
) -> dict[str, Any]:
    run = checkpoint.run
    quorum = selectors.quorum_view(checkpoint)
    is_requester = principal_ref_of(request.user) == run.principal_ref
    disabled = _disabled_reason(request, checkpoint, quorum)
    closed_note = ""
    if checkpoint.status == Checkpoint.Status.CANCELLED:
        closed_note = services.refusal_message("run_cancelled", checkpoint)
    elif checkpoint.status == Checkpoint.Status.EXPIRED:
        closed_note = services.refusal_message("checkpoint_expired", checkpoint)
    proposal_expiry = checkpoint.canonical.get("expires_at") if checkpoint.canonical else None
    other_expiry = (
        clock.parse(proposal_expiry)
        if proposal_expiry and clock.parse(proposal_expiry) != checkpoint.expires_at
        else None
    )
    return {
        "checkpoint": checkpoint,
        "quorum": quorum,
        "eligibility": checkpoint.eligibility.describe(),
        "disabled_reason": disabled,
        "closed_note": closed_note,
        "other_expiry": other_expiry,
        "run": run,
        "evidence": selectors.evidence_ages(checkpoint),
        "expires_in": (checkpoint.expires_at - clock.now()).total_seconds(),
        "hash_verified": bool(checkpoint.canonical)
        and digest(checkpoint.canonical) == checkpoint.proposal_hash,
        "changeable_fields": CHANGEABLE_FIELDS,
        # The only locations a requested change may name (the rest are refused).
        "allowed_locations": delegated_locations(run.scope),
        "decision": getattr(checkpoint, "decision", None),
        "is_requester": is_requester,
        "can_decide": has_role(request.user, APPROVER)
        and checkpoint.status == Checkpoint.Status.PENDING,
        "closed_gates": selectors.closed_effect_gates(checkpoint),
        "live_mark": _live_mark(checkpoint, quorum, disabled),
        **extra,
    }


def _disabled_reason(
    request: AuthedHtmxRequest, checkpoint: Checkpoint, quorum: selectors.QuorumView
) -> str:
    """Why this user's decision would be refused now ("" when it would not): the requester,
    not eligible under the recorded policy, or already counted (no one counts twice)."""
    me = principal_ref_of(request.user)
    if me == checkpoint.run.principal_ref:
        return REFUSALS["self_approval"]
    if not services.is_eligible(request.user, checkpoint):
        return REFUSALS["not_eligible"]
    if any(v.by_ref == me for v in quorum.approved):
        return REFUSALS["already_approved"]
    return ""


def _live_mark(checkpoint: Checkpoint, quorum: selectors.QuorumView, disabled: str) -> str:
    """A short digest of what the page of an open checkpoint shows that others can change
    while it stays open: the approvals counted (who, which), who still may approve, and
    whether this user's decision is refused. The page's poller sends it back; the same
    mark answers 204 without rendering anything."""
    shown = {
        "status": checkpoint.status,
        "approved": [[v.pk, v.by_ref] for v in quorum.approved],
        "still_may": quorum.still_may,
        "disabled": disabled,
    }
    return digest(shown)[:16]


@require_safe
@login_required
def approvals_queue(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, APPROVER)
    kind = request.GET.get("kind", "")
    q = request.GET.get("q", "").strip()[:64]
    world = filters.world_from_query(request.GET.get("world"))
    mine = request.GET.get("assigned") == "me"
    error, bounds = "", None
    if kind and kind not in Checkpoint.Kind.values:
        error = f"There is no checkpoint kind {kind[:40]!r}: choose approval or clarification."
        kind = ""
    if q and not error:
        bounds = filters.id_range(q)
        if bounds is None:
            error = filters.ID_SEARCH_ERROR
    tenant = _tenant(request)
    pending = (
        []
        if error
        else selectors.checkpoint_queue(
            tenant=tenant,
            kind=kind,
            run_ids=bounds,
            world=world,
            assigned_to=request.user if mine else None,
        )
    )
    now = clock.now()
    shown_world = "" if world == filters.DEFAULT_WORLD else world
    active = {
        k: v
        for k, v in (("kind", kind), ("q", q), ("world", shown_world), ("assigned", mine and "me"))
        if v
    }
    context = {
        "rows": [(c, (c.expires_at - now).total_seconds()) for c in pending],
        "kinds": Checkpoint.Kind.values,
        "worlds": list(filters.WORLDS.items()),
        "filters": {"kind": kind, "q": q, "world": world, "assigned": mine},
        "filter_query": urlencode(active),
        "error": error,
        "capped": len(pending) == selectors.QUEUE_LIMIT,
        "limit": selectors.QUEUE_LIMIT,
    }
    if request.htmx.target == "queue":
        return render(request, "approvals/queue.html#queue", context)
    return render(request, "approvals/queue.html", context)


@require_safe
@login_required
def approvals_history(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, APPROVER)
    q = request.GET.get("q", "").strip()[:64]
    bounds = filters.id_range(q) if q else None
    error = filters.ID_SEARCH_ERROR if q and bounds is None else ""
    limit = selectors.HISTORY_LIMIT
    decisions, refusals = (
        ([], [])
        if error
        else selectors.decision_history(tenant=_tenant(request), run_ids=bounds, limit=limit)
    )
    context = {
        "decisions": decisions,
        "refusals": refusals,
        "q": q,
        "error": error,
        "limit": limit,
        # Only the newest are shown: say so, and how to find an older one.
        "decisions_capped": len(decisions) == limit,
        "refusals_capped": len(refusals) == limit,
    }
    return render(request, "approvals/history.html", context)


@require_safe
@login_required
def approvals_deliveries(request: AuthedHtmxRequest) -> HttpResponse:
    """The notification delivery log: every delivery of the tenant and each attempt."""
    require_role(request.user, APPROVER, OPERATOR)
    rows = selectors.delivery_log(tenant=_tenant(request))
    return render(request, "approvals/deliveries.html", {"deliveries": rows})


@require_safe
@login_required
def approvals_questions(request: AuthedHtmxRequest) -> HttpResponse:
    """The clarifications waiting for this user's answer (any role: a question is its
    requester's to answer, whatever roles they hold now)."""
    questions = list(
        selectors.questions_for(
            tenant=_tenant(request), principal_ref=principal_ref_of(request.user)
        )
    )
    now = clock.now()
    context = {
        "questions": questions,
        "rows": [
            (c, (c.expires_at - now).total_seconds(), filters.world_label(c.run.namespace))
            for c in questions
        ],
        "capped": len(questions) == selectors.QUEUE_LIMIT,
        "limit": selectors.QUEUE_LIMIT,
    }
    return render(request, "approvals/questions.html", context)


@require_safe
@login_required
def approvals_detail(request: AuthedHtmxRequest, checkpoint_id: str) -> HttpResponse:
    checkpoint = _readable_checkpoint(request, checkpoint_id)
    if request.htmx.target == "checkpoint-live":
        # The poller of the page of an open checkpoint. While it is open: nothing to swap
        # (204, nothing rendered) while what the page shows is unchanged (its mark, sent
        # back as ``shown``; a page without one polls for closure only), else the changed
        # parts (quorum card, buttons) and the mark of what the page shows now.
        if checkpoint.status == Checkpoint.Status.PENDING:
            quorum = selectors.quorum_view(checkpoint)
            mark = _live_mark(checkpoint, quorum, _disabled_reason(request, checkpoint, quorum))
            shown = request.GET.get("shown", "")
            if not shown or shown == mark:
                return HttpResponse(status=204)
            context = _detail_context(request, checkpoint, live_progress=True)
            return render(request, "approvals/detail.html#checkpoint-live", context)
        context = _detail_context(request, checkpoint, live_update=True)
        context["live_note"] = _closed_since_shown(checkpoint, context)
        return render(request, "approvals/detail.html#checkpoint-live", context)
    return render(request, "approvals/detail.html", _detail_context(request, checkpoint))


def _closed_since_shown(checkpoint: Checkpoint, context: dict[str, Any]) -> str:
    """What closed a checkpoint a page showed open: its run's cancellation, its expiry
    (``closed_note``, as the page itself would say), or a decision recorded elsewhere: by
    every approver a quorum counted, at the time as the console's other notices read it."""
    if context["closed_note"]:
        return str(context["closed_note"])
    decision = context["decision"]
    if decision is None:
        return f"it is {checkpoint.status}."
    when = decision.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if checkpoint.kind == Checkpoint.Kind.CLARIFICATION:
        return f"answered by {decision.decided_by_ref} at {when}."
    verdict = "approved" if decision.verdict == Decision.Verdict.APPROVE else "declined"
    who = ", ".join(decision.approvers or [decision.decided_by_ref])
    return f"{verdict} by {who} at {when}: “{decision.reason}”."


def _refusal_response(
    request: HttpRequest, checkpoint: Checkpoint, result: services.DecisionResult
) -> HttpResponse:
    if result.refusal in CONFLICT_REFUSALS:
        return render(
            request,
            "409.html",
            {
                "message": result.message,
                "back": reverse("approvals-detail", args=[checkpoint.pk]),
            },
            status=409,
        )
    status = 403 if result.refusal in FORBIDDEN_REFUSALS else 400
    typed: dict[str, Any] = {}
    if result.refusal in INPUT_REFUSALS:
        # Refused for what was typed: the form comes back as typed, to be corrected. (Any
        # other refusal is about the proposal or the reviewer: that starts a fresh review.)
        change = {f: request.POST.get(f"change_{f}", "") for f in CHANGEABLE_FIELDS}
        reason = request.POST.get("reason", "")
        typed = {
            "typed_reason": reason,
            # The fields over their bound, marked where they were typed (input_too_large).
            "reason_too_large": len(reason) > MAX_REASON_CHARS,
            "change_too_large": [f for f, v in change.items() if len(v) > MAX_CHANGE_VALUE_CHARS],
            "typed_change": change,
            "change_open": any(v.strip() for v in change.values()),
            # A clarification's answer (its own form) comes back as typed too.
            "typed_answer": request.POST.get("answer", ""),
            "answer_refused": "answer" in request.POST,
        }
    context = _detail_context(request, checkpoint, refusal=result, **typed)
    return render(request, "approvals/detail.html", context, status=status)


@repeated_fields_checked_by_view  # a repeated field is a recorded refusal (SPEC §4)
@require_POST
@login_required
def approvals_decide(request: AuthedHtmxRequest, checkpoint_id: str) -> HttpResponse:
    """Approve or decline exactly the proposal whose hash the form carried."""
    checkpoint = get_checkpoint_for_user(request.user, checkpoint_id)
    repeated = repeated_field(request.POST)
    if repeated is not None:
        # Nothing of the form is read (which verdict, which hash, which reason?).
        result = services.approval_decide(
            checkpoint_id=checkpoint.pk,
            user=request.user,
            approve=False,
            seen_hash="",
            reason="",
            repeated_field=repeated,
        )
        return _refusal_response(request, checkpoint, result)
    verdict = request.POST.get("verdict", "")
    if verdict not in ("approve", "decline"):
        context = _detail_context(request, checkpoint, form_error="Choose approve or decline.")
        return render(request, "approvals/detail.html", context, status=400)
    approve = verdict == "approve"
    typed_change = {f: request.POST.get(f"change_{f}", "") for f in CHANGEABLE_FIELDS}
    if approval_with_change(approve=approve, change=typed_change):
        # Enter in a change field submits with the form's first button, Approve: dropping
        # the change would approve the proposal the approver asked to change (the API
        # refuses the same). Nothing is decided; the form comes back as typed.
        context = _detail_context(
            request,
            checkpoint,
            form_error=APPROVE_WITH_CHANGE,
            typed_reason=request.POST.get("reason", ""),
            typed_change=typed_change,
            change_open=True,
        )
        return render(request, "approvals/detail.html", context, status=400)
    change = None if approve else {f: v.strip() for f, v in typed_change.items()}
    closed_gates = selectors.closed_effect_gates(checkpoint) if approve else []
    result = services.approval_decide(
        checkpoint_id=checkpoint.pk,
        user=request.user,
        approve=approve,
        seen_hash=request.POST.get("seen_hash", ""),
        reason=request.POST.get("reason", ""),
        requested_change=change,
    )
    if not result.recorded:
        return _refusal_response(request, checkpoint, result)
    if result.counted and result.checkpoint is not None:
        given = result.checkpoint.votes.count()
        messages.success(
            request,
            f"Approval counted: {given} of {result.checkpoint.quorum}. The checkpoint waits for "
            "another eligible approver; nothing is dispatched until the quorum is met.",
        )
        return redirect("approvals-detail", checkpoint.pk)
    message = _decided_message(approve=approve, change=change or {}, closed_gates=closed_gates)
    messages.success(request, message)
    return redirect("runs-detail", checkpoint.run_id)


def _decided_message(
    *, approve: bool, change: dict[str, str], closed_gates: list[str] | None = None
) -> str:
    """What a recorded decision leads to, worded for each kind of decision (an approval
    while an effect gate of the run is closed: ``closed_gates``, its dispatch is denied)."""
    if approve and closed_gates:
        return (
            f"Approved, but {'; '.join(closed_gates)}: the run's dispatch is denied and "
            "nothing is sent (reopening the gate later does not send it)."
        )
    if approve:
        return (
            "Approved. The run checks everything again first: it dispatches exactly this, or, if "
            "something changed meanwhile (evidence went stale, the run was cancelled), nothing "
            "is sent and a new proposal needs its own approval."
        )
    asked = ", ".join(f"{field} = {value}" for field, value in change.items() if value)
    if asked:
        return (
            f"Declined with a requested change ({asked}). Nothing was reserved; "
            "a changed proposal will need its own approval."
        )
    # A declined proposal is never dispatched and nothing asks for another one.
    return (
        "Declined. Nothing was reserved: without a requested change, the run ends "
        "without this reservation."
    )


@repeated_fields_checked_by_view  # a repeated field is a recorded refusal (SPEC §4)
@require_POST
@login_required
def approvals_answer(request: AuthedHtmxRequest, checkpoint_id: str) -> HttpResponse:
    """The requester answers a clarification checkpoint."""
    checkpoint = get_checkpoint_for_user(request.user, checkpoint_id)
    repeated = repeated_field(request.POST)
    result = services.clarification_answer(
        checkpoint_id=checkpoint.pk,
        user=request.user,
        answer="" if repeated is not None else request.POST.get("answer", ""),
        repeated_field=repeated,
    )
    if not result.recorded:
        return _refusal_response(request, checkpoint, result)
    messages.success(request, "Answer recorded; the run continues from it.")
    return redirect("runs-detail", checkpoint.run_id)
