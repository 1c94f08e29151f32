"""Routing evaluation over the labelled case set (SPEC §9): prints every metric.

    python manage.py routing_eval                       # every selector x registry, k=3
    python manage.py routing_eval --selector double --registry fieldops --k 5
    python manage.py routing_eval --json                # machine-readable
    python manage.py routing_eval --fail-under 0.7      # exit 1 if end-to-end accuracy of
                                                        # any evaluation is lower

Every selection is answered by recording stubs: no adapter, no world, no effect. Log
lines are shown only with ``-v 2``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from fieldops.arguments import decimal_number, whole_number
from fieldops.commands import FieldOpsCommand
from fieldops.logs import report_verbosity
from kernel.text import quoted_shortly
from sim import routing_eval
from sim.routing import Report


class Command(FieldOpsCommand):
    help = "Evaluate capability routing over the labelled cases (selection suite, no effects)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--selector", choices=[*routing_eval.SELECTORS, "all"], default="all")
        parser.add_argument("--registry", choices=[*routing_eval.REGISTRIES, "all"], default="all")
        parser.add_argument("--k", type=whole_number, default=routing_eval.DEFAULT_K)
        parser.add_argument("--scenario", default="reservation", help="policy double scenario")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument("--failures", action="store_true", help="list every failed case")
        parser.add_argument(
            "--fail-under",
            type=decimal_number,
            default=None,
            help="exit 1 when any evaluation's end-to-end accuracy is lower (0 to 1)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        with report_verbosity(opts["verbosity"]):
            self.report(opts)

    def report(self, opts: dict[str, Any]) -> None:
        if opts["k"] < 1:
            raise CommandError("--k must be at least 1")
        if opts["fail_under"] is not None and not 0 <= opts["fail_under"] <= 1:
            raise CommandError("--fail-under is an accuracy: from 0 to 1")
        from sim.double import SCENARIOS

        if opts["scenario"] not in SCENARIOS:
            raise CommandError(f"unknown scenario {quoted_shortly(opts['scenario'])}")
        selectors = routing_eval.SELECTORS if opts["selector"] == "all" else (opts["selector"],)
        registries = routing_eval.REGISTRIES if opts["registry"] == "all" else (opts["registry"],)
        cases = routing_eval.load_cases()
        reports = [
            routing_eval.evaluate(
                registry_name=reg,
                selector_name=sel,
                k=opts["k"],
                cases=cases,
                scenario=opts["scenario"],
            )
            for sel in selectors
            for reg in registries
        ]
        if opts["json"]:
            self.stdout.write(json.dumps([r.as_dict() for r in reports], indent=2))
        else:
            for report in reports:
                self._print(report, failures=opts["failures"])
        floor = opts["fail_under"]
        if floor is not None:
            low = [
                r.name for r in reports if (r.metrics()["end_to_end_accuracy"].value or 0.0) < floor
            ]
            if low:
                raise CommandError(f"end-to-end accuracy below {floor}: {', '.join(low)}")

    def _print(self, report: Report, *, failures: bool) -> None:
        out = self.stdout.write
        out(f"== {report.name}: {len(report.records)} cases")
        for name, rate in report.metrics().items():
            out(f"  {name:<26} {rate}")
        for k, rate in sorted(report.extra_recall.items()):
            out(f"  recall@{k:<19} {rate}")
        data = report.as_dict()
        profile = ", ".join(f"{s} {n}" for s, n in data["failure_profile"].items())
        out(f"  failure profile (first failed stage): {profile}")
        funnel = " -> ".join(f"{f['stage']} {f['count']}" for f in data["funnel"])
        out(f"  funnel: {funnel}")
        for c in data["selection_confusions"]:
            out(f"  confusion: wanted {c['acceptable']}, chose {c['selected']} x{c['count']}")
        if failures:
            for f in data["failures"]:
                out(
                    f"  FAIL {f['case']}: stage {f['stage'] or '-'}, chose {f['selected']}, "
                    f"acceptable {', '.join(f['acceptable'])}"
                    + (" (VIOLATION)" if f["violation"] else "")
                )
        for note in report.notes:
            out(f"  note: {note}")
        out("")
