from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs: the governed run engine"
    default_auto_field = "django.db.models.BigAutoField"
