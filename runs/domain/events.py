"""The run record, the event record, and the fold that applies one to the other.

``apply`` is the single definition of how an event changes a run. The transition
authority uses it to compute the next run row; audit replay uses it to rebuild the run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kernel.canonical import chain_hash, digest

from .budgets import zero_counters
from .states import STATE_MACHINE_VERSION, EventType, State, is_terminal

# Values that need no escaping or normalization in canonical JSON.
_PLAIN = re.compile(r"[A-Za-z0-9:.+\-_]*\Z")

REF_KEYS: frozenset[str] = frozenset(
    {
        "observation",
        "proposal",
        "raw_output",
        "commentary",
        "validation",
        "approval",
        "checkpoint",
        "correlation",
        "effect",
        "attempt",
        "completion",
        "artifact",
        "callback",
    }
)


@dataclass(frozen=True)
class RunConfig:
    """The immutable configuration fixed at creation (the 'initial run record')."""

    run_id: str
    task_id: str
    contract_version: str
    policy_version: str
    model_adapter_version: str
    component_set: str
    tenant: str
    principal_ref: str
    scope: tuple[str, ...]
    limits: Mapping[str, int]
    deadline: str
    created_at: str

    def genesis_hash(self) -> str:
        """Return the hash that the first event links to: the digest of this config."""
        return digest(
            {
                "run_id": self.run_id,
                "task_id": self.task_id,
                "contract_version": self.contract_version,
                "policy_version": self.policy_version,
                "model_adapter_version": self.model_adapter_version,
                "component_set": self.component_set,
                "tenant": self.tenant,
                "principal_ref": self.principal_ref,
                "scope": list(self.scope),
                "limits": dict(self.limits),
                "deadline": self.deadline,
                "created_at": self.created_at,
            }
        )


@dataclass(frozen=True)
class RunSnapshot:
    """What the run is now. Everything here is derivable by folding its events."""

    config: RunConfig
    state: State = State.CREATED
    revision: int = 0
    attempt: int = 1
    owner_epoch: int = 0
    counters: Mapping[str, int] = field(default_factory=zero_counters)
    limits: Mapping[str, int] = field(default_factory=dict)
    cancel_revision: int = 0
    last_hash: str = ""
    disposition: str = ""
    terminal_reason: str = ""
    terminal_sequence: int = 0
    waiting_checkpoint: str = ""
    waiting_correlation: str = ""
    current_proposal: str = ""
    pending_observation: str = ""

    @classmethod
    def initial(cls, config: RunConfig) -> RunSnapshot:
        return cls(config=config, limits=dict(config.limits), last_hash=config.genesis_hash())

    @property
    def run_id(self) -> str:
        return self.config.run_id

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)


@dataclass(frozen=True)
class EventRecord:
    event_id: str
    run_id: str
    sequence: int
    attempt: int
    owner_epoch: int
    type: EventType
    actor: str
    prev_state: State
    next_state: State
    contract_version: str
    policy_version: str
    component_set: str
    budget: Mapping[str, int]
    cancel_revision: int
    reason_code: str
    refs: Mapping[str, str]
    payload: Mapping[str, Any]
    occurred_at: str
    schema_version: int
    prev_hash: str
    content_hash: str
    hash: str

    def content(self) -> dict[str, Any]:
        """``event_content`` of this event's fields (what its content hash covers), built
        directly: replay builds one per event."""
        return {
            "run_id": self.run_id,
            "type": str(self.type),
            "actor": self.actor,
            "attempt": self.attempt,
            "owner_epoch": self.owner_epoch,
            "prev_state": str(self.prev_state),
            "next_state": str(self.next_state),
            "contract_version": self.contract_version,
            "policy_version": self.policy_version,
            "component_set": self.component_set,
            "budget": dict(self.budget),
            "cancel_revision": self.cancel_revision,
            "reason_code": self.reason_code,
            "refs": dict(self.refs),
            "payload": dict(self.payload),
            "schema_version": self.schema_version,
        }

    def recomputed_content_hash(self) -> str:
        return digest(self.content())

    def recomputed_hash(self) -> str:
        return link_hash(
            prev_hash=self.prev_hash,
            content_hash=self.recomputed_content_hash(),
            event_id=self.event_id,
            sequence=self.sequence,
            occurred_at=self.occurred_at,
        )


def event_content(**fields: Any) -> dict[str, Any]:
    """Return the semantic content of an event: what duplicate detection compares."""
    out = dict(fields)
    out["type"] = str(out["type"])
    out["prev_state"] = str(out["prev_state"])
    out["next_state"] = str(out["next_state"])
    out["budget"] = dict(out["budget"])
    out["refs"] = dict(out["refs"])
    out["payload"] = dict(out["payload"])
    return out


def link_hash(
    *, prev_hash: str, content_hash: str, event_id: str, sequence: int, occurred_at: str
) -> str:
    if (
        type(sequence) is int
        and type(content_hash) is str
        and type(event_id) is str
        and type(occurred_at) is str
        and _PLAIN.match(content_hash + event_id + occurred_at)
    ):
        # Exactly the canonical JSON of the envelope below (sorted keys, no whitespace) for plain
        # ASCII values, written without the encoder: this runs for every replayed event.
        text = (
            f'{{"content_hash":"{content_hash}","event_id":"{event_id}",'
            f'"occurred_at":"{occurred_at}","sequence":{sequence}}}'
        )
        envelope = hashlib.sha256(text.encode("ascii")).hexdigest()
    else:
        envelope = digest(
            {
                "content_hash": content_hash,
                "event_id": event_id,
                "sequence": sequence,
                "occurred_at": occurred_at,
            }
        )
    return chain_hash(prev_hash, envelope)


def build_event(
    snapshot: RunSnapshot,
    *,
    event_id: str,
    type: EventType,
    actor: str,
    next_state: State,
    occurred_at: str,
    counters_delta: Mapping[str, int] | None = None,
    elapsed_ms: int | None = None,
    reason_code: str = "",
    refs: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    attempt: int | None = None,
    owner_epoch: int | None = None,
) -> EventRecord:
    """Return the next event for ``snapshot`` with sequence, budget snapshot and hash link.

    The content is built once, as ``event_content`` would build it (the same keys and
    values, so the same canonical text and hash), without its second copy of every
    mapping: the authority calls this for every append.
    """
    budget = dict(snapshot.counters)
    if counters_delta:
        for key, amount in counters_delta.items():
            budget[key] = budget.get(key, 0) + amount
    if elapsed_ms is not None:
        budget["elapsed_ms"] = max(budget.get("elapsed_ms", 0), elapsed_ms)
    sequence = snapshot.revision + 1
    cancel_revision = sequence if type is EventType.RUN_CANCELLED else snapshot.cancel_revision
    record_refs = {k: str(v) for k, v in refs.items() if v} if refs else {}
    record_payload = dict(payload) if payload else {}
    config = snapshot.config
    actor = str(actor)
    attempt = snapshot.attempt if attempt is None else attempt
    owner_epoch = snapshot.owner_epoch if owner_epoch is None else owner_epoch
    content = {
        "run_id": config.run_id,
        "type": str(type),
        "actor": actor,
        "attempt": attempt,
        "owner_epoch": owner_epoch,
        "prev_state": str(snapshot.state),
        "next_state": str(next_state),
        "contract_version": config.contract_version,
        "policy_version": config.policy_version,
        "component_set": config.component_set,
        "budget": budget,
        "cancel_revision": cancel_revision,
        "reason_code": reason_code,
        "refs": record_refs,
        "payload": record_payload,
        "schema_version": STATE_MACHINE_VERSION,
    }
    content_hash = digest(content)
    return record_of_values(
        (
            event_id,
            config.run_id,
            sequence,
            attempt,
            owner_epoch,
            type,
            actor,
            snapshot.state,
            next_state,
            config.contract_version,
            config.policy_version,
            config.component_set,
            budget,
            cancel_revision,
            reason_code,
            record_refs,
            record_payload,
            occurred_at,
            STATE_MACHINE_VERSION,
            snapshot.last_hash,
            content_hash,
            link_hash(
                prev_hash=snapshot.last_hash,
                content_hash=content_hash,
                event_id=event_id,
                sequence=sequence,
                occurred_at=occurred_at,
            ),
        )
    )


_RECORD_FIELDS = tuple(f.name for f in fields(EventRecord))
_NEW = object.__new__


def record_of_values(values: Iterable[Any]) -> EventRecord:
    """``EventRecord(*values)`` at less than half the cost: a frozen dataclass's ``__init__``
    sets each of its 22 fields through ``object.__setattr__``, which is a tenth of the
    per-event cost of reading a history and a visible part of an append. The result is
    equal to the constructor's (the record has no ``__post_init__`` and no slots;
    tests/runs/replay and tests/domain check both)."""
    record: EventRecord = _NEW(EventRecord)
    record.__dict__.update(zip(_RECORD_FIELDS, values, strict=True))
    return record


_WAIT_OPENERS = {
    EventType.APPROVAL_REQUIRED: "checkpoint",
    EventType.CLARIFICATION_REQUIRED: "checkpoint",
    EventType.WAIT_ADMITTED: "correlation",
}


def apply(snapshot: RunSnapshot, event: EventRecord) -> RunSnapshot:
    """Return the run after ``event``. Assumes the invariants were checked."""
    changes: dict[str, Any] = {
        "revision": event.sequence,
        "state": event.next_state,
        "counters": dict(event.budget),
        "cancel_revision": event.cancel_revision,
        "last_hash": event.hash,
        "attempt": max(snapshot.attempt, event.attempt),
        "owner_epoch": max(snapshot.owner_epoch, event.owner_epoch),
    }
    if event.type is EventType.BUDGET_CHANGED:
        changes["limits"] = {**snapshot.limits, **dict(event.payload.get("limits", {}))}
    if is_terminal(event.next_state) and not snapshot.terminal:
        changes["disposition"] = event.next_state.value
        changes["terminal_reason"] = event.reason_code
        changes["terminal_sequence"] = event.sequence
    if event.next_state is not snapshot.state:
        changes["waiting_checkpoint"] = ""
        changes["waiting_correlation"] = ""
        opener = _WAIT_OPENERS.get(event.type)
        if opener == "checkpoint":
            changes["waiting_checkpoint"] = event.refs.get("checkpoint", "")
        elif opener == "correlation":
            changes["waiting_correlation"] = event.refs.get("correlation", "")
    if event.type is EventType.PROPOSAL_EMITTED:
        changes["current_proposal"] = event.refs.get("proposal", "")
    if event.next_state is State.OBSERVING and snapshot.state is not State.OBSERVING:
        changes["pending_observation"] = event.refs.get("observation") or event.refs.get(
            "completion", ""
        )
    # A copy with ``changes``: every field is a plain value already validated by the fold,
    # so the dataclass constructor's work (replace()) is skipped; replay calls this per event.
    after = object.__new__(RunSnapshot)
    after.__dict__.update(snapshot.__dict__)
    after.__dict__.update(changes)
    return after
