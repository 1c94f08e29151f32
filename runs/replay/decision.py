"""Decision replay (SPEC §6): feed each context projection a recorded run stored at
DECIDING to a candidate policy and diff the candidate's local proposal against the
recorded one, per decision.

It reads only: no capability is called, nothing is appended to any run, no evidence is
written. After the first divergence the candidate is answering contexts it would never
have reached itself; those rows are marked ``after_divergence``. Candidates are the
registered scenarios (``runs.policies.registry``) and, where allowed, the model client.

Each decision also reports its exposure difference: the capabilities its context was shown
(recorded on ``proposal.emitted``) against the ones today's catalog and phase policies
would show the same context (``runs.engine.visibility.funnel_for``), added and removed,
with why; and the replay reports the run's pins that differ from what a new run would pin
today (a run never switches version: reported, never applied).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from capabilities import registry
from catalog.models import CapabilityVersion, Source
from kernel.text import quoted_shortly
from runs import policies
from runs.domain.exposure import (
    PinDifference,
    VisibleDifference,
    pin_differences,
    visible_difference,
)
from runs.domain.proposals import InvalidProposal, Proposal, from_dict, summary, to_dict
from runs.domain.states import EventType
from runs.engine import visibility
from runs.models import Event, Evidence, Run
from runs.policies import boundary, model_client, parsing, tool_names, vocabularies
from runs.policies import registry as scenario_registry
from runs.policies.base import Policy
from runs.services import pinned_components

RECORDED = "recorded"
# The same recorded raw outputs, read by today's adapter version of their vocabulary: what
# upgrading a run's adapter would change in how its answers are read.
RECORDED_NEWEST = "recorded-newest-adapter"
# Evidence ids differ between a run and its simulation; decisions compare without them.


class ReplayError(ValueError):
    """A replay that cannot be performed (unknown candidate, a simulation of a simulation)."""


def kinds() -> dict[str, str]:
    """Capability id -> proposal kind, the same map the runner gives the adapter."""
    return {cid: c.kind.value for cid, c in registry.ALL_CONTRACTS.items()}


def candidates(*, allow_model: bool = False) -> list[str]:
    """Candidate names decision replay accepts: recorded outputs (read by the adapter
    version that read them, then by today's), then every scenario."""
    names = [RECORDED, RECORDED_NEWEST, *sorted(scenario_registry.scenarios())]
    return [*names, model_client.SCENARIO] if allow_model else names


def run_vocabulary(run: Run) -> vocabularies.Vocabulary | None:
    try:
        return policies.vocabulary_for(run.model_adapter_version)
    except ValueError:
        return None


# -- decision replay ------------------------------------------------------------------------
@dataclass(frozen=True)
class DecisionRow:
    index: int
    sequence: int
    turn: int
    context_hash: str
    recorded: dict[str, Any]
    candidate: dict[str, Any] | None
    recorded_summary: str
    candidate_summary: str
    recorded_outcome: str
    candidate_class: str
    differences: tuple[str, ...]
    same: bool
    after_divergence: bool
    missing: str = ""  # why this decision could not be replayed ("" when it was)
    # Recorded visible set against today's (None: the context projection was not stored).
    exposure: VisibleDifference | None = None


@dataclass(frozen=True)
class DecisionReplay:
    run_id: str
    candidate: str
    candidate_label: str
    vocabulary: str
    rows: tuple[DecisionRow, ...]
    first_divergence: int | None  # the index of the first differing decision
    # The run's pins that differ from what a new run would pin today.
    pin_differences: tuple[PinDifference, ...] = ()

    @property
    def exposure_changed(self) -> int:
        """Decisions whose visible set today differs from the recorded one."""
        return sum(1 for r in self.rows if r.exposure is not None and not r.exposure.same)

    @property
    def matched(self) -> int:
        return sum(1 for r in self.rows if r.same)

    @property
    def diverged(self) -> int:
        return sum(1 for r in self.rows if not r.same and not r.missing)

    @property
    def skipped(self) -> int:
        return sum(1 for r in self.rows if r.missing)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            matched=self.matched,
            diverged=self.diverged,
            skipped=self.skipped,
            exposure_changed=self.exposure_changed,
            pin_differences=[p.as_dict() for p in self.pin_differences],
        )
        for row, out in zip(self.rows, data["rows"], strict=True):
            out["exposure"] = row.exposure.as_dict() if row.exposure is not None else None
        return data


