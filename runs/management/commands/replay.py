"""replay RUN_ID: audit replay; prints the reconstructed run and every finding.

Exits non-zero when replay finds anything (a gap, a duplicate or conflicting sequence, an
illegal edge, a decreasing counter, a broken hash link, missing evidence, a disagreement
with the stored run row).
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from runs.audit import audit_replay
from runs.management.commands.timeline import _get_run


class Command(BaseCommand):
    help = "Audit replay of a run (no policy, no capability); non-zero exit on any finding."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("run_id")
        parser.add_argument(
            "--mode",
            default="audit",
            choices=["audit"],
            help="replay mode (audit replay folds stored events only)",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        run = _get_run(options["run_id"])
        result, findings = audit_replay(run)
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "mode": "audit",
                        "run_id": str(run.pk),
                        "events_applied": result.events_applied,
                        "snapshot": result.summary(),
                        "findings": [f.__dict__ for f in findings],
                    },
                    indent=2,
                )
            )
        else:
            s = result.summary()
            self.stdout.write(f"audit replay of {run.pk}: {result.events_applied} events folded")
            self.stdout.write(
                f"  state {s['state']} revision {s['revision']} disposition "
                f"{s['disposition'] or '-'} {s['terminal_reason']}"
            )
            self.stdout.write(f"  counters {s['counters']}")
            for f in findings:
                self.stdout.write(f"  FINDING {f.kind} at sequence {f.sequence}: {f.detail}")
            if not findings:
                self.stdout.write("  no findings")
        if findings:
            sys.exit(1)
