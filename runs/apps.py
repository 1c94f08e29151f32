from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs: the governed run engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The engine receives what the outbox relays after each commit (in this process or
        # on the Celery workers, as FIELDOPS_EXECUTION says); writers never import it.
        from runs import outbox
        from runs.engine import executor

        outbox.register_relay(executor.kick)
        # Traces only when an OTLP endpoint is configured (docs/observability.md).
        from fieldops import telemetry

        telemetry.configure()
        # Canonical JSON (every content hash) through orjson where byte-identical.
        from kernel import fastjson

        fastjson.install()
