"""Console pages of the simulated world: the fault lab and the review packet (which shows
the fixtures' latest results beside the engine generated from code)."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from access.objects import get_run_for_user
from access.roles import OPERATOR, has_role, principal_ref_of, require_role, tenant_of
from fieldops.http import AuthedHtmxRequest
from runs import docs
from runs.console import runbook_selectors
from runs.domain import render as diagram
from runs.domain.invariants import INVARIANTS
from runs.domain.states import STATE_MACHINE_VERSION, State
from runs.domain.transitions import STATE_INFO, TRANSITION_LIST
from runs.domain.validation import VALIDATION_STEPS
from sim import double, routing_eval, simulation
from sim import faultlab as lab
from sim import selectors as routing_selectors
from sim.faultlab import BY_NAME, FIXTURES
from sim.faultlab import TENANT as FAULTLAB_TENANT


# -- fault lab -------------------------------------------------------------------------
@require_safe
@login_required
def faultlab(request: AuthedHtmxRequest) -> HttpResponse:
    require_role(request.user, OPERATOR)
    results = runbook_selectors.faultlab_results()
    return render(
        request,
        "sim/faultlab.html",
        {"rows": [(f, results.get(f.name)) for f in FIXTURES], "first": FIXTURES[0].name},
    )


@require_POST
@login_required
def faultlab_run(request: AuthedHtmxRequest) -> HttpResponse:
    """Run one fixture (or, without HTMX, all of them) and keep the result.

    With ``chain=1`` the returned row asks for the next fixture when it loads, so the
    page fills in fixture by fixture.
    """
    require_role(request.user, OPERATOR)
    if tenant_of(request.user) != FAULTLAB_TENANT:
        # Fixtures create runs of the fault lab's tenant: another tenant's operator may not.
        raise PermissionDenied(f"runs fixtures as tenant {FAULTLAB_TENANT}, not yours")
    name = request.POST.get("fixture", "")
    by_ref = principal_ref_of(request.user)
    if name == "all" and not request.htmx:
        for fixture in FIXTURES:
            lab.fixture_run_recorded(name=fixture.name, by_ref=by_ref)
        messages.success(request, f"Ran all {len(FIXTURES)} fixtures.")
        return redirect("faultlab")
    if name not in BY_NAME:
        raise Http404("No such fixture")
    result = lab.fixture_run_recorded(name=name, by_ref=by_ref)
    if not request.htmx:
        messages.success(request, f"{name}: {'PASS' if result.passed else 'FAIL'}.")
        return redirect("faultlab")
    names = [f.name for f in FIXTURES]
    chain = request.POST.get("chain") == "1"
    position = names.index(name)
    next_name = names[position + 1] if chain and position + 1 < len(names) else ""
    return render(
        request,
        "sim/faultlab.html#fixture-row",
        {"fixture": BY_NAME[name], "result": result, "next_name": next_name, "just_ran": True},
    )


@require_safe
@login_required
def faultlab_result(request: AuthedHtmxRequest, name: str) -> HttpResponse:
    """The latest kept result of one fixture (if it ran): its checks and notes, and its run
    (a link) or, for a fixture rolled back with its catalog change, the history its run had."""
    require_role(request.user, OPERATOR)
    if name not in BY_NAME:
        raise Http404("No such fixture")
    result = runbook_selectors.faultlab_result(name=name)
    return render(request, "sim/faultlab_result.html", {"fixture": BY_NAME[name], "result": result})


# -- review packet ---------------------------------------------------------------------
@require_safe
@login_required
def review_packet(request: AuthedHtmxRequest) -> HttpResponse:
    results = runbook_selectors.faultlab_results()
    return render(
        request,
        "sim/packet.html",
        {
            "diagram": diagram.state_diagram_svg(title="FieldOps run state machine"),
            "states": [(s, STATE_INFO[s]) for s in State],
            "transitions": TRANSITION_LIST,
            "events": docs.event_rows(),
            "invariants": [(name, (check.__doc__ or "").strip()) for name, check in INVARIANTS],
            "steps": VALIDATION_STEPS,
            "budgets": docs.budget_rows(),
            "predicates": docs.completion_rows(),
            "fixtures": [(f, results.get(f.name)) for f in FIXTURES],
            "state_machine_version": STATE_MACHINE_VERSION,
            "passed": sum(1 for r in results.values() if r.passed),
            "ran": len(results),
        },
    )


@require_safe
@login_required
def catalog_routing(request: AuthedHtmxRequest) -> HttpResponse:
    try:
        k = int(request.GET.get("k", routing_eval.DEFAULT_K))
    except ValueError:
        k = routing_eval.DEFAULT_K
    k = min(max(k, 1), 10)
    context = routing_selectors.routing_report(k)
    if request.htmx.target == "routing-report":
        return render(request, "catalog/routing.html#routing-report", context)
    return render(request, "catalog/routing.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def replay_simulation(request: AuthedHtmxRequest, run_id: UUID) -> HttpResponse:
    roles = (OPERATOR,) if request.method == "POST" else ()
    run = get_run_for_user(request.user, run_id, *roles)
    scenarios = sorted(double.SCENARIOS)
    is_simulation = simulation.is_simulation(run)
    error = ""
    if request.method == "POST":
        scenario = request.POST.get("scenario") or run.scenario
        if scenario not in scenarios:
            error = f"Unknown scenario {scenario!r}: simulations run the policy doubles."
        else:
            try:
                result = simulation.simulate(run, candidate=scenario)
            except simulation.ReplayError as exc:
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
    simulations = [simulation.compare(run, sim) for sim in simulation.simulations_of(run)]
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
