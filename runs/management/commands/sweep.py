"""sweep: one idempotent sweep by hand, as beat's two sweeps do it: the runs' (expiries,
deadlines, obligations, re-drives) and the bulk operations' (re-hand those nobody
progressed)."""

from __future__ import annotations

import json

from fieldops.commands import FieldOpsCommand
from operations import services as operations
from runs.engine import sweeper


class Command(FieldOpsCommand):
    help = "Run one sweep (runs and bulk operations) and print what it did."

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        report = sweeper.sweep().as_dict()
        report["operations"] = operations.operation_sweep()
        self.stdout.write(json.dumps(report))
