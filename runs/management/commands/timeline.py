"""timeline RUN_ID: print a run's events, one line each."""

from __future__ import annotations

from django.core.management.base import CommandError

from fieldops.commands import FieldOpsCommand
from kernel.text import quoted_shortly
from runs.models import Event, Run


class Command(FieldOpsCommand):
    help = "Print the event timeline of a run."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("run_id")

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        run = _get_run(options["run_id"])
        self.stdout.write(
            f"run {run.pk}  {run.state}  revision {run.revision}  "
            f"attempt {run.attempt}  epoch {run.owner_epoch}"
        )
        for e in Event.objects.filter(run=run).order_by("sequence"):
            refs = " ".join(f"{k}={v}" for k, v in sorted(e.refs.items()))
            self.stdout.write(
                f"{e.sequence:>5} {e.occurred_at[11:23]} {e.type:<32} "
                f"{e.prev_state:>16} -> {e.next_state:<16} {e.actor:<18} "
                f"{e.reason_code:<36} {refs}"
            )


def _get_run(run_id: str) -> Run:
    try:
        return Run.objects.get(pk=run_id)
    except (Run.DoesNotExist, ValueError, Exception) as exc:
        raise CommandError(f"no run {quoted_shortly(run_id)}") from exc
