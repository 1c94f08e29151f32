"""The replay pages: decision replay (GET, reads only) and execution simulation (POST for
operators with CSRF; GET shows results). Other tenants get a 404."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Evidence, Run
from sim import simulation as replay_modes
from sim.world.models import LedgerEntry
from tests.conftest import make_user
from tests.helpers import approve, make_run
from tests.runs.replay.helpers import run_snapshot


@pytest.fixture
def completed(world, approver):
    run = make_run("reservation")
    approve(run, approver)
    return run


def decision_url(run: Run) -> str:
    return reverse("runs-replay-decision", args=[run.pk])


def simulation_url(run: Run) -> str:
    return reverse("runs-replay-simulation", args=[run.pk])


def test_the_replay_urls_are_mounted_under_the_run():
    run_id = "6a0b2a4e-8a51-4b7e-9a53-0c1f2d3e4f50"
    assert reverse("runs-replay-decision", args=[run_id]) == f"/runs/{run_id}/replay/decision/"
    assert reverse("runs-replay-simulation", args=[run_id]) == f"/runs/{run_id}/replay/simulation/"


def test_decision_replay_page_shows_where_the_candidate_diverges(client, completed, approver):
    client.force_login(approver)
    before = run_snapshot(completed)
    page = client.get(decision_url(completed), {"candidate": "early_success"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Decision replay of run" in html
    assert "First divergence at decision 3." in html
    assert re.search(r'id="decision-3" class="ev-rejected"', html)
    assert re.search(r'id="decision-2" class=""', html)
    assert "check_inventory(location_id=&#x27;LOC-N1&#x27;, part_id=&#x27;A17&#x27;)" in html
    assert 'aria-current="page">decision replay' in html
    assert run_snapshot(completed) == before  # a GET that only reads


def test_decision_replay_defaults_to_the_recorded_outputs_and_refuses_unknown_candidates(
    client, completed, approver
):
    client.force_login(approver)
    page = client.get(decision_url(completed))
    assert page.status_code == 200
    assert "No divergence" in page.content.decode()
    bad = client.get(decision_url(completed), {"candidate": "model"})
    assert bad.status_code == 400  # no outbound model call from a page view
    assert "Unknown candidate" in bad.content.decode()


def test_replay_pages_hide_other_tenants_runs_and_need_a_login(client, completed, outsider):
    anonymous = client.get(decision_url(completed))
    assert anonymous.status_code == 302
    assert anonymous.url.startswith(reverse("login"))
    client.force_login(outsider)
    assert client.get(decision_url(completed)).status_code == 404
    assert client.get(simulation_url(completed)).status_code == 404
    south_operator = make_user("operator-south", "south", "operator")
    client.force_login(south_operator)
    assert client.post(simulation_url(completed), {"scenario": "reservation"}).status_code == 404
    assert not replay_modes.simulations_of(completed)


def test_running_a_simulation_is_a_post_for_operators_only(client, completed, approver):
    client.force_login(approver)
    page = client.get(simulation_url(completed))
    assert page.status_code == 200
    assert "Operators can run a simulation" in page.content.decode()
    assert client.post(simulation_url(completed), {"scenario": "reservation"}).status_code == 403
    assert not replay_modes.simulations_of(completed)
    assert client.put(simulation_url(completed)).status_code == 405


def test_an_operator_simulates_with_csrf_and_sees_the_comparison(completed, operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(simulation_url(completed), {"scenario": "reservation"}).status_code == 403
    assert not replay_modes.simulations_of(completed)
    page = client.get(simulation_url(completed))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    live_before = list(LedgerEntry.objects.filter(namespace="live").values())
    recorded_before = run_snapshot(completed)
    posted = client.post(
        simulation_url(completed),
        {"scenario": "reservation", "csrfmiddlewaretoken": token.group(1)},
    )
    assert posted.status_code == 302
    (sim,) = replay_modes.simulations_of(completed)
    assert posted.url == f"{simulation_url(completed)}?sim={sim.pk}"
    html = client.get(posted.url).content.decode()
    assert "same disposition" in html
    assert f'id="sim-{sim.pk}"' in html
    assert sim.namespace in html
    assert "scripted approver: approve" in html
    assert "reached the same disposition" in html  # the flash message
    assert LedgerEntry.objects.filter(namespace=sim.namespace).count() == 1
    assert list(LedgerEntry.objects.filter(namespace="live").values()) == live_before
    assert run_snapshot(completed) == recorded_before


def test_a_candidate_scenario_and_bad_input_from_the_form(client, completed, operator):
    client.force_login(operator)
    posted = client.post(simulation_url(completed), {"scenario": "early_success"})
    assert posted.status_code == 302
    assert "different disposition" in client.get(posted.url).content.decode()
    bad = client.post(simulation_url(completed), {"scenario": "model"})
    assert bad.status_code == 400
    assert "Unknown scenario" in bad.content.decode()
    (sim,) = replay_modes.simulations_of(completed)
    again = client.post(simulation_url(sim), {"scenario": "reservation"})
    assert again.status_code == 400
    assert "is a simulation" in again.content.decode()
    assert len(replay_modes.simulations_of(completed)) == 1
    assert Evidence.objects.filter(run=sim).exists()
