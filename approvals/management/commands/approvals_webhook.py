"""approvals_webhook: add, replace or remove a tenant's signed webhook endpoint."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandError, CommandParser

from approvals import configuration
from approvals.models import WebhookEndpoint
from fieldops.commands import FieldOpsCommand

# What an endpoint is made of: --disable takes none of these.
ENDPOINT_OPTIONS = {"url": "--url", "secret_env": "--secret-env", "format": "--format"}


class Command(FieldOpsCommand):
    help = (
        "Add or replace a webhook endpoint for approval notifications. The signing secret "
        "is read from the environment variable named by --secret-env (never an argument)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--url", help="where the notices are POSTed (http or https)")
        parser.add_argument(
            "--secret-env",
            default="FIELDOPS_WEBHOOK_SECRET",
            help="the variable holding the signing secret: FIELDOPS_WEBHOOK_SECRET[_<NAME>]",
        )
        parser.add_argument("--format", choices=WebhookEndpoint.Format.values, default="json")
        parser.add_argument(
            "--disable", action="store_true", help="disable it (with --tenant and --name only)"
        )
        self.defaults = {dest: parser.get_default(dest) for dest in ENDPOINT_OPTIONS}

    def handle(self, *args: Any, **o: Any) -> None:
        if o["disable"]:
            given = [
                flag for dest, flag in ENDPOINT_OPTIONS.items() if o[dest] != self.defaults[dest]
            ]
            if given:
                raise CommandError(
                    "--disable names an endpoint by --tenant and --name only, "
                    f"not {', '.join(given)}"
                )
            changed = WebhookEndpoint.objects.filter(tenant=o["tenant"], name=o["name"]).update(
                active=False
            )
            if not changed:
                raise CommandError(
                    f"no webhook endpoint {o['tenant'][:40]}/{o['name'][:80]} to disable"
                )
            self.stdout.write(f"disabled webhook {o['tenant']}/{o['name']}")
            return
        url = o["url"] or ""
        secret = os.environ.get(o["secret_env"], "")
        problem = (
            configuration.tenant_problem(o["tenant"])
            or configuration.name_problem(o["name"])
            or configuration.webhook_url_problem(url)
            or configuration.secret_env_problem(o["secret_env"], secret)
        )
        if problem:
            raise CommandError(problem)
        endpoint, created = WebhookEndpoint.objects.update_or_create(
            tenant=o["tenant"],
            name=o["name"],
            defaults={"url": url, "secret": secret, "format": o["format"], "active": True},
        )
        self.stdout.write(f"{'added' if created else 'replaced'} webhook {endpoint} -> {url}")
