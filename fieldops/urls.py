from django.urls import include, path

from access.signin import SignOutView, ThrottledLoginView
from fieldops import metrics
from runs import api

urlpatterns = [
    path("api/callbacks/", api.callback, name="api-callback"),
    path("api/", include("api.urls")),
    path("healthz", api.health, name="health"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", SignOutView.as_view(), name="logout"),
    path("runs/<uuid:run_id>/replay/", include("runs.urls_replay")),
    path("", include("runs.urls")),
    path("", include("sim.urls")),
    path("approvals/", include("approvals.urls")),
    path("catalog/", include("catalog.urls")),
    path("operations/", include("operations.urls")),
]

# Under /api/ a 404 or 500 is JSON in the API's shape; elsewhere the console's page.
handler400 = "fieldops.middleware.bad_request"
handler404 = "fieldops.middleware.not_found"
handler500 = "fieldops.middleware.server_error"
