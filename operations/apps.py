from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations: bulk actions by filter, saved views, exports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Operations are handed to the workers (or this process) by the executor; the
        # services that start and resume them never import it.
        from operations import executor, services

        services.register_handover(executor.kick)
