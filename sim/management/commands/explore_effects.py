"""explore_effects: run every schedule of the effect explorer and print what it covered.

Every crash, pause, cancellation and takeover order on the reservation path (see
``runs/explorer.py``), each followed by the exactly-once audit. Exits non-zero on any
violation, naming the schedule.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.management.base import CommandError, CommandParser

from fieldops.commands import FieldOpsCommand
from sim import explorer


class Command(FieldOpsCommand):
    help = "Explore every crash/pause/cancel/takeover schedule of the reservation effect."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--variant", action="append", choices=sorted(explorer.VARIANTS), help="repeatable"
        )
        parser.add_argument("--kind", action="append", choices=explorer.KINDS, help="repeatable")

    def handle(self, *args: Any, **options: Any) -> None:
        verbose = options["verbosity"] >= 2
        if not verbose:  # the report is the output; event logs only when asked (-v 2)
            logging.getLogger("fieldops").setLevel(logging.ERROR)

        def progress(outcome: explorer.ScheduleOutcome) -> None:
            if verbose or outcome.violations:
                mark = "FAIL" if outcome.violations else "ok  "
                self.stdout.write(f"{mark} {outcome.schedule.name} -> {outcome.state}")

        report = explorer.explore(
            variants=options["variant"], kinds=options["kind"], progress=progress
        )
        self.stdout.write("points traced per variant:")
        for variant, reached in report.traces.items():
            self.stdout.write(f"  {variant}: {len(reached)} ({', '.join(reached)})")
        counts = report.counts()
        self.stdout.write(
            f"schedules explored: {len(report.explored)} ("
            + ", ".join(f"{kind} {counts[kind]}" for kind in explorer.KINDS if counts[kind])
            + ")"
        )
        not_reached = len(report.outcomes) - len(report.explored)
        self.stdout.write(f"not applicable (point not reached on that path): {not_reached}")
        if report.skipped:
            self.stdout.write(
                f"skipped: {report.skipped} (need two concurrent transactions: PostgreSQL)"
            )
        self.stdout.write("dispositions:")
        for disposition, n in sorted(report.dispositions().items()):
            self.stdout.write(f"  {n:4d}  {disposition}")
        failures = report.failures
        self.stdout.write(f"violations: {sum(len(o.violations) for o in failures)}")
        for outcome in failures:
            self.stdout.write(f"  {outcome.schedule.name} (run {outcome.run_id})")
            for violation in outcome.violations:
                self.stdout.write(f"    - {violation}")
        if failures:
            raise CommandError(f"{len(failures)} schedule(s) broke the exactly-once promise")
