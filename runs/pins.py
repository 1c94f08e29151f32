"""Which runs pin a capability version: the runs' side of a catalog decision (retirement).

The catalog asks here instead of reading the runs' tables itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from runs.domain import effects
from runs.models import EffectAttempt, Run


@dataclass(frozen=True)
class VersionUse:
    active_runs: list[str]  # runs that have not ended and pin the version
    unknown_effects: list[dict[str, str]]  # unresolved attempts of runs pinning it
    tenants: dict[str, str]  # the tenant of every run in either list


def version_use(*, capability_id: str, version: str) -> VersionUse:
    """The runs pinned to ``capability_id`` at ``version`` and their unknown effects."""
    prefix = f"{version}#"

    def pins(run: Run) -> bool:
        return str(run.components.get(capability_id, "")).startswith(prefix)

    tenants: dict[str, str] = {}
    active = []
    for r in Run.objects.filter(disposition="").only("id", "components", "tenant"):
        if pins(r):
            active.append(str(r.pk))
            tenants[str(r.pk)] = r.tenant
    unknown = []
    for a in EffectAttempt.objects.filter(status__in=effects.UNRESOLVED).select_related("run"):
        if pins(a.run):
            unknown.append({"attempt": a.pk, "run": str(a.run_id), "status": a.status})
            tenants[str(a.run_id)] = a.run.tenant
    return VersionUse(active, unknown, tenants)


def run_tenants(run_ids: Iterable[str]) -> dict[str, str]:
    """The tenant of each of ``run_ids`` that names a run (a recorded list, read again)."""
    ids = []
    for run_id in run_ids:
        try:
            ids.append(uuid.UUID(str(run_id)))
        except ValueError:
            continue
    return {str(pk): t for pk, t in Run.objects.filter(pk__in=ids).values_list("pk", "tenant")}
