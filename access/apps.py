from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Access: tenants, roles and object access"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from fieldops import checks  # noqa: F401 (registers the deployment checks)
