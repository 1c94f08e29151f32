"""replay RUN_ID [--mode audit|decision|simulation] [--candidate NAME] [--json] [--check]
replay RUN_ID RUN_ID ... | replay --all   (audit replay of many runs in one process)

Three named modes (SPEC §6); "replay the run" without a mode means audit replay.

- ``audit`` (default): fold the stored events (no policy, no capability). Exits non-zero
  on any finding (a gap, a duplicate or conflicting sequence, an illegal edge, a
  decreasing counter, a broken hash link, missing evidence, a disagreement with the row).
- ``decision``: feed each recorded context projection to ``--candidate`` (``recorded``,
  the default: stored raw outputs through the adapter version that read them;
  ``recorded-newest-adapter``: the same outputs through today's adapter version; a double
  scenario; or ``model``: the configured model client) and print a per-decision diff. No effects.
- ``simulation``: re-run the request in a fresh ``sim-...`` world namespace with the
  doubles (``--candidate`` a scenario; default the recorded one) and compare dispositions.
  Synthetic effects land in that namespace only.

``--check`` makes decision replay exit 1 on any divergence and simulation exit 1 when the
disposition differs. The engine's JSON log lines are shown only with ``-v 2``.

Several run ids (or ``--all``: every run, oldest first) audit each run in turn, printing
each as a single id would (``--json``: one list), and exit 1 when any run has a finding.
Decision replay and simulation take one run only.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import CommandError

from fieldops.commands import FieldOpsCommand
from fieldops.logs import report_verbosity
from runs.management.commands.timeline import _get_run
from runs.models import Run
from runs.replay import decision as replay_modes
from runs.replay.audit import audit_replay
from sim import simulation

MODES = ("audit", "decision", "simulation")


class Command(FieldOpsCommand):
    help = (
        "Replay a run: audit (fold events; non-zero exit on findings), decision (candidate "
        "policy on recorded observations; no effects) or simulation (doubles, isolated world)."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID")
        parser.add_argument(
            "--all", action="store_true", help="audit replay of every run (oldest first)"
        )
        parser.add_argument(
            "--mode",
            default="audit",
            choices=MODES,
            help="audit replay (default), decision replay or execution simulation",
        )
        parser.add_argument(
            "--candidate",
            default=None,
            help=(
                "decision: recorded | recorded-newest-adapter | a scenario | model; "
                "simulation: a scenario"
            ),
        )
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--check",
            action="store_true",
            help="decision/simulation: exit 1 when the candidate diverges from the record",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        ids, mode = options["run_ids"], options["mode"]
        if options["candidate"] is not None and not options["candidate"].strip():
            # Read as "none given" before: a simulation then ran (and wrote its run) as the
            # recorded scenario. A script whose variable came out empty means something.
            raise CommandError(
                "--candidate is empty: give recorded, recorded-newest-adapter, a scenario or "
                "model (or leave the option out)"
            )
        if options["all"] and ids:
            raise CommandError("give run ids or --all, not both")
        if options["all"] or len(ids) > 1:
            if mode != "audit":
                raise CommandError(f"{mode} replay takes exactly one run id")
            self.audit_many(ids, options)
            return
        if not ids:
            raise CommandError("give a run id (or several, or --all)")
        run = _get_run(ids[0])
        try:
            with report_verbosity(options["verbosity"]):
                if mode == "decision":
                    self.decision(run, options)
                elif mode == "simulation":
                    self.simulation(run, options)
                else:
                    self.audit(run, options)
        except replay_modes.ReplayError as exc:
            raise CommandError(str(exc)) from exc

    def audit_many(self, ids, options):  # type: ignore[no-untyped-def]
        if options["candidate"]:
            raise CommandError("audit replay asks no policy: --candidate does not apply")
        # Every id is checked before anything is replayed: a typo fails the whole call.
        runs = [_get_run(i) for i in ids] if ids else list(Run.objects.order_by("created_at"))
        reports, failed = [], 0
        for run in runs:
            result, findings = audit_replay(run)
            failed += bool(findings)
            if options["json"]:
                reports.append(_audit_json(run, result, findings))
            else:
                self._audit_text(run, result, findings)
        if options["json"]:
            self.stdout.write(json.dumps(reports, indent=2))
        else:
            self.stdout.write(f"{len(runs)} runs replayed, {failed} with findings")
        if failed:
            sys.exit(1)

    def audit(self, run, options):  # type: ignore[no-untyped-def]
        if options["candidate"]:
            raise CommandError("audit replay asks no policy: --candidate does not apply")
        result, findings = audit_replay(run)
        if options["json"]:
            self.stdout.write(json.dumps(_audit_json(run, result, findings), indent=2))
        else:
            self._audit_text(run, result, findings)
        if findings:
            sys.exit(1)

    def _audit_text(self, run, result, findings):  # type: ignore[no-untyped-def]
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

    def decision(self, run, options):  # type: ignore[no-untyped-def]
        candidate = options["candidate"] or replay_modes.RECORDED
        replay = replay_modes.decision_replay(run, candidate, allow_model=True)
        if options["json"]:
            self.stdout.write(json.dumps({"mode": "decision", **replay.as_dict()}, indent=2))
        else:
            self.stdout.write(
                f"decision replay of {run.pk} against {replay.candidate_label}: "
                f"{len(replay.rows)} decisions, {replay.matched} same, "
                f"{replay.diverged} different, {replay.skipped} not replayable (no effects)"
            )
            for row in replay.rows:
                mark = "=" if row.same else ("?" if row.missing else "≠")
                self.stdout.write(
                    f"  {mark} #{row.index} seq {row.sequence:>3}  recorded {row.recorded_summary}"
                    f"  -> {row.recorded_outcome}"
                )
                if row.missing:
                    self.stdout.write(f"      not replayed: {row.missing}")
                elif not row.same:
                    rejected = f" [{row.candidate_class}]" if row.candidate_class else ""
                    self.stdout.write(
                        f"      candidate {row.candidate_summary}{rejected}"
                        f"  differs in {', '.join(row.differences)}"
                    )
                if row.exposure is not None and not row.exposure.same:
                    self.stdout.write(f"      exposure today: {row.exposure.summary()}")
            for pin in replay.pin_differences:
                self.stdout.write(f"  pin: {pin.summary()}")
            if replay.first_divergence is None:
                self.stdout.write("  no divergence")
            else:
                self.stdout.write(f"  first divergence at decision {replay.first_divergence}")
        if options["check"] and (replay.first_divergence is not None or replay.skipped):
            sys.exit(1)

    def simulation(self, run, options):  # type: ignore[no-untyped-def]
        result = simulation.simulate(run, candidate=options["candidate"], allow_model=True)
        if options["json"]:
            self.stdout.write(json.dumps({"mode": "simulation", **result.as_dict()}, indent=2))
        else:
            rec, sim = result.recorded, result.simulated
            self.stdout.write(
                f"execution simulation of {run.pk} ({result.scenario}, {result.vocabulary}) "
                f"as run {sim.run_id} in world {sim.namespace}"
            )
            for label, o in (("recorded ", rec), ("simulated", sim)):
                self.stdout.write(
                    f"  {label} {o.state} {o.disposition or '-'} {o.reason or '-'}  "
                    f"{len(o.decisions)} decisions, {o.effects} effect(s) in {o.namespace}"
                )
            for line in result.scripted:
                self.stdout.write(f"  scripted: {line}")
            for line in result.notes:
                self.stdout.write(f"  note: {line}")
            verdict = "same disposition" if result.same_disposition else "DIFFERENT disposition"
            self.stdout.write(f"  {verdict}")
        if options["check"] and not result.same_disposition:
            sys.exit(1)


def _audit_json(run, result, findings):  # type: ignore[no-untyped-def]
    return {
        "mode": "audit",
        "run_id": str(run.pk),
        "events_applied": result.events_applied,
        "snapshot": result.summary(),
        "findings": [f.__dict__ for f in findings],
    }
