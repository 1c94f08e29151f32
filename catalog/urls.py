from django.urls import path

from catalog import views

urlpatterns = [
    path("", views.catalog_index, name="catalog-index"),
    path("import/", views.catalog_import, name="catalog-import"),
    path("imports/", views.catalog_imports, name="catalog-imports"),
    path("imports/<int:import_id>/", views.catalog_import_result, name="catalog-import-result"),
    path("diff/", views.catalog_diff, name="catalog-diff"),
    path("rejections/", views.catalog_rejections, name="catalog-rejections"),
    path("servers/", views.catalog_servers, name="catalog-servers"),
    path("servers/<int:server_id>/", views.catalog_server, name="catalog-server"),
    path(
        "servers/<int:server_id>/discover/",
        views.catalog_server_discover,
        name="catalog-server-discover",
    ),
    path("discoveries/", views.catalog_discoveries, name="catalog-discoveries"),
    path("discoveries/<int:discovery_id>/", views.catalog_discovery, name="catalog-discovery"),
    path("drift/", views.catalog_drifts, name="catalog-drifts"),
    path("drift/<int:drift_id>/", views.catalog_drifts, name="catalog-drift"),
    path(
        "drift/<int:drift_id>/resolve/", views.catalog_drift_resolve, name="catalog-drift-resolve"
    ),
    path("candidates/", views.catalog_candidates, name="catalog-candidates"),
    path("candidates/<int:version_id>/", views.catalog_candidate, name="catalog-candidate"),
    path("versions/", views.catalog_versions, name="catalog-versions"),
    path("versions/<int:version_id>/", views.catalog_version, name="catalog-version"),
    path("versions/<int:version_id>/admit/", views.catalog_admit, name="catalog-admit"),
    path("versions/<int:version_id>/decide/", views.catalog_decide, name="catalog-decide"),
    path("versions/<int:version_id>/gate/", views.catalog_gate, name="catalog-gate"),
    path(
        "versions/<int:version_id>/tenant-gate/",
        views.catalog_tenant_gate,
        name="catalog-tenant-gate",
    ),
    path("versions/<int:version_id>/retire/", views.catalog_retire, name="catalog-retire"),
    path(
        "versions/<int:version_id>/retire/withdraw/",
        views.catalog_retire_withdraw,
        name="catalog-retire-withdraw",
    ),
    path("<str:capability_id>/", views.catalog_capability, name="catalog-capability"),
    path("<str:capability_id>/<str:version>/", views.catalog_contract, name="catalog-contract"),
]
