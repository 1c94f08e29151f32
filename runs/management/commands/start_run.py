"""start_run --scenario NAME: create a run and advance it to its first wait or end."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from access.roles import tenant_of
from fieldops.arguments import DIGITS_MAX, whole_number_or_none
from fieldops.commands import FieldOpsCommand
from runs import services
from runs.console.filters import WORLDS
from runs.engine import runner
from runs.policies import scenario_names
from runs.policies.vocabularies import VOCABULARIES


class Command(FieldOpsCommand):
    help = "Create a run for a scenario, advance it to its first wait or end, print its id."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--scenario",
            required=True,
            choices=scenario_names(),
            help="a policy-double scenario, or 'model' for the model API configured by "
            "FIELDOPS_MODEL_API (the vocabulary must be that API's)",
        )
        parser.add_argument(
            "--vocabulary",
            default="openai",
            choices=sorted(VOCABULARIES),
            help="the provider vocabulary the policy speaks",
        )
        parser.add_argument("--tenant", default="north")
        parser.add_argument("--principal", default="user:operator")
        parser.add_argument("--equipment", default=None, help="default: the tenant's first")
        parser.add_argument("--location", default=None)
        parser.add_argument(
            "--fault",
            action="append",
            default=[],
            help='fault point, e.g. "after_commit_before_response" or '
            '"stale_read:check_inventory:1"',
        )
        parser.add_argument(
            "--namespace",
            default="live",
            # The worlds `seed` stocks; an execution simulation makes its own.
            choices=[w for w in WORLDS if w not in ("simulation", "all")],
            help="the synthetic world the run acts in",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        plan = []
        for spec in options["fault"]:
            point, _, rest = spec.partition(":")
            capability, _, on_call = rest.partition(":")
            number = whole_number_or_none(on_call or "1")
            if number is None:
                raise CommandError(
                    f"--fault {spec[:80]!r}: the call number must be a whole number "
                    f"(at most {DIGITS_MAX} of the digits 0-9; 0: every call)"
                )
            plan.append({"point": point, "capability": capability or "*", "on_call": number})
        _check_principal(options["principal"], options["tenant"])
        try:
            run = services.run_create(
                scenario=options["scenario"],
                tenant=options["tenant"],
                principal_ref=options["principal"],
                equipment_id=options["equipment"],
                location_id=options["location"],
                fault_plan=plan,
                namespace=options["namespace"],
                vocabulary=options["vocabulary"],
                start=False,
            )
        except services.RunInputError as exc:
            raise CommandError(f"{exc.field}: {exc}") from exc
        state = runner.advance(str(run.pk), worker="cli")
        run.refresh_from_db()
        self.stdout.write(str(run.pk))
        self.stderr.write(
            json.dumps(
                {
                    "state": state,
                    "revision": run.revision,
                    "reason": run.terminal_reason,
                    "waiting_checkpoint": run.waiting_checkpoint,
                }
            )
        )


def _check_principal(principal: str, tenant: str) -> None:
    """Refuse a principal naming no user, an inactive one, or a user of another tenant.

    The requester is who the run's clarifications ask and who may not approve it: a run
    requested by ``user:nobody`` had nobody to answer its questions, and a north run
    requested by south's operator crossed the boundary. A principal that is no user
    reference at all (or one too long) is left to run_create, which says why."""
    if not (services.USER_REF.fullmatch(principal) and len(principal) <= services.PRINCIPAL_MAX):
        return  # run_create refuses a principal that is no user reference
    name = principal.removeprefix("user:")
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise CommandError(
            f"principal_ref: no user is named {name[:64]!r}; a run's principal is an "
            "existing, active user of its tenant (create one with set_user)"
        )
    if not user.is_active:
        raise CommandError(
            f"principal_ref: user {name[:64]!r} is inactive; a run's principal is an "
            "existing, active user of its tenant"
        )
    acts_for = tenant_of(user)
    if acts_for is not None and acts_for != tenant:
        raise CommandError(
            f"principal_ref: user {name[:64]!r} acts for tenant {acts_for!r}, not {tenant[:32]!r}"
        )
