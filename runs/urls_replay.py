"""Replay modes of one run, mounted at ``runs/<uuid:run_id>/replay/``.

Audit replay lives on the run pages (``runs-replay-audit``); decision replay is here, and
execution simulation with the doubles (``sim.urls``).
"""

from django.urls import path

from runs.console import replay_views as views_replay

urlpatterns = [
    path("", views_replay.replay_modes_index, name="runs-replay"),
    path("decision/", views_replay.replay_decision, name="runs-replay-decision"),
]
