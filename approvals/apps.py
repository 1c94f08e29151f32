from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals: checkpoints and exact decisions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A run's terminal event closes its pending checkpoints in the same transaction.
        from approvals import services
        from runs import terminal

        terminal.register_closer(services.checkpoints_close, many=services.checkpoints_close_many)
