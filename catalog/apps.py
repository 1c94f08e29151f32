from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Capability catalog"
    default_auto_field = "django.db.models.BigAutoField"
