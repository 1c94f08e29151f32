"""Replay modes of one run, mounted at ``runs/<uuid:run_id>/replay/``.

Audit replay lives on the run pages (``runs-replay-audit``); these are the two modes that
ask a policy: decision replay and execution simulation.
"""

from django.urls import path

from runs import views_replay

urlpatterns = [
    path("decision/", views_replay.replay_decision, name="runs-replay-decision"),
    path("simulation/", views_replay.replay_simulation, name="runs-replay-simulation"),
]
