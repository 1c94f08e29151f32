"""Console pages for the two replay modes that ask a policy (SPEC §6, §10).

Decision replay is a GET: it only reads (recorded projections fed to a double, or the
recorded raw outputs to today's adapter) and writes nothing. Running an execution
simulation is a POST (CSRF) for operators: it creates a run in its own ``sim-...`` world;
showing simulations and their comparison is a GET. Every view fetches the run through
``access.objects.get_run_for_user`` (another tenant's run is a 404).
"""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from access.objects import get_run_for_user
from access.roles import OPERATOR, has_role
from runs import replay_modes
from sim import double


@require_GET
@login_required
def replay_decision(request: HttpRequest, run_id: UUID) -> HttpResponse:
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
        return "recorded raw outputs (today's adapter)"
    return f"double: {name} — {double.SCENARIOS[name].description}"


@require_http_methods(["GET", "POST"])
@login_required
def replay_simulation(request: HttpRequest, run_id: UUID) -> HttpResponse:
    roles = (OPERATOR,) if request.method == "POST" else ()
    run = get_run_for_user(request.user, run_id, *roles)
    scenarios = sorted(double.SCENARIOS)
    is_simulation = replay_modes.is_simulation(run)
    error = ""
    if request.method == "POST":
        scenario = request.POST.get("scenario") or run.scenario
        if scenario not in scenarios:
            error = f"Unknown scenario {scenario!r}: simulations run the policy doubles."
        else:
            try:
                result = replay_modes.simulate(run, candidate=scenario)
            except replay_modes.ReplayError as exc:
                error = str(exc)
            else:
                verdict = "the same" if result.same_disposition else "a different"
                messages.success(
                    request,
                    f"Simulated run {result.simulated.run_id[:8]} ({scenario}) in world "
                    f"{result.simulated.namespace} reached {verdict} disposition.",
                )
                url = reverse("runs-replay-simulation", args=[run.pk])
                return redirect(f"{url}?sim={result.simulated.run_id}")
    simulations = [replay_modes.compare(run, sim) for sim in replay_modes.simulations_of(run)]
    return render(
        request,
        "runs/replay_simulation.html",
        {
            "run": run,
            "simulations": simulations,
            "scenarios": scenarios,
            "default_scenario": run.scenario if run.scenario in scenarios else "reservation",
            "can_simulate": has_role(request.user, OPERATOR) and not is_simulation,
            "is_simulation": is_simulation,
            "highlight": request.GET.get("sim", ""),
            "error": error,
        },
        status=400 if error else 200,
    )
