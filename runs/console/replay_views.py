"""The decision replay page (SPEC §6, §10): a GET that only reads (recorded projections
fed to a candidate policy, or the recorded raw outputs to the adapter that read them) and writes
nothing. The run is fetched through ``access.objects.get_run_for_user`` (another
tenant's run is a 404). Execution simulation's page lives with the doubles (sim/views.py).
"""

from __future__ import annotations

from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_safe

from access.objects import get_run_for_user
from fieldops.http import AuthedHtmxRequest
from runs.policies import registry as scenario_registry
from runs.replay import decision as replay_modes


@require_safe
@login_required
def replay_decision(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    choices = replay_modes.candidates()
    candidate = request.GET.get("candidate") or replay_modes.RECORDED
    error = ""
    replay = None
    if candidate not in choices:
        error = f"Unknown candidate {candidate!r}: choose one from the list."
    else:
        replay = replay_modes.decision_replay(run, candidate)
    return render(
        request,
        "runs/replay_decision.html",
        {
            "run": run,
            "replay": replay,
            "candidate": candidate,
            "choices": [(c, _candidate_label(c)) for c in choices],
            "error": error,
        },
        status=400 if error else 200,
    )


def _candidate_label(name: str) -> str:
    if name == replay_modes.RECORDED:
        return "recorded raw outputs (the adapter version that read them)"
    if name == replay_modes.RECORDED_NEWEST:
        return "recorded raw outputs read by today's adapter (what an upgrade would change)"
    scenario = scenario_registry.get(name)
    return f"double: {name} — {scenario.description if scenario else ''}"


@require_safe
@login_required
def replay_modes_index(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    """``/runs/<id>/replay/``, trimmed from a replay mode's address: the audit replay, the
    replay page that links the other modes (another tenant's or an unknown run: the 404)."""
    run = get_run_for_user(request.user, run_id)
    return redirect("runs-replay-audit", run.pk)
