from django.urls import path

from operations import views

urlpatterns = [
    path("", views.operations_list, name="operations-list"),
    path("cancel/", views.operations_cancel_preview, name="operations-cancel-preview"),
    path("cancel/start/", views.operations_cancel_start, name="operations-cancel-start"),
    path("reconcile/", views.operations_reconcile_preview, name="operations-reconcile-preview"),
    path("reconcile/start/", views.operations_reconcile_start, name="operations-reconcile-start"),
    path("incident/", views.operations_incident_preview, name="operations-incident-preview"),
    path("incident/start/", views.operations_incident_start, name="operations-incident-start"),
    path("views/", views.saved_views_index, name="saved-views"),
    path("views/save/", views.saved_views_create, name="saved-views-create"),
    path("views/<uuid:view_id>/", views.saved_views_open, name="saved-views-open"),
    path("views/<uuid:view_id>/delete/", views.saved_views_delete, name="saved-views-delete"),
    path("counts/", views.runs_state_counts, name="operations-state-counts"),
    path("runs.<str:fmt>", views.runs_export, name="operations-runs-export"),
    path("<uuid:operation_id>/", views.operations_detail, name="operations-detail"),
    path(
        "<uuid:operation_id>/results.<str:fmt>",
        views.operations_results_export,
        name="operations-results-export",
    ),
    path("<uuid:operation_id>/<str:action>/", views.operations_move, name="operations-move"),
]
