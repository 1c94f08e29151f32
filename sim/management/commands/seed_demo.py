"""Seed the embedded demo: catalog versions, the synthetic world, demo users and runs."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import CommandError

from fieldops.commands import FieldOpsCommand
from runs.models import Run
from sim.setup import DEMO_TENANT, demo_runs, seed


class Command(FieldOpsCommand):
    help = (
        "Store the reviewed catalog, seed the synthetic world and create the demo users "
        "(and, the first time, a few demo runs)."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--no-users",
            action="store_true",
            help="skip the demo users (for non-embedded deployments)",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        if not options["no_users"] and not settings.FIELDOPS_ALLOW_DEMO_USERS:
            raise CommandError(
                "demo users (with a published password) are disabled in these "
                "settings; use --no-users"
            )
        report = seed(demo_users=not options["no_users"])
        if not options["no_users"] and not Run.objects.filter(tenant=DEMO_TENANT).exists():
            # Demo runs only while the demo tenant has no run at all: a re-seed adds none,
            # and a first seed interrupted after the users were made still gets them.
            # Their per-event INFO log lines would bury the summary below (`make run`'s
            # first screen); -v 2 shows them.
            quiet = options["verbosity"] < 2
            logger = logging.getLogger("fieldops")
            level = logger.level
            if quiet:
                logger.setLevel(max(level, logging.WARNING))
            try:
                report += demo_runs()
            finally:
                logger.setLevel(level)
        for line in report:
            self.stdout.write(line)
