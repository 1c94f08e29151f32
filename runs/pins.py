"""Which runs pin a capability version: the runs' side of a catalog decision (retirement).

The catalog asks here instead of reading the runs' tables itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from runs.domain import effects
from runs.models import EffectAttempt, Run


@dataclass(frozen=True)
class VersionUse:
    active_runs: list[str]  # runs that have not ended and pin the version
    unknown_effects: list[dict[str, str]]  # unresolved attempts of runs pinning it


def version_use(*, capability_id: str, version: str) -> VersionUse:
    """The runs pinned to ``capability_id`` at ``version`` and their unknown effects."""
    prefix = f"{version}#"

    def pins(run: Run) -> bool:
        return str(run.components.get(capability_id, "")).startswith(prefix)

    active = [
        str(r.pk) for r in Run.objects.filter(disposition="").only("id", "components") if pins(r)
    ]
    unknown = [
        {"attempt": a.pk, "run": str(a.run_id), "status": a.status}
        for a in EffectAttempt.objects.filter(status__in=effects.UNRESOLVED).select_related("run")
        if pins(a.run)
    ]
    return VersionUse(active, unknown)
