from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals: checkpoints and exact decisions"
    default_auto_field = "django.db.models.BigAutoField"
