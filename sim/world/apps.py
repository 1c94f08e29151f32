from django.apps import AppConfig


class WorldConfig(AppConfig):
    name = "sim.world"
    label = "world"
    verbose_name = "Synthetic world (deterministic doubles)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from capabilities import ports
        from sim.world import port

        ports.install(port.world())