class _Candidate:
    """How a candidate answers one recorded decision."""

    def __init__(self, name: str, run: Run, *, allow_model: bool) -> None:
        vocab = run_vocabulary(run)
        self.name = name
        self.policy: Policy | None = None
        # A double speaks the run's vocabulary and is read by the run's own adapter version.
        self.adapter: vocabularies.Vocabulary | None = vocab
        if name == RECORDED:
            self.vocabulary = vocab.name if vocab else "recorded"
            self.label = (
                "recorded raw outputs, parsed again by the adapter version they were read with"
            )
        elif name == RECORDED_NEWEST:
            self.vocabulary = vocab.name if vocab else "recorded"
            self.label = (
                "recorded raw outputs, parsed by today's adapter version of their vocabulary"
            )
        elif scenario_registry.get(name) is not None:
            self.vocabulary = vocab.name if vocab else "openai"
            self.policy = scenario_registry.scenarios()[name].policy(self.vocabulary)
            self.label = f"policy double {name!r} speaking {self.vocabulary}"
        elif name == model_client.SCENARIO and allow_model:
            self.vocabulary = model_client.VOCABULARY
            self.adapter = None  # the model client answers as a new run would be read
            self.policy = model_client.ModelClientPolicy()
            self.label = f"model client ({self.policy.name})"
        else:
            raise ReplayError(
                f"unknown candidate {quoted_shortly(name)}; choose one of {candidates()}"
            )
        self.kinds = kinds()

    def answer(self, projection: Mapping[str, Any], raw: Mapping[str, Any] | None) -> Proposal:
        if self.policy is None:
            assert raw is not None
            if raw.get("error"):
                return parsing.provider_error(str(raw["error"]))
            adapter = (
                _newest_adapter(raw, self.vocabulary)
                if self.name == RECORDED_NEWEST
                else _recorded_adapter(raw, self.vocabulary)
            )
            return self._read(adapter, raw.get("raw", {}), projection)
        try:
            output = self.policy.decide(projection)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            # A candidate that cannot read a recorded context is a finding, not a crash.
            return InvalidProposal("candidate_error", f"{type(exc).__name__}: {exc}")
        if output.error:
            return parsing.provider_error(output.error)
        adapter = self.adapter or vocabularies.get(self.vocabulary)
        return self._read(adapter, output.raw, projection)

    def _read(
        self, adapter: vocabularies.Vocabulary, raw: Any, projection: Mapping[str, Any]
    ) -> Proposal:
        """The proposal ``raw`` makes, read as the runner reads it: a call by a name the
        recorded projection offered a capability under is that capability."""
        reading = tool_names.read(adapter.read, raw, self.kinds, projection)
        return boundary.bounded_reasons(reading.proposal)


def _recorded_adapter(raw: Mapping[str, Any], vocabulary: str) -> vocabularies.Vocabulary:
    """The adapter a recorded raw output is read by again: the version that read it then
    (``adapter_version`` of the raw-output evidence), never a later mapping. An output
    recorded before evidence named its version is read by the vocabulary's current one;
    a version this code no longer has answers ``adapter_unavailable``."""
    version = raw.get("adapter_version")
    provider = str(raw.get("provider", vocabulary))
    try:
        if isinstance(version, str) and version:
            return vocabularies.for_version(version)
        return vocabularies.get(provider)
    except ValueError:
        return policies.unavailable_vocabulary(str(version or provider))


def _newest_adapter(raw: Mapping[str, Any], vocabulary: str) -> vocabularies.Vocabulary:
    """Today's adapter for the vocabulary a recorded raw output was read in: the version
    a new run pins. A vocabulary this code no longer has answers ``adapter_unavailable``."""
    provider = str(raw.get("provider", vocabulary))
    try:
        return vocabularies.get(provider)
    except ValueError:
        return policies.unavailable_vocabulary(provider)


