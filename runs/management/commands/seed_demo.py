"""Seed the embedded demo: catalog versions, the synthetic world, demo users."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from runs.setup import seed


class Command(BaseCommand):
    help = "Store the reviewed catalog, seed the synthetic world and create the demo users."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--no-users",
            action="store_true",
            help="skip the demo users (for non-embedded deployments)",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        report = seed(demo_users=not options["no_users"])
        for line in report:
            self.stdout.write(line)
