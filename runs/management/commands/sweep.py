"""sweep: one idempotent sweep (expiries, deadlines, obligations, re-drives)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from runs.engine import sweeper


class Command(BaseCommand):
    help = "Run one sweep and print what it did."

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        self.stdout.write(json.dumps(sweeper.sweep().as_dict()))
