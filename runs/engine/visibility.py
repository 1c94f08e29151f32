"""What a run's policy may see at a decision, and why: the exposure shell.

Reads the catalog and the run's admitted evidence, then asks the pure funnel in
``capabilities.exposure``. Used by the context projection (``visible_capabilities``)
and recorded on every ``proposal.emitted`` event, so each decision answers which
capabilities existed, which were eligible, retrieved and visible, and why the rest were not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from capabilities import registry
from capabilities.contracts import EffectClass, model_projection
from capabilities.controls import CONTROL_CONTRACTS
from capabilities.exposure import PHASE_POLICIES, Candidate, Funnel, expose, phase_for
from catalog.models import CapabilityVersion, Source
from fieldops.sql import Loader, Statement
from runs import readcache

# Retrieval budget for ordinary capabilities in live runs (controls never consume it).
LIVE_K = 5
TRUSTED_CONTROLS = frozenset(c.id for c in CONTROL_CONTRACTS)
_CACHE_ATTR = "_fieldops_exposure"


def _effect(value: Any) -> EffectClass:
    try:
        return EffectClass(value)
    except ValueError:
        # Unknown or missing classification is treated as the highest consequence.
        return EffectClass.CONSEQUENTIAL


def candidate_from(row: CapabilityVersion, pins: Mapping[str, str]) -> Candidate:
    """The exposure view of one stored version for a run with ``pins``."""
    contract = row.contract if row.source == Source.REVIEWED else {}
    pinned = pins.get(row.capability_id)
    is_pinned = pinned is not None and pinned.split("#")[0] == row.version
    code = registry.contract_for(row.capability_id, row.version)
    drift = is_pinned and (
        pinned != f"{row.version}#{row.digest[:16]}" or code is None or code.digest != row.digest
    )
    return Candidate(
        id=row.capability_id,
        version=row.version,
        family=str(contract.get("family", "")),
        effect=_effect(contract.get("effect_class")),
        lifecycle=row.lifecycle,
        purpose=str(contract.get("intent", "")),
        use_when=tuple(contract.get("use_when", ())),
        avoid_when=tuple(contract.get("avoid_when", ())),
        open_world=bool(contract.get("open_world", False)),
        pinned=is_pinned,
        drift=drift,
        contract=bool(contract),
    )


# Every catalog version, with only what the funnel reads (``CapabilityVersion.objects.only``
# of these columns, as a prepared statement; column names are the model's, never input),
# but its contract: a reviewed version's digest is the digest of its contract, which is
# never rewritten (catalog/services.py creates it with the row), so a contract read once
# is kept by digest (``_REVIEWED``) and the catalog read sends a few bytes per version
# instead of each contract's ~5 KB of JSON.
_SHOWN = Loader(
    CapabilityVersion, ["id", "capability_id", "version", "digest", "lifecycle", "source"]
)
_ALL_VERSIONS = Statement(
    f"SELECT {_SHOWN.columns} FROM catalog_capabilityversion "  # noqa: S608  # nosec B608
    "ORDER BY capability_id, version"
)
_CONTRACT_OF = Loader(CapabilityVersion, ["contract"])
_CONTRACT = Statement(
    f"SELECT {_CONTRACT_OF.columns} FROM catalog_capabilityversion WHERE id = %s"  # noqa: S608  # nosec B608
)
_REVIEWED: dict[str, dict[str, Any]] = {}


def catalog_versions() -> list[CapabilityVersion]:
    """Every stored version, ``contract`` set for a reviewed one (``{}`` for the others:
    discovered definitions never reach a model) and shared: read it, never change it."""
    versions = []
    for values in _ALL_VERSIONS.rows([]):
        row = _SHOWN.load(values)
        row.contract = _reviewed_contract(row) if row.source == Source.REVIEWED else {}
        versions.append(row)
    return versions


def _reviewed_contract(row: CapabilityVersion) -> dict[str, Any]:
    contract = _REVIEWED.get(row.digest)
    if contract is None:
        found = _CONTRACT.one([row.pk])
        if found is None:  # deleted since the catalog read: nothing to show, nothing kept
            return {}
        contract = _REVIEWED[row.digest] = _CONTRACT_OF.load_values(found)[0]
    return contract


def observed_capabilities(run: Any) -> frozenset[str]:
    """Capabilities whose successful observations the run has admitted."""
    from runs import evidence

    return frozenset(
        str(o.get("capability"))
        for o in evidence.admitted_observations(str(run.pk), revision=run.revision).values()
        if o.get("ok")
    )


def run_funnel(run: Any) -> Funnel:
    """Compute the exposure funnel of ``run``'s next decision (and remember it on ``run``)."""
    funnel = funnel_for(run, observed_capabilities(run))
    setattr(run, _CACHE_ATTR, funnel)
    return funnel


def funnel_for(run: Any, observed: Iterable[str]) -> Funnel:
    """The funnel the current catalog and phase policies give ``run`` (its pins, its goal)
    once the capabilities ``observed`` have produced admitted evidence. Reads only: decision
    replay asks it for each recorded context."""
    # What the model is shown: the catalog read once per advance (runs/readcache.py);
    # validation reads the catalog again at every decision (it enforces).
    rows = readcache.catalog_rows("visibility", catalog_versions)
    candidates = [candidate_from(row, run.components) for row in rows]
    phase = phase_for(observed)
    return expose(
        candidates,
        PHASE_POLICIES[phase],
        phase=phase.value,
        query=run.objective,
        k=LIVE_K,
        trusted_controls=TRUSTED_CONTROLS,
    )


def visible_projections(run: Any) -> list[dict[str, Any]]:
    """Model projections of the visible capabilities (sorted by id), each from the code
    contract of exactly the version the run pinned."""
    funnel = run_funnel(run)
    out = []
    for cid in funnel.visible:
        version = str(run.components.get(cid, "")).split("#")[0]
        contract = registry.contract_for(cid, version)
        if contract is not None:
            out.append(model_projection(contract))
    return out


def exposure_record(run: Any, shown: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The record for the decision event: the funnel the context used, and what was shown."""
    funnel = getattr(run, _CACHE_ATTR, None) or run_funnel(run)
    record = funnel.as_record()
    names = [str(c.get("name")) for c in shown]
    record["shown"] = names
    record["consistent"] = sorted(names) == sorted(funnel.visible)
    return record
