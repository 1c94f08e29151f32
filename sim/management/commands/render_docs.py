"""render_docs: write the docs generated from code; --check fails if they are stale."""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings

from catalog import docs as catalog_docs
from fieldops.commands import FieldOpsCommand
from runs import docs as run_docs
from sim import docs as sim_docs


class Command(FieldOpsCommand):
    help = (
        "Regenerate the docs generated from code: docs/engine.md, docs/effects.md, "
        "docs/faultlab.md, docs/versions.md and docs/state-machine.svg."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit non-zero if a generated doc differs from the code",
        )

    def handle(self, *args, **options):  # type: ignore[no-untyped-def]
        stale = []
        generated = {
            **run_docs.generated_files(),
            **sim_docs.generated_files(),
            **catalog_docs.generated_files(),
        }
        for relative, text in generated.items():
            path = Path(settings.BASE_DIR) / relative
            current = path.read_text() if path.exists() else None
            if current == text:
                continue
            if options["check"]:
                stale.append(relative)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                self.stdout.write(f"wrote {relative}")
        if stale:
            self.stderr.write("stale generated docs (run `make docs`): " + ", ".join(stale))
            sys.exit(1)
