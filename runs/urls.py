from django.urls import path

from runs import views

urlpatterns = [
    path("", views.runs_list, name="runs-list"),
    path("runs/start/", views.runs_start, name="runs-start"),
    path("runs/cancel/", views.runs_bulk_cancel, name="runs-bulk-cancel"),
    path("runs/<uuid:run_id>/", views.runs_detail, name="runs-detail"),
    path("runs/<uuid:run_id>/cancel/", views.runs_cancel, name="runs-cancel"),
    path("runs/<uuid:run_id>/follow-up/", views.runs_follow_up, name="runs-follow-up"),
    path("runs/<uuid:run_id>/budget/", views.runs_budget, name="runs-budget"),
    path("runs/<uuid:run_id>/export.json", views.runs_export, name="runs-export"),
    path(
        "runs/<uuid:run_id>/evidence/<str:evidence_id>/",
        views.runs_evidence,
        name="runs-evidence",
    ),
    path("runs/<uuid:run_id>/audit/", views.runs_replay_audit, name="runs-replay-audit"),
    path("recovery/", views.recovery, name="recovery"),
    path("recovery/reconcile/", views.recovery_reconcile, name="recovery-reconcile"),
    path("runbooks/", views.runbooks, name="runbooks"),
    path("runbooks/<slug:slug>/", views.runbooks_detail, name="runbooks-detail"),
    path("runbooks/<slug:slug>/gate/", views.runbooks_gate, name="runbooks-gate"),
]
