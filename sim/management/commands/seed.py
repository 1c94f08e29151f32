"""seed: what every deployment needs before its first run, demo users never included.

The reviewed catalog (``catalog_sync``: every reviewed capability version, the
dispatchable ones admitted), the synthetic world's inventory (live and fault-lab
namespaces) and the fault lab's system principals (no password). Idempotent: it only adds
what is missing, so it runs after every ``migrate`` (docker-compose's ``migrate`` service
does). Without it no run can start ("no admitted capability versions to pin").
"""

from __future__ import annotations

from typing import Any

from fieldops.commands import FieldOpsCommand
from sim.setup import seed


class Command(FieldOpsCommand):
    help = (
        "Store the reviewed catalog, seed the synthetic world and create the system "
        "principals (no demo users). Idempotent: run it after every migrate."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        for line in seed(demo_users=False):
            self.stdout.write(line)
