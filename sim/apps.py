from django.apps import AppConfig


class SimConfig(AppConfig):
    """The simulated world's composition: it plugs the world double and the policy double
    into the ports governed code uses (capabilities.ports, runs.policies.registry)."""

    name = "sim"
    verbose_name = "Simulation: world double, policy double, fault lab, explorer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs import runbooks
        from sim import double, faultlab

        double.register()
        for fixture in faultlab.FIXTURES:
            runbooks.register_fixture(
                runbooks.FixtureInfo(
                    fixture.name, fixture.injects, fixture.expect_state, fixture.expect_reason
                )
            )
