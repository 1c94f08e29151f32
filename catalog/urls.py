from django.urls import path

from catalog import views

urlpatterns = [
    path("", views.catalog_index, name="catalog-index"),
    path("import/", views.catalog_import, name="catalog-import"),
    path("diff/", views.catalog_diff, name="catalog-diff"),
    path("rejections/", views.catalog_rejections, name="catalog-rejections"),
    path("routing/", views.catalog_routing, name="catalog-routing"),
    path("candidates/<int:version_id>/", views.catalog_candidate, name="catalog-candidate"),
    path("versions/<int:version_id>/admit/", views.catalog_admit, name="catalog-admit"),
    path("versions/<int:version_id>/decide/", views.catalog_decide, name="catalog-decide"),
    path("versions/<int:version_id>/gate/", views.catalog_gate, name="catalog-gate"),
    path("<str:capability_id>/<str:version>/", views.catalog_contract, name="catalog-contract"),
]
