from django.urls import path

from sim import views

urlpatterns = [
    path("faultlab/", views.faultlab, name="faultlab"),
    path("faultlab/run/", views.faultlab_run, name="faultlab-run"),
    path("faultlab/<slug:name>/", views.faultlab_result, name="faultlab-result"),
    path("packet/", views.review_packet, name="review-packet"),
    path("catalog/routing/", views.catalog_routing, name="catalog-routing"),
    path(
        "runs/<uuid:run_id>/replay/simulation/",
        views.replay_simulation,
        name="runs-replay-simulation",
    ),
]