def decision_replay(run: Run, candidate: str, *, allow_model: bool = False) -> DecisionReplay:
    """Replay every recorded decision of ``run`` through ``candidate``; write nothing.

    ``candidate`` is ``"recorded"`` (the stored raw outputs through the adapter version
    that read them: shows mapping drift), ``"recorded-newest-adapter"`` (the same outputs
    through today's adapter version: what an adapter upgrade would change), a
    policy-double scenario, or (``allow_model``) the model client.
    Raise ReplayError for an unknown candidate.
    """
    chosen = _Candidate(candidate, run, allow_model=allow_model)
    events = list(Event.objects.filter(run=run).order_by("sequence"))
    by_sequence = {e.sequence: e for e in events}
    emitted = [e for e in events if e.type == EventType.PROPOSAL_EMITTED.value]
    wanted = [e.refs.get(k, "") for e in emitted for k in ("proposal", "observation", "raw_output")]
    stored = dict(
        Evidence.objects.filter(pk__in=[w for w in wanted if w]).values_list("pk", "content")
    )
    rows: list[DecisionRow] = []
    first: int | None = None
    for index, event in enumerate(emitted, start=1):
        recorded = stored.get(event.refs.get("proposal", ""))
        projection = stored.get(event.refs.get("observation", ""))
        raw = stored.get(event.refs.get("raw_output", ""))
        missing = ""
        if recorded is None:
            missing = "the recorded proposal evidence is missing"
        elif projection is None:
            missing = "the context projection of this decision was not stored"
        elif chosen.policy is None and raw is None:
            missing = "the raw output of this decision was not stored"
        recorded_proposal = from_dict(recorded or {})
        after = first is not None
        exposure = _exposure_difference(run, event, projection)
        if missing:
            rows.append(
                DecisionRow(
                    index=index,
                    sequence=event.sequence,
                    turn=int(event.budget.get("turns", 0)),
                    context_hash=str(event.payload.get("context_hash", "")),
                    recorded=dict(recorded or {}),
                    candidate=None,
                    recorded_summary=summary(recorded_proposal) if recorded else "-",
                    candidate_summary="-",
                    recorded_outcome=_outcome_after(by_sequence, event.sequence),
                    candidate_class="",
                    differences=(),
                    same=False,
                    after_divergence=after,
                    missing=missing,
                    exposure=exposure,
                )
            )
            continue
        assert recorded is not None and projection is not None
        proposal = chosen.answer(projection, raw)
        answered = to_dict(proposal)
        differences = tuple(_differences(dict(recorded), answered))
        same = not differences
        if not same and first is None:
            first = index
        rows.append(
            DecisionRow(
                index=index,
                sequence=event.sequence,
                turn=int(projection.get("turn", 0)),
                context_hash=str(event.payload.get("context_hash", "")),
                recorded=dict(recorded),
                candidate=answered,
                recorded_summary=summary(recorded_proposal),
                candidate_summary=summary(proposal),
                recorded_outcome=_outcome_after(by_sequence, event.sequence),
                candidate_class=parsing.classify(proposal, chosen.kinds),
                differences=differences,
                same=same,
                after_divergence=after,
                exposure=exposure,
            )
        )
    return DecisionReplay(
        run_id=str(run.pk),
        candidate=candidate,
        candidate_label=chosen.label,
        vocabulary=chosen.vocabulary,
        rows=tuple(rows),
        first_divergence=first,
        pin_differences=run_pin_differences(run),
    )


def _exposure_difference(
    run: Run, event: Event, projection: Mapping[str, Any] | None
) -> VisibleDifference | None:
    """The decision's recorded visible set against what today's catalog and exposure policy
    would show the same context (its admitted observations set the phase)."""
    if projection is None:
        return None
    record = event.payload.get("exposure") or {}
    recorded = event.payload.get("visible", record.get("visible"))
    observed = [
        str(o.get("capability", "")) for o in projection.get("observations", ()) if o.get("ok")
    ]
    funnel = visibility.funnel_for(run, observed)
    return visible_difference(
        None if recorded is None else [str(c) for c in recorded],
        funnel.visible,
        reasons=funnel.reasons,
        recorded_phase=str(record.get("phase", "")),
        current_phase=funnel.phase,
    )


def run_pin_differences(run: Run) -> tuple[PinDifference, ...]:
    """The run's pins (its component set) that differ from what a new run pins today."""
    lifecycles = {
        f"{cid}@{version}": state
        for cid, version, state in CapabilityVersion.objects.filter(
            source=Source.REVIEWED
        ).values_list("capability_id", "version", "lifecycle")
    }
    return (
        *pin_differences(
            {str(k): str(v) for k, v in run.components.items()},
            pinned_components(),
            lifecycles=lifecycles,
        ),
        *_adapter_difference(run),
    )


def _adapter_difference(run: Run) -> tuple[PinDifference, ...]:
    """The run's model adapter version, when a new run of its vocabulary pins another."""
    pinned = run.model_adapter_version
    family = pinned.split("@")[0]
    for vocabulary in vocabularies.VOCABULARIES.values():
        current = vocabulary.adapter_version
        if current.split("@")[0] == family and current != pinned:
            return (PinDifference("model_adapter", pinned, current),)
    return ()


def _outcome_after(by_sequence: Mapping[int, Event], sequence: int) -> str:
    """What the recorded run made of the proposal emitted at ``sequence``."""
    following = by_sequence.get(sequence + 1)
    if following is None:
        return "-"
    reason = f" {following.reason_code}" if following.reason_code else ""
    return f"{following.type}{reason}"


def _differences(recorded: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Field paths where two stored proposals differ (one level into args/artifact)."""
    found: list[str] = []
    for key in sorted(set(recorded) | set(candidate)):
        a, b = recorded.get(key), candidate.get(key)
        if a == b:
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found.extend(f"{key}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
        else:
            found.append(key)
    return found


# -- execution simulation --------------------------------------------------------------------
