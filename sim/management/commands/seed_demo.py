"""Seed the embedded demo: catalog versions, the synthetic world, demo users and runs."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sim.demo import DEMO_USERS
from sim.setup import demo_runs, seed


class Command(BaseCommand):
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
        names = [name for name, _, _ in DEMO_USERS]
        first_time = not get_user_model().objects.filter(username__in=names).exists()
        report = seed(demo_users=not options["no_users"])
        if first_time and not options["no_users"]:
            # Demo runs only when the demo users are created now: never on a re-seed.
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
