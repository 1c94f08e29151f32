"""faultlab: run every fault fixture; one line each with expected and actual disposition.

Each result is kept as the console's fault lab keeps it (``faultlab.fixture_run_recorded``,
by ``system:manage.py faultlab``): the fault lab page, the runbooks' fixture tables and the
review packet show it. Exits non-zero if any fixture's actual outcome or checks differ
from its expectation.
The engine's JSON log lines are shown only with ``-v 2`` (``-v 3``: debug).
"""

from __future__ import annotations

import sys

from django.core.management.base import CommandError

from fieldops.commands import FieldOpsCommand
from fieldops.logs import report_verbosity
from kernel.text import quoted_shortly
from sim import faultlab
from sim.setup import seed


class Command(FieldOpsCommand):
    help = "Run the deterministic fault fixtures (SPEC section 8) and compare dispositions."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("names", nargs="*", help="fixture names (default: all)")
        parser.add_argument("--list", action="store_true", help="list fixtures and exit")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        with report_verbosity(options["verbosity"]):
            self.report(options)

    def report(self, options):  # type: ignore[no-untyped-def]
        if options["list"] and options["names"]:
            raise CommandError("--list lists every fixture: give no fixture names with it")
        if options["list"]:
            for f in faultlab.FIXTURES:
                self.stdout.write(f"{f.name:<36} {f.group:<10} {f.injects}")
            return
        unknown = [n for n in options["names"] if n not in faultlab.BY_NAME]
        if unknown:
            names = ", ".join(n if len(n) <= 40 else quoted_shortly(n) for n in unknown)
            raise CommandError(f"unknown fixture(s): {names}")
        seed(demo_users=False)
        failures = 0
        for name in options["names"] or [f.name for f in faultlab.FIXTURES]:
            result = faultlab.fixture_run_recorded(name=name, by_ref=faultlab.COMMAND_REF)
            mark = "PASS" if result.passed else "FAIL"
            failures += not result.passed
            self.stdout.write(
                f"{mark} {name:<36} expected {result.expected:<44} "
                f"actual {result.actual:<44} run {result.run_id[:8] or 'rolled back'}"
            )
            for check in result.failed_checks:
                self.stdout.write(f"     check failed: {check}")
            if not result.passed:
                for note in result.notes:
                    self.stdout.write(f"     note: {note}")
        self.stdout.write(
            f"{len(faultlab.FIXTURES) if not options['names'] else len(options['names'])}"
            f" fixtures, {failures} failed"
        )
        if failures:
            sys.exit(1)
