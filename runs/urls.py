from django.urls import path

from runs.console import recovery_views, runbooks_views, runs_views

urlpatterns = [
    path("", runs_views.runs_list, name="runs-list"),
    path("runs/", runs_views.runs_all, name="runs-all"),
    path("runs/start/", runs_views.runs_start, name="runs-start"),
    path("runs/cancel/", runs_views.runs_bulk_cancel, name="runs-bulk-cancel"),
    path("runs/cancel/result/", runs_views.runs_bulk_cancel_result, name="runs-bulk-cancel-result"),
    path("runs/<uuid:run_id>/", runs_views.runs_detail, name="runs-detail"),
    # After the full id, so only what is not one reaches it: a short id or any prefix.
    path("runs/<str:short_id>/", runs_views.runs_short, name="runs-short"),
    path("runs/<uuid:run_id>/cancel/", runs_views.runs_cancel, name="runs-cancel"),
    path("runs/<uuid:run_id>/follow-up/", runs_views.runs_follow_up, name="runs-follow-up"),
    path("runs/<uuid:run_id>/budget/", runs_views.runs_budget, name="runs-budget"),
    path("runs/<uuid:run_id>/export.json", runs_views.runs_export, name="runs-export"),
    path(
        "runs/<uuid:run_id>/checkpoints/",
        runs_views.runs_related,
        {"what": "checkpoints"},
        name="runs-checkpoints",
    ),
    path(
        "runs/<uuid:run_id>/attempts/",
        runs_views.runs_related,
        {"what": "attempts"},
        name="runs-attempts",
    ),
    path(
        "runs/<uuid:run_id>/follow-ups/",
        runs_views.runs_related,
        {"what": "follow-ups"},
        name="runs-follow-ups",
    ),
    path("runs/<uuid:run_id>/evidence/", runs_views.runs_evidence_list, name="runs-evidence-list"),
    path(
        "runs/<uuid:run_id>/evidence/<str:evidence_id>/",
        runs_views.runs_evidence,
        name="runs-evidence",
    ),
    path("runs/<uuid:run_id>/audit/", runs_views.runs_replay_audit, name="runs-replay-audit"),
    path("recovery/", recovery_views.recovery, name="recovery"),
    path("recovery/reconcile/", recovery_views.recovery_reconcile, name="recovery-reconcile"),
    path(
        "recovery/review/",
        recovery_views.recovery_conflict_review,
        name="recovery-conflict-review",
    ),
    path("runbooks/", runbooks_views.runbooks, name="runbooks"),
    path("runbooks/<slug:slug>/", runbooks_views.runbooks_detail, name="runbooks-detail"),
    path("runbooks/<slug:slug>/gate/", runbooks_views.runbooks_gate, name="runbooks-gate"),
]
